"""Busy sessions and the shortcuts of the hot path: a task never waits for a session another
worker holds, yet no message is left behind; the broker transport reuses its Redis client; an
embedded index held by another process is not reopened on every query."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from kombu import Connection
from sqlmodel import col, select

from cairn.db.models import ContextCheckpoint, ContextTelemetry, OutboundMessage
from cairn.llm.types import LLMRequest, LLMResponse, TextBlock, TextSink
from cairn.memory.index import EdgeIndex, IndexedMemory, IndexUnavailable
from cairn.runtime import Runtime
from cairn.sessions.events import ChatEvent
from cairn.sessions.ingest import Admission, ingest
from cairn.sessions.log import EventLog
from cairn.workers.broker import Transport
from cairn.workers.turn import handle_pending


def _queue(rt: Runtime, text: str) -> int:
    event = ChatEvent(
        platform="console", tenant="acme", channel="C1", thread="t1", user="ann", text=text
    )
    result = ingest(EventLog(rt.db), event, agent="cairn", max_chars=1000)
    assert result.admission is Admission.QUEUED
    assert result.session_id is not None
    return result.session_id


class _Gated:
    """A model whose first answer waits until the test lets it go."""

    name = "gated"

    def __init__(self) -> None:
        self.thinking = threading.Event()
        self.go = threading.Event()
        self.calls = 0

    def complete(self, request: LLMRequest, *, sink: TextSink | None = None) -> LLMResponse:
        self.calls += 1
        if self.calls == 1:
            self.thinking.set()
            assert self.go.wait(30)
        return LLMResponse((TextBlock(f"answer {self.calls}"),))


def test_a_task_for_a_busy_session_returns_at_once_and_the_holder_answers_for_it(
    runtime: Runtime,
) -> None:
    model = _Gated()
    runtime._llm = model
    session_id = _queue(runtime, "first question")
    handled: list[int] = []
    holder = threading.Thread(target=lambda: handled.append(handle_pending(runtime, session_id)))
    holder.start()
    assert model.thinking.wait(30)  # the holder is mid-turn, lock held

    _queue(runtime, "second question")
    started = time.monotonic()
    assert handle_pending(runtime, session_id) == 0  # turned away, not queued behind the lock
    assert time.monotonic() - started < 2

    model.go.set()
    holder.join(30)
    assert handled == [2]  # the holder answered the second message too
    with runtime.db.session() as s:
        replies = s.exec(
            select(OutboundMessage)
            .where(OutboundMessage.session_id == session_id)
            .order_by(col(OutboundMessage.id))
        ).all()
        assert [r.text for r in replies] == ["answer 1", "answer 2"]
        # The turns' checkpoint and telemetry were written with their replies.
        assert s.exec(select(ContextCheckpoint)).one().session_id == session_id
        assert len(s.exec(select(ContextTelemetry)).all()) == 2


def test_the_broker_transport_acknowledges_through_one_reused_client(redis_url: str) -> None:
    with Connection(redis_url, transport=Transport) as conn:
        queue = conn.SimpleQueue("cairn-test-transport")
        for n in range(3):
            queue.put({"n": n})
        clients = set()
        got = []
        for _ in range(3):
            message = queue.get(timeout=5)
            got.append(message.payload["n"])
            message.ack()
            clients.add(id(queue.channel._shared_client))
        assert got == [0, 1, 2]
        assert len(clients) == 1
        # Acknowledged for real: nothing is left unacked for a restart to redeliver.
        client = queue.channel._shared_client
        assert client.hlen(queue.channel.unacked_key) == 0
        queue.close()


@pytest.mark.parametrize("serves", [True, False], ids=["holder serves", "holder can't serve"])
def test_an_edge_index_held_by_another_process_is_not_reopened_on_every_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, serves: bool
) -> None:
    # A holder that can't make its socket (or an older release's) leaves the others lexical.
    refuse = "" if serves else "edge.ShardServer.start = lambda self: _refused()"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from pathlib import Path
                from cairn.memory.index import EdgeIndex, edge
                def _refused():
                    raise OSError("no socket here")
                {refuse}
                EdgeIndex(Path({str(tmp_path)!r}), dense_dim=4).count()
                print("open", flush=True)
                sys.stdin.read()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "open"
        index = EdgeIndex(tmp_path, dense_dim=4)
        if serves:
            assert index.count() == 0  # the holder's answer
        else:
            with pytest.raises(IndexUnavailable, match="unavailable"):
                index.count()
        started = time.perf_counter()
        for _ in range(20):
            if serves:
                assert index.search("deploy", "acme", "cairn", 5) == []
            else:
                with pytest.raises(IndexUnavailable, match="unavailable"):
                    index.search("deploy", "acme", "cairn", 5)
        # Twenty queries answer from the remembered failure (and the holder), without trying
        # to open the folder again.
        assert time.perf_counter() - started < 0.5
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(30)
    # The holder has gone: after the retry pause this process takes the index over.
    monkeypatch.setattr("cairn.memory.index.edge._RETRY_AFTER", 0.2)
    time.sleep(0.3)
    assert index.count() == 0
    assert Path(index.where + ".serve").exists()  # and serves it in its turn


def test_an_edge_shard_searches_on_one_thread_including_one_made_before(tmp_path: Path) -> None:
    # A pool of search threads per query cost more CPU than it saved on a busy worker; a shard
    # an earlier release created (without the setting) takes it when it is opened.
    import qdrant_edge as qe

    older = EdgeIndex(tmp_path / "older", dense_dim=4)
    config = older._config(qe)
    before = qe.EdgeConfig(vectors=config.vectors, sparse_vectors=config.sparse_vectors)
    Path(older.where).mkdir(parents=True)
    qe.EdgeShard.create(older.where, before).close()
    fresh = EdgeIndex(tmp_path / "fresh", dense_dim=4)
    for index in (older, fresh):
        memory = IndexedMemory(
            1, "deploys freeze on fridays", "acme", "cairn", "team", [1.0, 0, 0, 0]
        )
        index.upsert([memory])
        assert [mid for mid, _ in index.search("deploys", "acme", "cairn", 5)] == [1]
        saved = json.loads((Path(index.where) / "edge_config.json").read_text())
        assert saved["max_search_threads"] == 1


_OPENER = """
import json, os, sys, time
from pathlib import Path
from cairn.memory.index import EdgeIndex, IndexedMemory, IndexUnavailable
index = EdgeIndex(Path(sys.argv[1]), dense_dim=4)
sys.stdin.readline()  # go
memory = IndexedMemory(os.getpid(), "deploys freeze on fridays", "acme", "cairn", "team",
                       [1.0, 0, 0, 0])
