"""Approvals on Slack: a held tool call's request posted with Approve and Deny buttons, and a
click on one taken as a decision.

The real Bolt app over HTTP, fed signed interactivity payloads (a form with ``payload=<json>``,
as Slack sends a click), its Web API calls served by the stand-in; the real pipeline and
in-process workers with the offline model, whose ``run TOOL {json}`` calls the test MCP server
over stdio; that server writes every call it runs to a file, which says whether a tool ran.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from cairn.db.models import ApprovalStatus, EventKind, SessionEvent, ToolApproval
from tests.support.mcp_server import read_calls
from tests.support.slack_api import BOT_USER, block_actions_payload
from tests.support.slack_harness import Harness, running_slack

pytestmark = [pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
CHANNEL = "C0OPS"
TS = "1700000700.000100"
RESTART = 'run ops__restart_service {"service": "payments"}'
ADMIN = "UADMIN"


def _config(tmp_path: Path, calls: Path, extra: str = "") -> Path:
    """A cairn.toml declaring the test MCP server as ``ops``, restarts held for approval."""
    config = tmp_path / "cairn.toml"
    config.write_text(
        f"""
[mcp_servers.ops]
command = {json.dumps(sys.executable)}
args = ["-m", "tests.support.mcp_server"]
env = {{ PYTHONPATH = {json.dumps(str(ROOT))}, CAIRN_TEST_MCP_CALLS = {json.dumps(str(calls))} }}
cwd = {json.dumps(str(ROOT))}
approval = "read"
approvals = {{ "restart_*" = "needs approval" }}
timeout = 10
{extra}
"""
    )
    return config


class Ops:
    """A running Slack frontend with the ops server declared, and what its server ran."""

    def __init__(self, slack: Harness, calls: Path) -> None:
        self.slack = slack
        self.calls = calls
        slack.api.add_user(ADMIN, is_admin=True)

    @property
    def api(self) -> Any:
        return self.slack.api

    def ask(self, text: str = RESTART, *, ts: str = TS, user: str = "UANN") -> dict[str, Any]:
        """Mention the bot with ``text`` and return the request for approval it posts."""
        self.slack.deliver(
            {
                "type": "app_mention",
                "user": user,
                "text": f"<@{BOT_USER}> {text}",
                "ts": ts,
                "channel": CHANNEL,
                "event_ts": ts,
            }
        )
        self.slack.settle(timeout=60)
        return self.request(ts)

    def request(self, thread: str = TS) -> dict[str, Any]:
        (found,) = [m for m in self.thread(thread) if m.get("blocks")]
        return found

    def thread(self, thread: str = TS) -> list[dict[str, Any]]:
        return [m for m in self.api.posts(CHANNEL) if m.get("thread_ts") == thread]

    def click(self, request: dict[str, Any], action: str, *, user: str = ADMIN, **kw: Any) -> Any:
        payload = block_actions_payload(request, action, _value(request), user=user, **kw)
        status, took = self.slack.click(payload)
        assert status == 200
        assert took < 3.0
        return payload

    def ran(self) -> list[str]:
        return [str(c["tool"]) for c in read_calls(self.calls)]

    def approval(self) -> ToolApproval:
        with self.slack.pipeline.rt.db.session() as s:
            return s.exec(select(ToolApproval)).one()


def _value(request: dict[str, Any]) -> str:
    (actions,) = [b for b in request["blocks"] if b["type"] == "actions"]
    values = {e["value"] for e in actions["elements"]}
    assert len(values) == 1
    return values.pop()


def _texts(blocks: list[dict[str, Any]]) -> str:
    out = []
    for block in blocks:
        if "text" in block:
            out.append(block["text"]["text"])
        for element in block.get("elements", []):
            text = element.get("text")
            out.append(text["text"] if isinstance(text, dict) else str(text or ""))
    return "\n".join(out)


@pytest.fixture
def ops(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Ops]:
    calls = tmp_path / "calls.jsonl"
    config = _config(tmp_path, calls)
    with running_slack(monkeypatch, CAIRN_CONFIG=str(config)) as slack:
        yield Ops(slack, calls)


def test_smoke(ops: Ops) -> None:
    request = ops.ask()
    print(json.dumps(ops.thread(), indent=1))
    ops.click(request, "cairn_approve")
    ops.slack.settle(timeout=60)
    print(json.dumps(ops.thread(), indent=1))
    print(ops.api.ephemerals())
    print(ops.ran())
    assert False
