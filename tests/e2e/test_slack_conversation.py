"""A Slack conversation end to end: ``cairn run`` as a real subprocess in Socket Mode, Slack's
Web API and Socket Mode served by the local stand-ins, the model by the local Messages API
server or (the same test, ``STAND_INS``) the local Chat Completions one."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.chat_server import STAND_INS, model_env
from tests.support.slack_api import (
    APP_TOKEN,
    BOT_TOKEN,
    BOT_USER,
    SlackAPI,
    SocketModeServer,
    event_payload,
)

CAIRN = [sys.executable, "-m", "cairn"]
CHANNEL = "C0OPS"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _health(port: int) -> int:
    try:
        url = f"http://127.0.0.1:{port}/healthz"
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


@pytest.fixture
def slack() -> Iterator[SlackAPI]:
    with SlackAPI() as api, SocketModeServer() as sockets:
        api.socket = sockets
        yield api


@pytest.mark.slow
@pytest.mark.parametrize("provider", sorted(STAND_INS))
def test_a_60000_character_answer_arrives_split_and_complete(
    tmp_path: Path, slack: SlackAPI, provider: str
) -> None:
    paragraphs = [
        f"Paragraph {n}: " + " ".join(f"word{n}x{i}" for i in range(120)) for n in range(64)
    ]
    answer = "\n\n".join(paragraphs)
    while len(answer) < 60_000:
        answer += " more"
    answer = answer[:60_000].rstrip()
    assert len(answer) >= 59_990
    port = _free_port()
    server_class, _ = STAND_INS[provider]
    with server_class(api_key="k") as model:
        model.push_text(answer)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(
                ("CAIRN_", "SLACK_", "MATRIX_", "ANTHROPIC_", "OPENAI_", "AZURE_OPENAI_")
            )
        }
        env.update(
            CAIRN_HOME=str(tmp_path / "home"),
            SLACK_BOT_TOKEN=BOT_TOKEN,
            SLACK_APP_TOKEN=APP_TOKEN,
            SLACK_API_URL=slack.base_url,
            **model_env(provider, model),
            CAIRN_HTTP_HOST="127.0.0.1",
            CAIRN_HTTP_PORT=str(port),
        )
        process = subprocess.Popen(
            [*CAIRN, "run"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert slack.socket is not None
            sockets = slack.socket
            slack.wait_for(lambda: _health(port) == 200, timeout=60, what="/healthz")
            # The client counts itself connected once the handshake is answered; the stand-in
            # counts it when its handler thread starts, a moment later on a busy machine.
            slack.wait_for(lambda: sockets.connected() == 1, timeout=10, what="one socket")
            ts = "1700000500.000100"
            envelope = sockets.send(
                event_payload(
                    {
                        "type": "app_mention",
                        "user": "UANN",
                        "text": f"<@{BOT_USER}> write me the whole runbook",
                        "ts": ts,
                        "channel": CHANNEL,
                        "event_ts": ts,
                    }
                )
            )
            assert sockets.ack_delay(envelope) < 3.0

            def complete() -> bool:
                posted = " ".join(p["text"] for p in slack.posts(CHANNEL))
                return len(posted.split()) >= len(answer.split())

            slack.wait_for(complete, timeout=60, what="the whole answer")
            time.sleep(0.5)  # nothing more may follow
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                _, stderr = process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                _, stderr = process.communicate()
        assert process.returncode == 0, stderr

    parts = slack.posts(CHANNEL)
    assert len(parts) >= 60_000 // 4000
    assert all(len(p["text"]) <= 3900 for p in parts)
    assert all(p["thread_ts"] == ts for p in parts)
    assert [w for p in parts for w in p["text"].split()] == answer.split()
    assert parts[0]["text"].startswith("Paragraph 0: word0x0")
    # The model saw the mention once, without the bot's name, from its author (in the messages
    # of the conversation: Chat Completions sends the system prompt as a message too).
    (request,) = model.bodies
    conversation = json.dumps([m for m in request["messages"] if m["role"] != "system"])
    assert conversation.count("write me the whole runbook") == 1
    assert "UANN: write me the whole runbook" in conversation
    assert BOT_USER not in conversation
    # The working indicator was shown on the mention and cleared after the answer.
    assert [c.method for c in slack.calls() if c.method.startswith("reactions.")] == [
        "reactions.add",
        "reactions.remove",
    ]
