"""A streamed answer that is cut ends as one complete message: real processes on Slack.

``cairn run`` (the Slack frontend, HTTP mode) and ``cairn worker`` processes share a Redis of
the test's own; the real anthropic SDK reads a Messages API stand-in that writes slowly (or the
real openai SDK a Chat Completions one: each test runs over both, ``STAND_INS``), and the real
slack_sdk posts to the Web API stand-in. Mid-stream the worker, or the frontend, is
SIGKILLed. What the thread shows at the end is checked: exactly one message of the bot, whose
text is the final answer, whole, and no longer streaming.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import test_faults as faults
from tests.e2e.test_console_chat import _env
from tests.e2e.test_faults import Workers, _free_port, _healthy, _post, _slack_run
from tests.support.chat_server import STAND_INS, model_env
from tests.support.messages_server import MessagesServer, Reply, text_message
from tests.support.private_redis import PrivateRedis
from tests.support.slack_api import BOT_TOKEN, BOT_USER, SlackAPI, event_payload, signed_headers
from tests.support.slack_harness import SIGNING_SECRET

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

# The fault tests' fixtures: a Redis of the test's own, and ``cairn worker`` processes.
private_redis = faults.private_redis
workers_for = faults.workers_for

CHANNEL = "C0CUT"
FIRST = " ".join(f"draft{n}" for n in range(60))  # what the doomed attempt writes, slowly
ANSWER = "Roll back with the previous tag, then watch the error rate for ten minutes."


class Thread:
    """The Slack thread of one mention, as the stand-in holds it."""

    def __init__(self, api: SlackAPI, ts: str) -> None:
        self.api, self.ts = api, ts

    def bot_messages(self) -> list[dict[str, Any]]:
        return [m for m in self.api.posts(CHANNEL) if m.get("thread_ts") == self.ts]

    def streaming_words(self) -> int:
        """How many words the bot's message shows while it streams (0: none yet)."""
        shown = [m for m in self.bot_messages() if m.get("streaming")]
        return len(shown[0]["text"].split()) if shown else 0

    def finished(self) -> bool:
        messages = self.bot_messages()
        return (
            bool(messages)
            and all(not m.get("streaming") for m in messages)
            and any(m["text"] == ANSWER for m in messages)
        )


@pytest.fixture
def slack() -> Iterator[SlackAPI]:
    with SlackAPI() as api:
        yield api


def _setup(
    tmp_path: Path,
    redis: PrivateRedis,
    api: SlackAPI,
    model: MessagesServer,
    provider: str = "anthropic",
) -> dict[str, str]:
    return _env(
        tmp_path / "home",
        CAIRN_BROKER_URL=redis.url,
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=api.base_url,
        CAIRN_HTTP_HOST="127.0.0.1",
        **model_env(provider, model),
        CAIRN_SLACK_STREAM_INTERVAL="0.2",
        CAIRN_STALE_AFTER="2",
        CAIRN_BEAT_INTERVAL="1",
        CAIRN_LOCK_TTL="3",
        CAIRN_LLM_TIMEOUT="60",
        CAIRN_REPLY_TIMEOUT="90",
    )


def _mention(port: int, ts: str) -> None:
    body = json.dumps(
        event_payload(
            {
                "type": "app_mention",
                "user": "UANN",
                "text": f"<@{BOT_USER}> how do I roll back?",
                "ts": ts,
                "channel": CHANNEL,
                "event_ts": ts,
            }
        )
    ).encode()
    assert _post(port, body, signed_headers(SIGNING_SECRET, body)) == 200


def _first_slow(calls: list[float], answer: Callable[[str], dict[str, Any]] = text_message) -> Any:
    def respond(request: dict[str, Any]) -> Reply:
        calls.append(time.monotonic())
        if len(calls) == 1:  # the doomed attempt: writes for ~18 s
            return Reply(body=answer(FIRST), delta_delay=0.3)
        return Reply(body=answer(ANSWER), delta_delay=0.05)

    return respond


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize("provider", sorted(STAND_INS))
def test_a_worker_killed_mid_stream_ends_in_one_complete_message(
    tmp_path: Path, private_redis: PrivateRedis, workers_for: Any, slack: SlackAPI, provider: str
) -> None:
    calls: list[float] = []
    server_class, answer = STAND_INS[provider]
    with server_class(api_key="k", responder=_first_slow(calls, answer)) as model:
        env = _setup(tmp_path, private_redis, slack, model, provider)
        workers: Workers = workers_for(env)
        doomed = workers.start()
        port = _free_port()
        frontend = _slack_run(env, port, tmp_path / "frontend.log")
        try:
            slack.wait_for(lambda: _healthy(port), timeout=60, what="/healthz")
            thread = Thread(slack, "1700001000.000100")
            _mention(port, thread.ts)
            slack.wait_for(lambda: thread.streaming_words() >= 5, timeout=60, what="a stream")
            workers.kill(doomed)  # mid-stream: the first attempt's text stops half-way
            cut_at = thread.streaming_words()
            assert 0 < cut_at < len(FIRST.split())
            workers.start("--beat")  # re-queues the stuck session; the turn runs again
            slack.wait_for(thread.finished, timeout=90, what="the complete answer")
            time.sleep(2)  # long enough for a second message to appear, if one would
            messages = thread.bot_messages()
            assert [m["text"] for m in messages] == [ANSWER]  # one message, whole, final
            assert not messages[0]["streaming"]
            assert len(calls) == 2
            assert len(slack.calls("chat.startStream")) == 1
            assert slack.calls("chat.postMessage") == []
        finally:
            _stop(frontend)


