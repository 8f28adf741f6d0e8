"""A worker SIGKILLed while a tool call waits for approval on Slack: real processes.

``cairn run`` (the Slack frontend, HTTP mode) and ``cairn worker`` processes share a Redis of
the test's own; the real slack_sdk posts to the Web API stand-in, and a click reaches the
frontend as Slack sends it (a signed form with ``payload=<json>``). The offline model's
``run TOOL {json}`` calls the test MCP server over stdio, which writes each call it runs to a
file. What must hold: nothing holds the waiting turn, so the worker that asked may die; the
approval, given to another worker, completes the turn once: the tool runs once, the thread
gets one notice and one reply, and the request loses its buttons.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import test_faults as faults
from tests.e2e.test_console_chat import _env
from tests.e2e.test_faults import Workers, _free_port, _healthy, _post, _slack_run
from tests.e2e.test_stream_faults import _stop
from tests.support.mcp_server import read_calls, stdio_declaration
from tests.support.private_redis import PrivateRedis
from tests.support.slack_api import (
    BOT_TOKEN,
    BOT_USER,
    SlackAPI,
    block_actions_payload,
    event_payload,
    signed_headers,
)
from tests.support.slack_harness import SIGNING_SECRET

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

private_redis = faults.private_redis
workers_for = faults.workers_for

CHANNEL = "C0APPROVE"
TS = "1700002000.000100"
ADMIN = "UADMIN"


def _thread(api: SlackAPI) -> list[dict[str, Any]]:
    return [m for m in api.posts(CHANNEL) if m.get("thread_ts") == TS]


def _request(api: SlackAPI) -> dict[str, Any] | None:
    found = [m for m in _thread(api) if m.get("blocks")]
    return found[0] if found else None


def _signed_post(port: int, body: bytes, form: bool = False) -> None:
    headers = signed_headers(SIGNING_SECRET, body)
    if form:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    assert _post(port, body, headers) == 200


def test_a_worker_killed_while_a_call_waits_for_approval_leaves_it_to_complete_once(
    tmp_path: Path, private_redis: PrivateRedis, workers_for: Any
) -> None:
    calls = tmp_path / "calls.jsonl"
    config = tmp_path / "cairn.toml"
    config.write_text(
        f"""{stdio_declaration(calls)}
approval = "read"
approvals = {{ "restart_*" = "needs approval" }}
timeout = 10
"""
    )
    with SlackAPI() as api:
        api.add_user(ADMIN, is_admin=True)
        env = _env(
            tmp_path / "home",
            CAIRN_CONFIG=str(config),
            CAIRN_BROKER_URL=private_redis.url,
            SLACK_BOT_TOKEN=BOT_TOKEN,
            SLACK_SIGNING_SECRET=SIGNING_SECRET,
            SLACK_API_URL=api.base_url,
            CAIRN_HTTP_HOST="127.0.0.1",
            CAIRN_STALE_AFTER="2",
            CAIRN_BEAT_INTERVAL="1",
            CAIRN_LOCK_TTL="3",
        )
        workers: Workers = workers_for(env)
        asking = workers.start()
        port = _free_port()
        frontend = _slack_run(env, port, tmp_path / "frontend.log")
        try:
            api.wait_for(lambda: _healthy(port), timeout=60, what="/healthz")
            mention = {
                "type": "app_mention",
                "user": "UANN",
                "text": f'<@{BOT_USER}> run ops__restart_service {{"service": "payments"}}',
                "ts": TS,
                "channel": CHANNEL,
                "event_ts": TS,
            }
            _signed_post(port, json.dumps(event_payload(mention)).encode())
            request = api.wait_for(lambda: _request(api), timeout=60, what="the request")
            workers.kill(asking)  # nothing waits for the decision: no worker is needed now
            workers.start("--beat")

            click = block_actions_payload(request, "cairn_approve", "1", user=ADMIN)
            form = urllib.parse.urlencode({"payload": json.dumps(click)}).encode()
            _signed_post(port, form, form=True)
            api.wait_for(
                lambda: any("payments restarted" in m["text"] for m in _thread(api)),
                timeout=90,
                what="the reply after the approval",
            )
            time.sleep(2)  # long enough for a second run or a second answer to show up
            assert [c["tool"] for c in read_calls(calls)] == ["restart_service"]
            texts = [m["text"] for m in _thread(api)]
            notices = [t for t in texts if t.startswith("UADMIN approved request #1: ran")]
            assert len(notices) == 1, texts
            assert len([t for t in texts if "payments restarted" in t]) == 1, texts
            closed = _request(api)
            assert closed is not None
            assert not any(b["type"] == "actions" for b in closed["blocks"])
        finally:
            _stop(frontend)
