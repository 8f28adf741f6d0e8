"""Approvals on Slack: a held tool call's request posted with Approve and Deny buttons, and a
click on one taken as a decision.

The real Bolt app over HTTP, fed signed interactivity payloads (a form with ``payload=<json>``,
as Slack sends a click), its Web API calls served by the stand-in; the real pipeline and
in-process workers with the offline model, whose ``run TOOL {json}`` calls the test MCP server
over stdio; that server writes every call it runs to a file, which says whether a tool ran.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from cairn.db.models import ApprovalStatus, EventKind, SessionEvent, ToolApproval
from tests.support.mcp_server import read_calls, stdio_declaration
from tests.support.private_postgres import PrivatePostgres
from tests.support.slack_api import BOT_USER, block_actions_payload
from tests.support.slack_harness import Harness, running_slack

pytestmark = [pytest.mark.timeout(120)]

CHANNEL = "C0OPS"
TS = "1700000700.000100"
OTHER_TS = "1700000800.000100"
RESTART = 'run ops__restart_service {"service": "payments"}'
ADMIN = "UADMIN"


def _config(tmp_path: Path, calls: Path, extra: str = "") -> Path:
    """A cairn.toml declaring the test MCP server as ``ops``, restarts (and its ``crash``
    tool) held for approval."""
    config = tmp_path / "cairn.toml"
    config.write_text(
        f"""{stdio_declaration(calls)}
approval = "read"
approvals = {{ "restart_*" = "needs approval", "crash" = "needs approval" }}
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
        """The request message as it is now (a copy: what a person's Slack showed them)."""
        (found,) = [m for m in self.thread(thread) if m.get("blocks")]
        return copy.deepcopy(found)

    def thread(self, thread: str = TS) -> list[dict[str, Any]]:
        return [m for m in self.api.posts(CHANNEL) if m.get("thread_ts") == thread]

    def click(
        self,
        request: dict[str, Any],
        action: str,
        *,
        user: str = ADMIN,
        value: str | None = None,
        **kw: Any,
    ) -> Any:
        value = _value(request) if value is None else value
        payload = block_actions_payload(request, action, value, user=user, **kw)
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


def _running(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **env: str) -> Any:
    calls = tmp_path / "calls.jsonl"
    config = _config(tmp_path, calls)
    return running_slack(monkeypatch, CAIRN_CONFIG=str(config), **env), calls


@pytest.fixture
def ops(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Ops]:
    running, calls = _running(monkeypatch, tmp_path)
    with running as slack:
        yield Ops(slack, calls)


def _decisions(ops: Ops) -> list[SessionEvent]:
    with ops.slack.pipeline.rt.db.session() as s:
        return list(s.exec(select(SessionEvent).where(SessionEvent.kind == EventKind.DECISION)))


def _has_buttons(message: dict[str, Any]) -> bool:
    return any(b["type"] == "actions" for b in message["blocks"])


# --- the request ------------------------------------------------------------------------


def test_a_request_is_posted_with_approve_and_deny_buttons_and_a_plain_text_fallback(
    ops: Ops,
) -> None:
    request = ops.ask()
    number = ops.approval().id
    section, context, actions = request["blocks"]
    assert section["type"] == "section"
    assert f"request #{number}" in section["text"]["text"]
    assert "`ops__restart_service`" in section["text"]["text"]
    assert '```{"service": "payments"}```' in section["text"]["text"]
    assert "Asked by <@UANN>" in section["text"]["text"]
    (line,) = context["elements"]
    assert "Who may approve: workspace or room admins" in line["text"]
    assert "Expires <!date^" in line["text"]
    assert "UTC>" in line["text"]
    assert "or react :white_check_mark: / :x:" in line["text"]
    approve, deny = actions["elements"]
    assert (approve["action_id"], approve["style"], approve["value"]) == (
        "cairn_approve",
        "primary",
        str(number),
    )
    assert (deny["action_id"], deny["style"]) == ("cairn_deny", "danger")
    assert deny["value"] == str(number)
    # The notification text is the request in words; the reply before it has no blocks.
    assert request["text"].startswith(f"Approval needed (request #{number}): ")
    (reply,) = [m for m in ops.thread() if m["ts"] != request["ts"]]
    assert "blocks" not in reply
    assert "needs a person's approval, so it has not run" in reply["text"]
    assert ops.ran() == []


