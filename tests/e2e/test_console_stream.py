"""Answers that appear as they are written, in the console: `cairn chat --json --stream`.

The model's text reaches the console as "delta" objects before the reply: in-process with the
offline model, from the real anthropic and openai SDKs reading a stand-in that streams slowly
(``STAND_INS``), and from a real ``cairn worker`` through Redis pub/sub. Without ``--stream`` a
script sees exactly what it saw before: no delta objects.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_console_chat import CAIRN, FACT, _env, chat, home, worker  # noqa: F401
from tests.support.chat_server import STAND_INS, model_env
from tests.support.messages_server import Reply

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ANSWER = "Roll back with the previous tag, then watch the error rate for ten minutes."


def streamed(outputs: list[dict[str, Any]], cause: int) -> str:
    """The text the deltas of ``cause`` add up to, since their last restart."""
    text = ""
    for output in outputs:
        if output["type"] == "delta" and output["cause"] == cause:
            text = "" if output.get("restart") else text + output["text"]
    return text


def test_the_offline_answer_streams_as_deltas_before_the_reply_only_with_stream(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path / "home")
    script = f"remember {FACT}\nwhat do you know about deploys?\n"
    outputs = chat(env, script, "--stream")
    replies = [(i, o) for i, o in enumerate(outputs) if o["type"] == "reply"]
    assert len(replies) == 2
    for index, reply in replies:
        deltas = [o for o in outputs[:index] if o["type"] == "delta"]
        assert deltas, "no delta before the reply"
        cause = deltas[-1]["cause"]
        assert streamed(outputs[:index], cause) == reply["text"]
    assert len([o for o in outputs if o["type"] == "delta" and o["text"]]) > 4  # in pieces

    plain = chat(_env(tmp_path / "plain"), script)
    assert [o["type"] for o in plain] == ["reply", "notice", "reply"]


@pytest.mark.parametrize("provider", sorted(STAND_INS))
def test_a_slow_model_is_seen_growing_and_the_reply_equals_what_was_streamed(
    tmp_path: Path, provider: str
) -> None:
    server_class, answer = STAND_INS[provider]
    with server_class(
        api_key="k",
        responder=lambda request: Reply(body=answer(ANSWER), delta_delay=0.15),
    ) as model:
        env = _env(tmp_path / "home", **model_env(provider, model))
        process = subprocess.Popen(
            [*CAIRN, "chat", "--json", "--stream"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write("how do I roll back?\n")
        process.stdin.close()
        seen: list[tuple[float, dict[str, Any]]] = []
        for line in process.stdout:
            seen.append((time.monotonic(), json.loads(line)))
        assert process.wait(60) == 0, process.stderr.read() if process.stderr else ""
    deltas = [(at, o) for at, o in seen if o["type"] == "delta" and o["text"]]
    ((reply_at, reply),) = [(at, o) for at, o in seen if o["type"] == "reply"]
    assert len(deltas) >= 3
    assert reply_at - deltas[0][0] > 0.3  # the first words were out well before the reply
    assert streamed([o for _, o in seen], deltas[0][1]["cause"]) == reply["text"] == ANSWER


@pytest.mark.redis
def test_a_worker_on_redis_streams_to_the_console_through_pub_sub(
    worker: dict[str, str],  # noqa: F811 - the fixture imported above
) -> None:
    outputs = chat(worker, f"remember {FACT}\n", "--stream")
    (reply,) = [o for o in outputs if o["type"] == "reply"]
    deltas = [o for o in outputs if o["type"] == "delta"]
    assert deltas
    assert streamed(outputs, deltas[-1]["cause"]) == reply["text"]
