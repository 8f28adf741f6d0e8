"""Faults with real processes: a worker killed mid-turn, a broker that goes away and comes back.

The chat goes through ``cairn chat`` and ``cairn worker`` subprocesses on a Redis server that
the test starts for itself (so it can stop it), with the real anthropic SDK against the local
Messages API server.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_console_chat import _env, _wait_ready, chat
from tests.support.chat_server import STAND_INS, model_env
from tests.support.messages_server import Reply
from tests.support.private_redis import PrivateRedis
from tests.support.slack_api import BOT_TOKEN, BOT_USER, SlackAPI, event_payload, signed_headers
from tests.support.slack_harness import SIGNING_SECRET
from tests.support.tcp_proxy import TcpProxy

CAIRN = [sys.executable, "-m", "cairn"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.stop()


class Workers:
    """``cairn worker`` processes, each in its own process group so it can be SIGKILLed."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.env, self.folder = env, folder
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *extra: str) -> subprocess.Popen[bytes]:
        log = self.folder / f"worker-{len(self.procs)}.log"
        with log.open("w") as out:
            proc = subprocess.Popen(
                [*CAIRN, "worker", "-c", "2", *extra],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append(proc)
        _wait_ready(log, proc)
        return proc

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


@pytest.fixture
def workers_for(tmp_path: Path) -> Iterator[Any]:
    made: list[Workers] = []

    def make(env: dict[str, str]) -> Workers:
        made.append(Workers(env, tmp_path))
        return made[-1]

    yield make
    for w in made:
        w.stop_all()


@pytest.mark.slow
@pytest.mark.parametrize("provider", sorted(STAND_INS))
def test_a_worker_killed_mid_turn_loses_nothing_and_duplicates_nothing(
    tmp_path: Path, private_redis: PrivateRedis, workers_for: Any, provider: str
) -> None:
    calls: list[float] = []
    server_class, answer = STAND_INS[provider]

    def slow_first_call(request: dict[str, Any]) -> Reply:
        calls.append(time.monotonic())
        # The first call hangs long enough for the test to kill the worker making it.
        return Reply(body=answer("the answer"), delay=30.0 if len(calls) == 1 else 0.0)

    with server_class(api_key="k", responder=slow_first_call) as llm:
        env = _env(
            tmp_path / "home",
            CAIRN_BROKER_URL=private_redis.url,
            **model_env(provider, llm),
            CAIRN_STALE_AFTER="2",
            CAIRN_BEAT_INTERVAL="1",
            CAIRN_LOCK_TTL="3",
            CAIRN_LLM_TIMEOUT="60",
            CAIRN_REPLY_TIMEOUT="90",
        )
        workers = workers_for(env)
        doomed = workers.start()
        talk = subprocess.Popen(
            [*CAIRN, "chat", "--json"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert talk.stdin is not None
        talk.stdin.write("how is the deploy going?\n")
        talk.stdin.flush()  # communicate() below closes it once the line is read
        deadline = time.monotonic() + 30
        while not calls and time.monotonic() < deadline:
            time.sleep(0.1)
        assert calls, "the worker never called the model"
        workers.kill(doomed)  # mid-turn: the model call is in flight
        workers.start("--beat")  # a fresh worker; its beat re-queues the stuck session
        out, err = talk.communicate(timeout=120)
    replies = [line for line in out.splitlines() if '"type": "reply"' in line]
    assert len(replies) == 1, (out, err)
    assert "the answer" in replies[0]
    assert len(calls) == 2
    # Nothing is left pending, and the one message has exactly one reply in the outbox.
    again = chat(env, "/quit\n")
    assert again == []


# `cairn` that writes every thread's stack to its standard error on SIGUSR1, for a chat that
# stops answering.
_CHAT_WITH_STACKS = (
    "import faulthandler, signal, sys; faulthandler.register(signal.SIGUSR1, all_threads=True); "
    "sys.argv[0] = 'cairn'; from cairn.cli import main; main()"
)


class Conversation:
    """A running ``cairn chat --json``, fed line by line, its JSON output read as it comes."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log, self.failed = log, False
        with log.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _CHAT_WITH_STACKS, "chat", "--json"],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                bufsize=1,
            )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def say(self, text: str, *, expect: int) -> list[dict[str, Any]]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        got: list[dict[str, Any]] = []
        try:
            while len(got) < expect:
                got.append(self.lines.get(timeout=90))
        except queue.Empty:
            self.failed = True
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(1)
            logs = sorted(self.log.parent.glob("*.log"))
            shown = "\n".join(f"--- {p.name}\n{p.read_text()[-6000:]}" for p in logs)
            pytest.fail(f"{text!r}: {len(got)} of {expect} lines in 90 s: {got}\n{shown}")
        return got

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            if not self.failed:  # a failure already reported says more than this one
                raise


@pytest.mark.slow
def test_a_broker_restart_loses_no_message(
    tmp_path: Path, private_redis: PrivateRedis, workers_for: Any
) -> None:
    env = _env(
        tmp_path / "home",
        CAIRN_BROKER_URL=private_redis.url,
        CAIRN_STALE_AFTER="1",
        CAIRN_BEAT_INTERVAL="1",
        CAIRN_REPLY_TIMEOUT="60",
    )
    workers = workers_for(env)
    workers.start("--beat")
    talk = Conversation(env, tmp_path / "chat.log")
    try:
        first = talk.say("remember the first fact is alpha", expect=2)
        assert [o["type"] for o in first] == ["reply", "notice"]

        private_redis.stop()
        [refused] = talk.say("remember the second fact is beta", expect=1)
        assert refused["type"] == "error"
        assert "CAIRN_BROKER_URL" in refused["text"]

        private_redis.start()
        # The worker reconnects by itself; the message the broker missed is re-queued from the
        # durable event log by the beat, and a new message is answered as usual.
        third = talk.say("remember the third fact is gamma", expect=2)
        assert third[1]["text"] == "remembered: the third fact is gamma"
    finally:
        talk.close()
    deadline = time.monotonic() + 30
    shown: list[dict[str, Any]] = []
    while time.monotonic() < deadline and not shown:
        shown = chat(env, "/quit\n")  # a new console shows what the old one missed
        time.sleep(0.5)
    assert "remembered: the second fact is beta" in [o["text"] for o in shown]


def _cut_address() -> int:
    """A loopback port whose server has stopped: a forwarder that was cut refuses connections."""
    proxy = TcpProxy("127.0.0.1", _free_port()).start()
    port = proxy.port
    proxy.cut()
    return port


@pytest.mark.slow
def test_answers_continue_from_lexical_recall_when_the_vector_store_stops(
    tmp_path: Path, redis_url: str, workers_for: Any
) -> None:
    env = _env(
        tmp_path / "home",
        CAIRN_BROKER_URL=redis_url,
        # The Qdrant server the deployment uses is down: nothing answers at its address.
        CAIRN_QDRANT_URL=f"http://127.0.0.1:{_cut_address()}",
        CAIRN_REPLY_TIMEOUT="60",
        CAIRN_LOG_LEVEL="WARNING",
    )
    workers = workers_for(env)
    worker = workers.start()  # with a Qdrant server configured, a forking pool
    talk = subprocess.run(
        [*CAIRN, "chat", "--json"],
        input="remember the deploy freeze starts on friday\nwhen does the deploy freeze start?\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    outputs = [json.loads(line) for line in talk.stdout.splitlines()]
    assert [o["type"] for o in outputs] == ["reply", "notice", "reply"]
    assert outputs[1]["text"] == "remembered: the deploy freeze starts on friday"
    assert "the deploy freeze starts on friday" in outputs[2]["text"]  # recalled lexically
    assert worker.poll() is None  # degraded, not down
    log = (tmp_path / "worker-0.log").read_text()
    assert "vector index unavailable, recalling lexically" in log
    assert "Traceback" not in log


def _slack_run(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("w") as out:
        return subprocess.Popen(
            [*CAIRN, "run"],
            env={**env, "CAIRN_HTTP_PORT": str(port)},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return int(response.status) == 200
    except (OSError, urllib.error.HTTPError):
        return False


def _post(port: int, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/slack/events", data=body, headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.slow
def test_one_slack_event_delivered_to_two_frontends_at_once_gets_one_reply(
    tmp_path: Path, redis_url: str, workers_for: Any
) -> None:
    with SlackAPI() as slack:
        env = _env(
            tmp_path / "home",
            CAIRN_BROKER_URL=redis_url,  # shared: the queue and the dedupe of both frontends
            SLACK_BOT_TOKEN=BOT_TOKEN,
            SLACK_SIGNING_SECRET=SIGNING_SECRET,
            SLACK_API_URL=slack.base_url,
            CAIRN_HTTP_HOST="127.0.0.1",
        )
        workers = workers_for(env)
        workers.start()
        ports = [_free_port(), _free_port()]
        frontends = [
            _slack_run(env, port, tmp_path / f"frontend-{n}.log") for n, port in enumerate(ports)
        ]
        try:
            for port in ports:
                slack.wait_for(lambda port=port: _healthy(port), timeout=60, what="/healthz")
            ts = "1700000900.000100"
            body = json.dumps(
                event_payload(
                    {
                        "type": "app_mention",
                        "user": "UANN",
                        "text": f"<@{BOT_USER}> remember the pager rota changes on monday",
                        "ts": ts,
                        "channel": "C0OPS",
                        "event_ts": ts,
                    }
                )
            ).encode()
            # Slack retried, or two load-balanced frontends got it: the same signed request
            # reaches both at the same moment.
            start = threading.Barrier(len(ports))
            statuses: list[int] = []

            def deliver(port: int) -> None:
                start.wait()
                statuses.append(_post(port, body, signed_headers(SIGNING_SECRET, body)))

            senders = [threading.Thread(target=deliver, args=(port,)) for port in ports]
            for sender in senders:
                sender.start()
            for sender in senders:
                sender.join(30)
            assert statuses == [200, 200]  # both acknowledge: Slack must not retry

            def replies() -> list[dict[str, Any]]:
                return [p for p in slack.posts("C0OPS") if p.get("thread_ts") == ts]

            slack.wait_for(lambda: len(replies()) >= 2, timeout=60, what="the answer")
            time.sleep(3)  # long enough for a second copy to be answered and posted, if any
            texts = [p["text"] for p in replies()]
            assert len(texts) == 2, texts  # one reply and its notice, once each
            assert "remembered: the pager rota changes on monday" in texts[1]
        finally:
            for proc in frontends:
                os.killpg(proc.pid, signal.SIGTERM)
            for proc in frontends:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