@pytest.mark.parametrize("provider", sorted(STAND_INS))
def test_a_frontend_killed_mid_stream_is_finished_by_the_next_one_in_the_same_message(
    tmp_path: Path, private_redis: PrivateRedis, workers_for: Any, slack: SlackAPI, provider: str
) -> None:
    calls: list[float] = []
    server_class, answer = STAND_INS[provider]

    def respond(request: dict[str, Any]) -> Reply:
        calls.append(time.monotonic())
        return Reply(body=answer(ANSWER), delta_delay=0.4)  # ~6 s of writing

    with server_class(api_key="k", responder=respond) as model:
        env = _setup(tmp_path, private_redis, slack, model, provider)
        workers_for(env).start()
        port = _free_port()
        first = _slack_run(env, port, tmp_path / "frontend-0.log")
        second: subprocess.Popen[bytes] | None = None
        try:
            slack.wait_for(lambda: _healthy(port), timeout=60, what="/healthz")
            thread = Thread(slack, "1700001100.000100")
            _mention(port, thread.ts)
            # Killed once the stream has grown past its first call: a message is recorded right
            # after Slack answers chat.startStream, and a kill inside that one write (it may wait
            # for SQLite's writer) would leave that message unknown to the next frontend (ADR
            # 0027, a known gap).
            slack.wait_for(
                lambda: slack.calls("chat.appendStream") and thread.streaming_words() >= 2,
                timeout=60,
                what="a stream that grew",
            )
            os.killpg(first.pid, signal.SIGKILL)  # mid-stream, with no chance to clean up
            first.wait(timeout=10)
            assert thread.streaming_words() < len(ANSWER.split())
            second = _slack_run(env, port, tmp_path / "frontend-1.log")
            slack.wait_for(thread.finished, timeout=90, what="the complete answer")
            time.sleep(2)
            messages = thread.bot_messages()
            assert [m["text"] for m in messages] == [ANSWER]  # the same message, completed
            assert len(calls) == 1  # the worker was not disturbed: one turn
            assert slack.calls("chat.postMessage") == []
        finally:
            _stop(first)
            if second is not None:
                _stop(second)


@pytest.mark.parametrize("provider", sorted(STAND_INS))
def test_redis_gone_mid_stream_still_ends_in_one_complete_message(
    tmp_path: Path, private_redis: PrivateRedis, workers_for: Any, slack: SlackAPI, provider: str
) -> None:
    server_class, answer = STAND_INS[provider]

    def respond(request: dict[str, Any]) -> Reply:
        return Reply(body=answer(ANSWER), delta_delay=0.4)  # ~6 s of writing

    with server_class(api_key="k", responder=respond) as model:
        env = _setup(tmp_path, private_redis, slack, model, provider)
        workers_for(env).start()
        port = _free_port()
        frontend = _slack_run(env, port, tmp_path / "frontend.log")
        try:
            slack.wait_for(lambda: _healthy(port), timeout=60, what="/healthz")
            thread = Thread(slack, "1700001200.000100")
            _mention(port, thread.ts)
            slack.wait_for(lambda: thread.streaming_words() >= 2, timeout=60, what="a stream")
            private_redis.stop()  # the pieces stop coming; the turn goes on
            # The reply reaches the outbox through the database, and the frontend edits it
            # into the streamed message while Redis is still away.
            slack.wait_for(thread.finished, timeout=90, what="the complete answer")
            messages = thread.bot_messages()
            assert [m["text"] for m in messages] == [ANSWER]
            assert slack.calls("chat.postMessage") == []
        finally:
            private_redis.start()
            _stop(frontend)
