"""The embedded index shared by a home's processes: the one that opens the shard serves it on a
Unix socket, and the others search and write through it instead of recalling lexically."""

from __future__ import annotations

import json
import signal
import socket
import stat
import struct
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cairn.memory.index import EdgeIndex, IndexedMemory, IndexUnavailable
from cairn.memory.index.shared import ShardClient, address_file
from cairn.memory.periods import Period

_HOLDER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from cairn.memory.index import EdgeIndex
    index = EdgeIndex(Path(sys.argv[1]), dense_dim=4)
    index.count()
    print("open", flush=True)
    for line in sys.stdin:  # a query to answer from the holder's own shard
        query, rooms = json.loads(line)
        found = index.search(query, "acme", "cairn", 10, rooms=rooms)
        dense = index.search_dense([0.0, 1.0, 0.0, 0.0], "acme", "cairn", 10, rooms=rooms)
        print(json.dumps([sorted(m for m, _ in found), [m for m, _ in dense]]), flush=True)
    """
)


def _holder(folder: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "open"
    return holder


def _ask(holder: subprocess.Popen[str], query: str, rooms: list[str] | None) -> list[list[int]]:
    assert holder.stdin is not None
    assert holder.stdout is not None
    holder.stdin.write(json.dumps([query, rooms]) + "\n")
    holder.stdin.flush()
    answer: list[list[int]] = json.loads(holder.stdout.readline())
    return answer


def _memory(memory_id: int, text: str, vector: list[float], **fields: object) -> IndexedMemory:
    return IndexedMemory(memory_id, text, "acme", "cairn", "team", vector, **fields)  # type: ignore[arg-type]


def test_a_second_process_writes_and_searches_both_ways_through_the_holder(
    tmp_path: Path,
) -> None:
    holder = _holder(tmp_path)
    try:
        index = EdgeIndex(tmp_path, dense_dim=4)  # this process can't open it: the holder has it
        index.upsert(
            [
                _memory(1, "the deploy freeze starts friday", [1.0, 0, 0, 0]),
                _memory(
                    2,
                    "the payroll freeze starts monday",
                    [0, 1.0, 0, 0],
                    private_to="D-payroll",
                    created_at=datetime(2026, 3, 2, 9, 30),  # naive, as SQLite gives it back
                ),
                _memory(3, "lunch is at noon", [0, 0.3, 0.9, 0]),
            ]
        )
        # The holder's own shard has them: what this process wrote went to the one index.
        assert _ask(holder, "freeze", ["*", "D-payroll"]) == [[1, 2], [2, 3, 1]]
        assert _ask(holder, "freeze", ["*"]) == [[1], [3, 1]]
        # And this process reads the holder's answers, both searches, with every filter.
        assert sorted(m for m, _ in index.search("freeze", "acme", "cairn", 10)) == [1]
        both = index.search("freeze", "acme", "cairn", 10, rooms=["*", "D-payroll"])
        assert sorted(m for m, _ in both) == [1, 2]
        dense = index.search_dense([0, 1.0, 0, 0], "acme", "cairn", 10, rooms=None)
        assert [m for m, _ in dense] == [2, 3, 1]
        assert dense[0][1] > 0.9  # cosine scores come back as the engine gave them
        march = Period(datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 3, tzinfo=UTC))
        dated = index.search("freeze", "acme", "cairn", 10, rooms=None, periods=[march])
        assert [m for m, _ in dated] == [2]
        assert index.search("freeze", "globex", "cairn", 10, rooms=None) == []
        # A recall's two searches (and those within the periods it names) in one round trip.
        lexical, dense_too = index.candidates(
            "freeze", [0, 1.0, 0, 0], "acme", "cairn", 10, rooms=None, periods=[march]
        )
        assert sorted(m for m, _ in lexical) == [1, 2]
        assert [m for m, _ in dense_too] == [2, 3, 1]
        assert dense_too[0] == dense[0]  # within March, and over all: merged at its best score
        lexical, dense_too = index.candidates("lunch", None, "acme", "cairn", 10, rooms=["*"])
        assert ([m for m, _ in lexical], dense_too) == ([3], [])
        assert index.count() == 3
        index.delete([1])
        assert _ask(holder, "freeze", None) == [[2], [2, 3]]
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(30)
    assert not address_file(Path(index.where)).exists()  # the holder cleaned up as it left


def test_a_killed_holder_leaves_the_index_to_the_next_process_with_what_it_was_sent(
    tmp_path: Path,
) -> None:
    holder = _holder(tmp_path)
    index = EdgeIndex(tmp_path, dense_dim=4)
    index.upsert([_memory(7, "the on-call rota changes weekly", [0, 0, 1.0, 0])])
    holder.send_signal(signal.SIGKILL)
    holder.wait(30)
    # Its socket is dead and its address file stale: the search fails as an unavailable index
    # (recall goes lexical), quickly, and does not hang.
    started = time.monotonic()
    with pytest.raises(IndexUnavailable, match="did not answer"):
        index.search("rota", "acme", "cairn", 5)
    assert time.monotonic() - started < 5
    # The next call takes the shard over at once, not after the retry pause, with the point
    # it had sent.
    assert [m for m, _ in index.search("rota", "acme", "cairn", 5)] == [7]
    served = address_file(Path(index.where)).read_text()
    assert served == index.where + ".sock"  # the new holder serves in its turn


def test_a_deep_home_serves_from_a_private_folder(tmp_path: Path) -> None:
    # A Unix socket's path holds about 100 bytes; a deeper CAIRN_HOME gets one under the
    # temporary directory, named in the address file, readable by its owner only.
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    index = EdgeIndex(deep, dense_dim=4)
    index.upsert([_memory(4, "the vpn moved to port 443", [0, 0, 0, 1.0])])
    where = Path(address_file(Path(index.where)).read_text())
    assert not str(where).startswith(str(tmp_path))
    assert stat.S_IMODE(where.stat().st_mode) == 0o600
    assert stat.S_IMODE(where.parent.stat().st_mode) == 0o700
    client = ShardClient(Path(index.where))
    assert [m for m, _ in client.search("vpn", "acme", "cairn", 5)] == [4]


def test_bad_requests_are_refused_and_the_server_keeps_serving(tmp_path: Path) -> None:
    index = EdgeIndex(tmp_path, dense_dim=4)
    index.upsert([_memory(5, "backups run at 02:00", [1.0, 0, 0, 0])])
    where = address_file(Path(index.where)).read_text()

    def exchange(payload: bytes) -> dict[str, object] | None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(where)
            sock.sendall(payload)
            header = sock.recv(4)
            if not header:
                return None  # dropped
            (size,) = struct.unpack(">I", header)
            body = b""
            while len(body) < size:
                body += sock.recv(size - len(body))
            answer: dict[str, object] = json.loads(body)
            return answer

    def framed(body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + body

    assert exchange(framed(b'{"op": "drop everything"}')) == {
        "error": "KeyError: \"unknown request 'drop everything'\""
    }
    not_json = exchange(framed(b"\xff not json"))
    assert not_json is not None
    assert "UnicodeDecodeError" in str(not_json["error"])
    missing = exchange(framed(b'{"op": "search", "query": "backups"}'))
    assert missing is not None
    assert "KeyError" in str(missing["error"])
    assert exchange(struct.pack(">I", 2**31)) is None  # an absurd length: the connection drops
    client = ShardClient(Path(index.where))
    assert [m for m, _ in client.search("backups", "acme", "cairn", 5)] == [5]
    assert client.count() == 1
    # An error of the holder's engine reaches the caller as an unavailable index.
    with pytest.raises(IndexUnavailable, match="needs a 4-d vector"):
        client.upsert([_memory(6, "a memory with a short vector", [1.0, 0])])


_RUNTIME_HOLDER = textwrap.dedent(
    """
    import sys
    from cairn.core.settings import load_settings
    from cairn.memory import Scope, Visibility
    from cairn.runtime import build_runtime
    rt = build_runtime(load_settings())
    rt.memory.remember(
        "the staging database is rebuilt from backups every sunday night",
        Scope("acme", "ops"),
        kind="fact",
        visibility=Visibility.TEAM,
    )
    rt.memory.flush_outbox()
    print("ready", flush=True)
    sys.stdin.read()
    """
)


def test_a_second_process_recalls_by_meaning_through_the_holder(clean_env: Path) -> None:
    # A question that shares no word with the memory: only the dense search finds it, and the
    # process that does not hold the embedded index used to have none.
    from cairn.core.settings import load_settings
    from cairn.memory import Scope
    from cairn.runtime import build_runtime

    holder = subprocess.Popen(
        [sys.executable, "-c", _RUNTIME_HOLDER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "ready"
        rt = build_runtime(load_settings())
        assert rt.memory.embedder is not None
        scope = Scope("acme", "ops")
        question = "when do we restore the test db?"
        found = rt.memory.candidates(question, scope, 10)
        assert not found.degraded
        assert found.dense
        assert not found.lexical  # no shared word: the meaning found it
        recalled = rt.memory.recall(question, scope, 3)
        assert [r.memory.text for r in recalled][:1] == [
            "the staging database is rebuilt from backups every sunday night"
        ]
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(60)


def test_a_compaction_asked_beside_the_holder_leaves_nothing_of_a_deleted_point(
    tmp_path: Path,
) -> None:
    # `cairn memory erase` beside a running `cairn run`: the process that does not hold the
    # shard has the holder rewrite it, and the deleted point's payload is in none of its files
    # (before, the compaction failed as an unavailable index and the bytes stayed).
    holder = _holder(tmp_path)
    try:
        index = EdgeIndex(tmp_path, dense_dim=4)
        erased_room = "D-zanzibar-quokka"
        index.upsert(
            [
                _memory(
                    1, "the payroll run is on the 25th", [1.0, 0, 0, 0], private_to=erased_room
                ),
                _memory(2, "the payroll run moved to the 24th", [0, 1.0, 0, 0]),
            ]
        )
        index.delete([1])

        def files_naming_the_room() -> list[Path]:
            folder = Path(index.where)
            return [
                f
                for f in folder.rglob("*")
                if f.is_file() and erased_room.encode() in f.read_bytes()
            ]

        assert files_naming_the_room()  # the engine keeps a deleted point's payload until then
        index.compact()
        assert files_naming_the_room() == []
        assert _ask(holder, "payroll", None) == [[2], [2]]  # the holder goes on serving
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(30)