# --- deciding with a button -------------------------------------------------------------


def test_approve_runs_the_tool_once_and_the_request_shows_who_approved(ops: Ops) -> None:
    request = ops.ask()
    ops.click(request, "cairn_approve")
    ops.slack.settle(timeout=60)
    assert ops.ran() == ["restart_service"]
    texts = [m["text"] for m in ops.thread()]
    assert any(
        t.startswith("UADMIN approved request #1: ran ops__restart_service in") and "(ok)" in t
        for t in texts
    ), texts
    assert any("payments restarted" in t for t in texts), texts  # the model's reply
    updated = ops.request()
    assert not _has_buttons(updated)
    assert "Approved by <@UADMIN>" in _texts(updated["blocks"])
    assert "ops__restart_service" in _texts(updated["blocks"])  # the request is still shown
    assert ops.approval().status == ApprovalStatus.RAN
    assert ops.api.ephemerals() == []


def test_a_server_that_crashes_during_an_approved_call_is_reported_in_the_thread(
    ops: Ops,
) -> None:
    request = ops.ask("run ops__crash")
    ops.click(request, "cairn_approve")
    ops.slack.settle(timeout=60)
    assert ops.ran() == ["crash"]  # it ran once, and the server died under it
    texts = [m["text"] for m in ops.thread()]
    assert any(
        t.startswith("UADMIN approved request #1: ran ops__crash in") and "(crashed)" in t
        for t in texts
    ), texts
    assert any("ops__crash failed (crashed)" in t for t in texts), texts  # the model's reply
    approval = ops.approval()
    assert (approval.status, approval.outcome) == (ApprovalStatus.RAN, "crashed")
    assert not _has_buttons(ops.request())


def test_deny_never_runs_the_tool_and_the_model_is_told(ops: Ops) -> None:
    request = ops.ask()
    ops.click(request, "cairn_deny")
    ops.slack.settle(timeout=60)
    assert ops.ran() == []
    texts = [m["text"] for m in ops.thread()]
    assert "UADMIN denied request #1: ops__restart_service did not run." in texts
    assert any("denied request #1, so ops__restart_service did not run" in t for t in texts)
    updated = ops.request()
    assert not _has_buttons(updated)
    assert "Denied by <@UADMIN>" in _texts(updated["blocks"])
    assert ops.approval().status == ApprovalStatus.DENIED


def test_a_click_by_someone_not_allowed_is_answered_privately_and_changes_nothing(
    ops: Ops,
) -> None:
    request = ops.ask()
    ops.click(request, "cairn_approve", user="UANN")
    ops.slack.settle(timeout=60)
    (told,) = ops.api.ephemerals()
    assert (told["channel"], told["user"], told["thread_ts"]) == (CHANNEL, "UANN", TS)
    assert "You can't approve request #1 (ops__restart_service)" in told["text"]
    assert "workspace or room admins" in told["text"]
    assert ops.ran() == []
    assert ops.approval().status == ApprovalStatus.PENDING
    assert _has_buttons(ops.request())  # still open
    assert len(ops.thread()) == 2  # nothing said in the thread
    ops.click(ops.request(), "cairn_approve")  # someone allowed still can
    ops.slack.settle(timeout=60)
    assert ops.ran() == ["restart_service"]
    assert "Approved by <@UADMIN>" in _texts(ops.request()["blocks"])


def test_a_redelivered_click_and_a_double_click_run_the_tool_once(ops: Ops) -> None:
    request = ops.ask()
    payload = ops.click(request, "cairn_approve")
    status, _ = ops.slack.click(payload)  # the same click delivered again
    assert status == 200
    ops.slack.settle(timeout=60)
    assert len(_decisions(ops)) == 1
    assert ops.api.ephemerals() == []  # a redelivery is dropped quietly
    ops.click(request, "cairn_approve")  # a second click of the same person: a new click
    ops.slack.settle(timeout=60)
    assert ops.ran() == ["restart_service"]
    assert len(_decisions(ops)) == 1
    (told,) = ops.api.ephemerals(ADMIN)
    assert "Request #1 (ops__restart_service) was already approved by UADMIN" in told["text"]
    notices = [m for m in ops.thread() if "approved request #1: ran" in m["text"]]
    assert len(notices) == 1