held = []
for _ in range(100):  # the loser waits for the winner to serve the shard it holds
    try:
        index.upsert([memory])
        break
    except IndexUnavailable as exc:
        held.append(str(exc))
        time.sleep(0.05)
found = [mid for mid, _ in index.search("deploys", "acme", "cairn", 5)]
print("ok" if os.getpid() in found else "lost", os.getpid(), flush=True)
print(json.dumps(held), flush=True)
sys.stdin.readline()  # done
print(index.count(), flush=True)
sys.stdin.read()
"""


def test_processes_that_open_a_new_edge_folder_together_leave_one_working_shard(
    tmp_path: Path,
) -> None:
    # Two `cairn worker` processes started together on the embedded folder both used to create
    # the shard: the loser broke the winner's files and neither had an index. Now exactly one
    # opens it and serves it; the other, told who holds it until then, writes and searches
    # through the holder, and the shard outlives its holder intact, with both points.
    for round_ in range(4):
        folder = tmp_path / str(round_)
        openers = [
            subprocess.Popen(
                [sys.executable, "-c", _OPENER, str(folder)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        try:
            for opener in openers:
                assert opener.stdin is not None
                opener.stdin.write("go\n")
                opener.stdin.flush()
            said = [_lines(opener, 2) for opener in openers]
            for opener in openers:
                assert opener.stdin is not None
                opener.stdin.write("done\n")
                opener.stdin.flush()
            counts = [_lines(opener, 1)[0] for opener in openers]
        finally:
            for opener in openers:
                assert opener.stdin is not None
                opener.stdin.close()
                opener.wait(30)
        assert [line.split()[0] for line, _ in said] == ["ok", "ok"], said
        assert counts == ["2", "2"]
        pids = [int(line.split()[1]) for line, _ in said]
        holder = int((folder / "edge_v3_d4.lock").read_text())
        assert holder in pids
        for held in (json.loads(waits) for _, waits in said):
            assert all(f"held by another process (pid {holder})" in why for why in held), held
        # The holder has exited: the next process opens the same shard, both points intact.
        index = EdgeIndex(folder, dense_dim=4)
        assert sorted(mid for mid, _ in index.search("deploys", "acme", "cairn", 5)) == sorted(pids)


def _lines(process: subprocess.Popen[str], n: int) -> list[str]:
    assert process.stdout is not None
    return [process.stdout.readline().strip() for _ in range(n)]


def _lock_as_another_open_file(lock: Path) -> int:
    """Take the lock file's flock through a descriptor of its own, as another process would.

    flock belongs to the open file, so a second open in this process conflicts like one in
    another process.
    """
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def test_a_process_that_loses_the_race_by_microseconds_still_names_the_holder(
    tmp_path: Path,
) -> None:
    # The holder writes its pid just after it takes the lock; a loser that reads the lock file
    # in between found it empty (or naming an exited holder) and said "held by another
    # process" without saying which. It waits a moment for a live pid instead.
    index = EdgeIndex(tmp_path, dense_dim=4)
    lock = Path(index.where + ".lock")
    lock.write_text("999999999")  # a holder that has exited, left by a kill -9
    fd = _lock_as_another_open_file(lock)

    def claim_late() -> None:
        time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)

    writer = threading.Thread(target=claim_late)
    writer.start()
    try:
        with pytest.raises(
            IndexUnavailable, match=rf"held by another process \(pid {os.getpid()}\)"
        ):
            index.count()
    finally:
        writer.join()
        os.close(fd)
    # Nobody named at all: the message says so without a pid, after half a second, not forever.
    os.truncate(lock, 0)
    fd = _lock_as_another_open_file(lock)
    try:
        other = EdgeIndex(tmp_path, dense_dim=4)
        started = time.monotonic()
        with pytest.raises(IndexUnavailable, match=r"held by another process; ") as raised:
            other.count()
        assert "(pid" not in str(raised.value)
        assert time.monotonic() - started < 5
    finally:
        os.close(fd)
