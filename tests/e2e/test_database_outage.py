"""A database that goes away and comes back: nothing acknowledged is lost, nothing crashes.

Each test runs real ``cairn`` processes on a PostgreSQL server of its own, which it stops and
starts again (the shared server is never touched).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.e2e.test_console_chat import _env
from tests.e2e.test_faults import _free_port, _healthy, _post, _slack_run
from tests.support.private_postgres import PrivatePostgres
from tests.support.processes import stop_group
from tests.support.slack_api import BOT_TOKEN, BOT_USER, SlackAPI, event_payload, signed_headers
from tests.support.slack_harness import SIGNING_SECRET

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CAIRN = [sys.executable, "-m", "cairn"]
CHANNEL = "C0OPS"


@pytest.fixture
def postgres() -> Iterator[PrivatePostgres]:
    with PrivatePostgres() as server:
        yield server


def _slack_env(tmp_path: Path, postgres: PrivatePostgres, slack: SlackAPI) -> dict[str, str]:
    """``cairn run`` with Slack over HTTP, in-process workers, on the private server."""
    return _env(
        tmp_path / "home",
        CAIRN_DATABASE_URL=postgres.url(),
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack.base_url,
        CAIRN_HTTP_HOST="127.0.0.1",
    )


def _mention(n: int) -> bytes:
    """Mention ``n``; all of them in one thread (one session), whose answers keep their order."""
    ts = f"1700001{n:03d}.000100"
    return json.dumps(
        event_payload(
            {
                "type": "app_mention",
                "user": "UANN",
                "text": f"<@{BOT_USER}> remember fact number {n} of the outage",
                "ts": ts,
                "thread_ts": "1700001001.000100",
                "channel": CHANNEL,
                "event_ts": ts,
            },
            event_id=f"Ev{n:04d}",
        )
    ).encode()


def _send(port: int, n: int) -> int:
    body = _mention(n)
    return _post(port, body, signed_headers(SIGNING_SECRET, body))


def _answered(slack: SlackAPI) -> list[int]:
    """The fact numbers the bot said it remembered, in the order it said so."""
    numbers = []
    for post in slack.posts(CHANNEL):
        text = str(post.get("text") or "")
        if text.startswith("remembered: fact number "):
            numbers.append(int(text.split()[3]))
    return numbers


def _posted(slack: SlackAPI) -> list[str]:
    return [str(p.get("text")) for p in slack.posts(CHANNEL)]


def test_slack_events_acknowledged_while_the_database_is_down_are_answered_once_after_a_crash(
    tmp_path: Path, postgres: PrivatePostgres
) -> None:
    with SlackAPI() as slack:
        env = _slack_env(tmp_path, postgres, slack)
        port = _free_port()
        first = _slack_run(env, port, tmp_path / "first.log")
        try:
            slack.wait_for(lambda: _healthy(port), timeout=90, what="/healthz")
            for n in (1, 2):
                assert _send(port, n) == 200
            slack.wait_for(lambda: _answered(slack) == [1, 2], timeout=60, what="answers 1-2")

            postgres.stop()
            # Slack hears 200 for each: it will never send them again.
            for n in (3, 4, 5):
                assert _send(port, n) == 200
            time.sleep(1)  # the frontend is holding them, retrying the database
            os.killpg(first.pid, signal.SIGKILL)  # and dies before the database is back
            first.wait()
        finally:
            stop_group(first)
        assert "Traceback" not in (tmp_path / "first.log").read_text()

        postgres.start()
        second = _slack_run(env, port, tmp_path / "second.log")
        try:
            try:
                slack.wait_for(lambda: _answered(slack) == [1, 2, 3, 4, 5], timeout=60)
            except AssertionError:
                pytest.fail(f"answers 3-5 missing; posted: {_posted(slack)}")
            time.sleep(3)  # time enough for a second copy of any answer to be posted
            assert _answered(slack) == [1, 2, 3, 4, 5]  # each once, in order
        finally:
            stop_group(second)
        log = (tmp_path / "second.log").read_text()
        assert "event(s) that an earlier process acknowledged and did not finish" in log
        assert "Traceback" not in log


def test_a_reply_posted_just_before_the_database_went_away_is_not_posted_again_after_a_crash(
    tmp_path: Path, postgres: PrivatePostgres
) -> None:
    with SlackAPI() as slack:
        env = _slack_env(tmp_path, postgres, slack)
        port = _free_port()
        posted_then_down = threading.Event()

        def stop_database_on_the_notice(method: str, args: dict[str, Any]) -> None:
            # The notice is on Slack; before Cairn hears so and records it, the database goes.
            notice = method == "chat.postMessage" and "remembered:" in str(args.get("text"))
            if notice and not posted_then_down.is_set():
                postgres.stop()
                posted_then_down.set()

        slack.after_call = stop_database_on_the_notice
        first = _slack_run(env, port, tmp_path / "first.log")
        try:
            slack.wait_for(lambda: _healthy(port), timeout=90, what="/healthz")
            assert _send(port, 1) == 200
            assert posted_then_down.wait(60)
            time.sleep(1)  # Cairn has the answer from Slack and can't record it
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
        finally:
            slack.after_call = None
            stop_group(first)
        postgres.start()
        second = _slack_run(env, port, tmp_path / "second.log")
        try:
            slack.wait_for(lambda: _healthy(port), timeout=90, what="/healthz")
            assert _send(port, 2) == 200  # something new goes through after it
            slack.wait_for(lambda: _answered(slack) == [1, 2], timeout=60, what="answer 2")
            time.sleep(2)
            assert _answered(slack) == [1, 2], _posted(slack)  # notice 1 once, not twice
        finally:
            stop_group(second)


class _Chat:
    """``cairn chat --json`` fed line by line, its output read as it comes."""

    def __init__(self, env: dict[str, str], stderr: IO[bytes]) -> None:
        self.proc = subprocess.Popen(
            [*CAIRN, "chat", "--json"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
        )
        self.outputs: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.outputs.append(json.loads(line))

    def say(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def notices(self) -> list[str]:
        return [o["text"] for o in self.outputs if o["type"] == "notice"]

    def wait_for(self, count: int, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.notices()) < count:
            assert self.proc.poll() is None, f"cairn chat exited: {self.outputs}"
            assert time.monotonic() < deadline, f"no notice {count}: {self.outputs}"
            time.sleep(0.1)

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=120)
        self._reader.join(10)
        return code


def test_cairn_chat_waits_out_a_database_restart_and_goes_on(
    tmp_path: Path, postgres: PrivatePostgres
) -> None:
    env = _env(tmp_path / "home", CAIRN_DATABASE_URL=postgres.url())
    with (tmp_path / "stderr").open("wb") as stderr:
        chat = _Chat(env, stderr)
        try:
            chat.say("remember the first fact is alpha")
            chat.wait_for(1)
            postgres.stop()
            chat.say("remember the second fact is beta")
            time.sleep(3)  # the chat waits for the database, it does not die
            assert chat.proc.poll() is None
            postgres.start()
            chat.wait_for(2)
            chat.say("remember the third fact is gamma")
            chat.wait_for(3)
        finally:
            code = chat.close()
    assert chat.notices() == [
        "remembered: the first fact is alpha",
        "remembered: the second fact is beta",
        "remembered: the third fact is gamma",
    ]
    assert code == 0
    err = (tmp_path / "stderr").read_text()
    assert "the database is unavailable" in err
    assert "the database is back" in err
    assert "Traceback" not in err