def test_an_expired_request_is_told_to_the_thread_and_a_late_click_privately(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    running, calls = _running(
        monkeypatch, tmp_path, CAIRN_MCP_APPROVAL_TTL="1", CAIRN_BEAT_INTERVAL="1"
    )
    with running as slack:
        ops = Ops(slack, calls)
        request = ops.ask()
        expired = "request #1 (ops__restart_service) expired unanswered: it did not run."
        ops.api.wait_for(
            lambda: expired in [m["text"] for m in ops.thread()],
            timeout=30,
            what="the expiry notice",
        )
        assert ops.approval().status == ApprovalStatus.EXPIRED
        # Nobody clicked: the request closed with the notice, its buttons gone.
        ops.api.wait_for(
            lambda: not _has_buttons(ops.request()), timeout=30, what="the request closed"
        )
        assert "Expired unanswered" in _texts(ops.request()["blocks"])
        ops.click(request, "cairn_approve")
        ops.slack.settle(timeout=60)
        (told,) = ops.api.ephemerals(ADMIN)
        assert "Request #1 (ops__restart_service) expired unanswered" in told["text"]
        assert told["thread_ts"] == TS
        assert ops.ran() == []
        updated = ops.request()
        assert not _has_buttons(updated)
        assert "Expired unanswered" in _texts(updated["blocks"])


def test_a_badly_signed_click_is_refused_and_changes_nothing(ops: Ops) -> None:
    request = ops.ask()
    payload = block_actions_payload(request, "cairn_approve", _value(request), user=ADMIN)
    status, _ = ops.slack.click(payload, secret="not-the-signing-secret")
    assert status == 401
    ops.slack.settle(timeout=10)
    assert ops.ran() == []
    assert _decisions(ops) == []
    assert ops.approval().status == ApprovalStatus.PENDING
    assert _has_buttons(ops.request())
    assert ops.api.ephemerals() == []
    assert ops.api.calls("chat.update") == []


def test_malformed_clicks_get_a_private_answer_and_the_app_carries_on(ops: Ops) -> None:
    request = ops.ask()
    not_a_number = block_actions_payload(request, "cairn_approve", "1; drop", user=ADMIN)
    unknown = block_actions_payload(request, "cairn_explode", "1", user=ADMIN)
    nowhere = block_actions_payload(request, "cairn_approve", "1", user=ADMIN)
    for part in ("channel", "container", "message"):
        nowhere.pop(part)
    huge = block_actions_payload(request, "cairn_approve", "9" * 26, user=ADMIN)
    for payload in (not_a_number, unknown, nowhere, huge):
        status, _ = ops.slack.click(payload)
        assert status == 200
    ops.slack.settle(timeout=30)
    told = [e["text"] for e in ops.api.ephemerals(ADMIN)]
    assert len(told) == 3  # the click without a channel can't be answered in one
    assert "does not name a request for approval" in told[0]
    assert "no button 'cairn_explode'" in told[1]
    # A 26-digit request number once overflowed the database driver, and nobody was told.
    assert "a number of 26 digits" in told[2]
    assert ops.ran() == []
    assert _decisions(ops) == []
    assert ops.slack.health()[0] == 200
    ops.click(request, "cairn_approve")  # and a good click still counts
    ops.slack.settle(timeout=60)
    assert ops.ran() == ["restart_service"]


def test_a_click_naming_another_request_than_its_message_is_refused_and_audited(
    ops: Ops,
) -> None:
    first = ops.ask()
    second = ops.ask(ts=OTHER_TS)  # another thread of the same channel
    named = _value(second)
    assert _value(first) != named
    # Signed by Slack, made on the first request's message, naming the second: refused.
    ops.click(first, "cairn_approve", value=named)
    # Made in the second request's thread, but on a message that is not the request.
    (not_the_request,) = [m for m in ops.thread(OTHER_TS) if not m.get("blocks")][:1]
    ops.click(not_the_request, "cairn_approve", value=named)
    ops.slack.settle(timeout=30)
    assert ops.ran() == []
    assert _decisions(ops) == []
    with ops.slack.pipeline.rt.db.session() as s:
        rows = s.exec(select(ToolApproval)).all()
        audited = s.exec(select(SessionEvent).where(SessionEvent.kind == EventKind.ERROR)).all()
    assert {r.status for r in rows} == {ApprovalStatus.PENDING}
    told = [e["text"] for e in ops.api.ephemerals(ADMIN)]
    assert len(told) == 2
    assert f"Request #{named} was asked in another thread" in told[0]
    assert f"This message is not request #{named}" in told[1]
    assert [(e.user, e.data["approval"]) for e in audited] == [(ADMIN, int(named))] * 2
    assert all(e.session_id == rows[1].session_id for e in audited)
    ops.click(second, "cairn_approve")  # on its own message, it counts
    ops.slack.settle(timeout=60)
    assert ops.ran() == ["restart_service"]


@pytest.mark.postgres
@pytest.mark.slow
def test_a_click_while_the_database_is_down_is_kept_and_counts_once_it_is_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with PrivatePostgres() as postgres:
        running, calls = _running(monkeypatch, tmp_path, CAIRN_DATABASE_URL=postgres.url())
        with running as slack:
            ops = Ops(slack, calls)
            request = ops.ask()
            postgres.stop()
            ops.click(request, "cairn_approve")  # acknowledged: it is on disk
            told = ops.api.wait_for(lambda: ops.api.ephemerals(ADMIN), what="a private word")
            assert "database is unavailable" in told[0]["text"]
            assert "No need to click again" in told[0]["text"]
            assert ops.ran() == []
            postgres.start()
            ops.api.wait_for(ops.ran, timeout=60, what="the approved call")
            slack.settle(timeout=60)
            assert ops.ran() == ["restart_service"]
            assert "Approved by <@UADMIN>" in _texts(ops.request()["blocks"])
            assert len(ops.api.ephemerals(ADMIN)) == 1  # told once, however long it waited


# --- deciding with a reaction -----------------------------------------------------------


def _react(ops: Ops, request: dict[str, Any], user: str, emoji: str) -> None:
    ops.slack.deliver(
        {
            "type": "reaction_added",
            "user": user,
            "reaction": emoji,
            "item": {"type": "message", "channel": CHANNEL, "ts": request["ts"]},
            "item_user": BOT_USER,
            "event_ts": f"{time.time():.6f}",
        }
    )
    ops.slack.settle(timeout=60)


def test_a_refused_reaction_is_answered_privately_and_an_allowed_one_closes_the_request(
    ops: Ops,
) -> None:
    request = ops.ask()
    _react(ops, request, "UANN", "white_check_mark")
    (told,) = ops.api.ephemerals("UANN")
    assert "You can't approve request #1" in told["text"]
    assert told["thread_ts"] == TS
    assert ops.ran() == []
    assert _has_buttons(ops.request())
    _react(ops, request, ADMIN, "white_check_mark")
    assert ops.ran() == ["restart_service"]
    assert "Approved by <@UADMIN>" in _texts(ops.request()["blocks"])
    assert ops.api.ephemerals(ADMIN) == []


# --- Socket Mode ------------------------------------------------------------------------


def test_over_socket_mode_a_click_is_acknowledged_and_decides(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    running, calls = _running_socket(monkeypatch, tmp_path)
    with running as slack:
        ops = Ops(slack, calls)
        request = ops.ask()
        assert slack.socket is not None
        payload = block_actions_payload(request, "cairn_deny", _value(request), user=ADMIN)
        envelope = slack.socket.send(payload, kind="interactive")
        assert slack.socket.ack_delay(envelope) < 3.0
        slack.settle(timeout=60)
        assert ops.ran() == []
        assert "Denied by <@UADMIN>" in _texts(ops.request()["blocks"])


def _running_socket(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    calls = tmp_path / "calls.jsonl"
    config = _config(tmp_path, calls)
    return running_slack(monkeypatch, socket_mode=True, CAIRN_CONFIG=str(config)), calls
