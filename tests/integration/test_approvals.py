"""Held tool calls in the database (cairn/sessions/approvals.py), on SQLite and PostgreSQL.

What must hold whatever the timing: a turn redone after a crash asks once; of two people who
decide at the same moment, one decision counts; an approved call is taken to run by one worker,
ever; a request past its time expires once and its session is told; only people on every list
of approvers decide, and everyone else is told why, with nothing changed.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from cairn.core.errors import InvalidInput
from cairn.core.settings import Settings
from cairn.db import Database
from cairn.db.models import ApprovalStatus, EventKind, EventStatus, ToolApproval, utcnow
from cairn.sessions.approvals import (
    Approvals,
    decision_of_reaction,
    may_approve,
    request_text,
    who_may,
)
from cairn.sessions.events import ChatEvent, EventType
from cairn.sessions.ingest import Admission, ingest
from cairn.sessions.log import EventLog, ThreadRef

REF = ThreadRef("slack", "T1", "C1", "1700000000.000100")


def _settings(**mcp: Any) -> Settings:
    return Settings.model_validate(
        {
            "agent": "ops",
            "agents": {"ops": {}, "dev": {"approvers": ["ann", "admins"]}},
            "mcp": {"servers": {"ops": {"command": "ops-server", **mcp}}},
            "admins": ["root-admin"],
        }
    )


def _held(db: Database, *, ttl: float = 900.0, agent: str = "ops") -> ToolApproval:
    """A session with a message whose turn held ``ops__restart_service``."""
    log = EventLog(db)
    session = log.open_session(REF, agent)
    cause = log.append(session.id or 0, REF.tenant, EventKind.MESSAGE, text="restart payments")
    with db.session() as s:
        return Approvals.hold_in(s, session, cause.id or 0, _pending(agent), ttl=ttl)


def _pending(agent: str = "ops") -> dict[str, Any]:
    return {
        "id": "toolu_01",
        "tool": "ops__restart_service",
        "server": "ops",
        "server_tool": "restart_service",
        "arguments": {"service": "payments"},
        "agent": agent,
        "requested_by": "U-ann",
    }


def _decision(approval: int, user: str, decision: str = "approve", **fields: Any) -> ChatEvent:
    return ChatEvent(
        platform="slack",
        tenant=REF.tenant,
        channel=fields.pop("channel", REF.channel),
        thread=REF.thread,
        user=user,
        type=EventType.DECISION,
        decision=decision,
        target_id=str(approval),
        event_id=fields.pop("event_id", f"click-{user}-{decision}"),
        **fields,
    )


def _accept(db: Database, event: ChatEvent, settings: Settings) -> Any:
    return ingest(EventLog(db), event, agent="ops", max_chars=4000, settings=settings)


def test_a_turn_redone_after_a_crash_holds_its_call_once(database: Database) -> None:
    first = _held(database)
    session = EventLog(database).session(first.session_id)
    with database.session() as s:
        again = Approvals.hold_in(s, session, first.cause_event_id, _pending(), ttl=900)
    assert again.id == first.id
    assert len(Approvals(database).of_session(first.session_id)) == 1
    assert first.expires_at - first.requested_at == timedelta(seconds=900)


def test_an_admin_approves_and_the_session_gets_a_pending_decision(database: Database) -> None:
    row = _held(database)
    result = _accept(database, _decision(row.id or 0, "U-boss", admin=True), _settings())
    assert result.admission is Admission.QUEUED
    decided = Approvals(database).get(row.id or 0)
    assert decided is not None
    assert (decided.status, decided.decided_by) == (ApprovalStatus.APPROVED, "U-boss")
    event = EventLog(database).event(result.event_row)
    assert event is not None
    assert (event.kind, event.status, event.user) == ("decision", EventStatus.PENDING, "U-boss")
    assert event.data["approval"] == row.id
    assert event.data["decision"] == "approved"


def test_someone_not_allowed_is_told_who_may_and_nothing_changes(database: Database) -> None:
    row = _held(database)
    result = _accept(database, _decision(row.id or 0, "U-eve"), _settings())
    assert result.admission is Admission.REFUSED
    assert result.answer == (
        f"You can't approve request #{row.id} (ops__restart_service): only workspace or room "
        "admins may. Nothing changed."
    )
    assert result.event_row is None
    still = Approvals(database).get(row.id or 0)
    assert still is not None
    assert still.status == ApprovalStatus.PENDING
    # CAIRN_ADMINS count as admins whatever the platform says.
    assert _accept(database, _decision(row.id or 0, "root-admin"), _settings()).admission is (
        Admission.QUEUED
    )


def test_the_server_and_the_agent_lists_must_both_admit_a_person() -> None:
    settings = _settings(approvers=["ann", "bob"])
    assert may_approve(settings, "dev", "ops", "ann", admin=False)
    assert not may_approve(settings, "dev", "ops", "bob", admin=False)  # not on dev's list
    assert may_approve(settings, "dev", "ops", "bob", admin=True)  # dev's list takes admins
    assert not may_approve(settings, "dev", "ops", "carol", admin=True)  # not on the server's
    assert may_approve(settings, "ops", "ops", "bob", admin=False)
    assert who_may(settings, "ops", "ops") == "ann or bob"
    assert who_may(settings, "dev", "ops") == (
        "someone on both lists (server ops: ann or bob; agent dev: ann or workspace or room admins)"
    )


def test_of_two_people_deciding_at_once_one_decision_counts(database: Database) -> None:
    row = _held(database)
    settings = _settings()
    results: list[Any] = []
    start = threading.Barrier(4)

    def decide(user: str, decision: str) -> None:
        start.wait()
        results.append(
            _accept(database, _decision(row.id or 0, user, decision, admin=True), settings)
        )

    threads = [
        threading.Thread(target=decide, args=(f"U-{n}", "approve" if n % 2 else "deny"))
        for n in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    queued = [r for r in results if r.admission is Admission.QUEUED]
    refused = [r for r in results if r.admission is Admission.REFUSED]
    assert len(queued) == 1
    assert len(refused) == 3
    assert all("was already" in r.answer for r in refused)
    decided = Approvals(database).get(row.id or 0)
    assert decided is not None
    assert decided.status in {ApprovalStatus.APPROVED, ApprovalStatus.DENIED}
    decisions = [e for e in EventLog(database).events(row.session_id) if e.kind == "decision"]
    assert len(decisions) == 1


def test_the_same_click_delivered_twice_is_one_decision(database: Database) -> None:
    row = _held(database)
    click = _decision(row.id or 0, "U-boss", admin=True, event_id="action-1")
    assert _accept(database, click, _settings()).admission is Admission.QUEUED
    assert _accept(database, click, _settings()).admission is Admission.REFUSED  # decided
    decisions = [e for e in EventLog(database).events(row.session_id) if e.kind == "decision"]
    assert len(decisions) == 1


def test_an_approved_call_is_taken_to_run_once(database: Database) -> None:
    row = _held(database)
    approvals = Approvals(database)
    assert not approvals.take_run(row.id or 0)  # pending: nobody runs it
    _accept(database, _decision(row.id or 0, "U-boss", admin=True), _settings())
    taken: list[bool] = []
    start = threading.Barrier(3)

    def take() -> None:
        start.wait()
        taken.append(approvals.take_run(row.id or 0))

    threads = [threading.Thread(target=take) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(taken) == [False, False, True]
    approvals.ran(row.id or 0, outcome="ok", result='{"status": "ok"}', duration_ms=12.34)
    done = approvals.get(row.id or 0)
    assert done is not None
    assert (done.status, done.outcome, done.duration_ms) == (ApprovalStatus.RAN, "ok", 12.3)
    assert not approvals.take_run(row.id or 0)


def test_a_denied_call_can_never_be_taken_to_run(database: Database) -> None:
    row = _held(database)
    _accept(database, _decision(row.id or 0, "U-boss", "deny", admin=True), _settings())
    assert not Approvals(database).take_run(row.id or 0)


def test_a_request_past_its_time_expires_once_and_its_session_is_told(database: Database) -> None:
    row = _held(database, ttl=1)
    approvals, log = Approvals(database), EventLog(database)
    assert approvals.expire_due(log) == []  # not yet
    later = utcnow() + timedelta(seconds=2)
    assert approvals.expire_due(log, later) == [row.session_id]
    assert approvals.expire_due(log, later) == []  # once
    expired = approvals.get(row.id or 0)
    assert expired is not None
    assert expired.status == ApprovalStatus.EXPIRED
    [event] = [e for e in log.events(row.session_id) if e.kind == "decision"]
    assert (event.status, event.data["decision"]) == (EventStatus.PENDING, "expired")


def test_an_answer_after_expiry_is_refused_and_tells_the_session(database: Database) -> None:
    row = _held(database, ttl=1)
    with database.session() as s:  # its time has passed, and upkeep has not run yet
        stored = s.get(ToolApproval, row.id)
        assert stored is not None
        stored.expires_at = utcnow() - timedelta(seconds=1)
        s.add(stored)
    result = _accept(database, _decision(row.id or 0, "U-boss", admin=True), _settings())
    assert result.admission is Admission.REFUSED
    assert result.answer.startswith(f"Request #{row.id} (ops__restart_service) expired at")
    assert result.event_row is not None  # the expiry, for the model
    assert EventLog(database).event(result.event_row).data["decision"] == "expired"  # type: ignore[union-attr]


def test_a_request_is_decided_only_where_it_was_asked(database: Database) -> None:
    row = _held(database)
    elsewhere = ChatEvent(
        platform="slack",
        tenant="T-other",
        channel=REF.channel,
        thread=REF.thread,
        user="U-boss",
        type=EventType.DECISION,
        decision="approve",
        target_id=str(row.id),
        admin=True,
    )
    result = _accept(database, elsewhere, _settings())
    assert result.admission is Admission.REFUSED
    assert result.answer == f"There is no request #{row.id} here to approve."
    other_channel = _decision(row.id or 0, "U-boss", admin=True, channel="C-other")
    assert _accept(database, other_channel, _settings()).admission is Admission.REFUSED


def test_the_approve_and_deny_reactions_are_the_configured_ones() -> None:
    settings = _settings()
    assert decision_of_reaction(settings, "✅") == "approve"
    assert decision_of_reaction(settings, ":white_check_mark:") == "approve"
    assert decision_of_reaction(settings, "❌") == "deny"
    assert decision_of_reaction(settings, "+1") is None
    custom = Settings.model_validate({"mcp": {"approve_reaction": "👍", "deny_reaction": ":-1:"}})
    assert decision_of_reaction(custom, "+1") == "approve"
    assert decision_of_reaction(custom, "-1") == "deny"
    assert decision_of_reaction(custom, "white_check_mark") is None


def test_a_reaction_on_a_request_decides_and_other_reactions_on_it_do_nothing(
    database: Database,
) -> None:
    from cairn.sessions.outbox import Outbox, Said, say_in

    row = _held(database)
    log = EventLog(database)
    session = log.session(row.session_id)
    with database.session() as s:
        say_in(
            s,
            session,
            row.cause_event_id,
            [Said("approval", request_text(row, _settings()), data={"approval": row.id})],
            agent="ops",
        )
    [posted] = Outbox(database, "slack").pending()
    Outbox(database, "slack").mark_sent(posted.id or 0, f"{REF.channel}:1700000001.000200")

    def react(emoji: str, user: str, **fields: Any) -> Any:
        event = ChatEvent(
            platform="slack",
            tenant=REF.tenant,
            channel=REF.channel,
            thread=REF.thread,
            user=user,
            type=fields.pop("type", EventType.REACTION_ADDED),
            reaction=emoji,
            target_id=f"{REF.channel}:1700000001.000200",
            event_id=f"react-{user}-{emoji}",
            **fields,
        )
        return _accept(database, event, _settings())

    assert react("+1", "U-boss", admin=True).admission is Admission.IGNORED
    assert react("x", "U-eve").admission is Admission.REFUSED
    removed = react("white_check_mark", "U-boss", admin=True, type=EventType.REACTION_REMOVED)
    assert removed.admission is Admission.IGNORED
    assert react("white_check_mark", "U-boss", admin=True).admission is Admission.QUEUED
    decided = Approvals(database).get(row.id or 0)
    assert decided is not None
    assert (decided.status, decided.decided_by) == (ApprovalStatus.APPROVED, "U-boss")


def test_a_malformed_decision_is_refused_before_anything_is_written() -> None:
    with pytest.raises(InvalidInput, match="a decision is approve or deny"):
        _decision(1, "U-boss", "maybe").validated(4000)
    with pytest.raises(InvalidInput, match="needs the number of the request"):
        ChatEvent(
            platform="slack",
            tenant="T1",
            channel="C1",
            thread="t",
            user="U",
            type=EventType.DECISION,
            decision="approve",
            target_id="12; drop table",
        ).validated(4000)
