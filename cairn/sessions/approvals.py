"""Tool calls held for a person's approval: asked for, decided, expired (docs/adr/0031).

A turn that calls a ``needs approval`` tool does not run it. The call is kept as a
:class:`~cairn.db.models.ToolApproval` row, written with the turn's reply (a turn redone after a
crash asks once), and a request is posted in the thread. A person's decision (a button, a
reaction on the request, ``/approve``) or its expiry is appended to the session's log as a
``decision`` event, pending like a message: the session resumes as for any other event, and no
worker waits meanwhile. Each move of the row's status is one guarded update, in the
transaction that logs the decision, so a decision counts once whoever clicks twice, and an
approved call is taken to run once (:meth:`Approvals.take_run`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from cairn.core.reactions import emoji_name
from cairn.core.settings import Settings
from cairn.db import Database
from cairn.db.models import (
    AgentSession,
    ApprovalStatus,
    EventKind,
    EventStatus,
    OutboundMessage,
    ToolApproval,
    utcnow,
)
from cairn.sessions.events import ChatEvent
from cairn.sessions.log import EventLog
from cairn.sessions.outbox import message_at

log_line = logging.getLogger(__name__)

__all__ = [
    "ADMINS",
    "Approvals",
    "Decided",
    "DecidedRequest",
    "approvers_of",
    "decision_of_reaction",
    "describe",
    "may_approve",
    "request_text",
    "ttl_of",
    "who_may",
]

# In a list of approvers: the workspace or room admins (and CAIRN_ADMINS).
ADMINS = "admins"

_PAST = {"approve": ApprovalStatus.APPROVED, "deny": ApprovalStatus.DENIED}


def approvers_of(settings: Settings, agent: str, server: str) -> dict[str, list[str]]:
    """The lists a person must be on to approve ``agent``'s calls to ``server``, by where they
    are declared: the server's and the agent's, each where declared, else CAIRN_MCP_APPROVERS."""
    lists = {}
    declared = settings.mcp.servers.get(server)
    if declared is not None and declared.approvers is not None:
        lists[f"server {server}"] = declared.approvers
    spec = settings.agents.get(agent)
    if spec is not None and spec.approvers is not None:
        lists[f"agent {agent}"] = spec.approvers
    return lists or {"CAIRN_MCP_APPROVERS": settings.mcp.approvers}


def may_approve(settings: Settings, agent: str, server: str, user: str, *, admin: bool) -> bool:
    """Whether ``user`` (a workspace or room admin when ``admin``) may decide on ``agent``'s
    calls to ``server``: they must be on every list :func:`approvers_of` gives."""
    is_admin = admin or user in settings.admins
    lists = approvers_of(settings, agent, server).values()
    return all(user in names or (ADMINS in names and is_admin) for names in lists)


def who_may(settings: Settings, agent: str, server: str) -> str:
    """Who may approve, in words: "workspace or room admins", "alice or bob"; with lists of
    both the server and the agent, each named ("on both lists: server ops: ann; agent ...")."""
    lists = approvers_of(settings, agent, server)
    described = {where: _people(names) for where, names in lists.items()}
    if len(described) == 1:
        return next(iter(described.values()))
    return "someone on both lists (" + "; ".join(f"{k}: {v}" for k, v in described.items()) + ")"


def _people(names: list[str]) -> str:
    people = [n for n in names if n != ADMINS]
    if ADMINS in names:
        people.append("workspace or room admins")
    return " or ".join(people) if people else "nobody"


def ttl_of(settings: Settings, server: str) -> float:
    """Seconds a request to run a tool of ``server`` stays open."""
    declared = settings.mcp.servers.get(server)
    if declared is not None and declared.approval_ttl is not None:
        return declared.approval_ttl
    return settings.mcp.approval_ttl


def decision_of_reaction(settings: Settings, emoji: str) -> str | None:
    """``approve`` or ``deny`` for the reactions CAIRN_MCP_APPROVE_REACTION and
    CAIRN_MCP_DENY_REACTION (in any form: ``✅``, ``:white_check_mark:``), else None."""
    name = emoji_name(emoji)
    if name == emoji_name(settings.mcp.approve_reaction):
        return "approve"
    if name == emoji_name(settings.mcp.deny_reaction):
        return "deny"
    return None


def request_text(row: ToolApproval, settings: Settings) -> str:
    """The request as posted in the thread (each frontend adds how to answer it)."""
    arguments = _arguments_line(row.arguments)
    asked = f", asked by {row.requested_by}" if row.requested_by else ""
    return (
        f"Approval needed (request #{row.id}): {row.agent or 'the agent'} wants to run "
        f"{row.tool} with {arguments}{asked}. Who may approve: "
        f"{who_may(settings, row.agent, row.server)}. It expires at "
        f"{row.expires_at:%Y-%m-%d %H:%M} UTC."
    )


def _arguments_line(arguments: Mapping[str, Any]) -> str:
    shown = json.dumps(dict(arguments), ensure_ascii=False, sort_keys=True)
    return shown if len(shown) <= 1500 else shown[:1500] + "…"


@dataclass(frozen=True, slots=True)
class Decided:
    """What became of a decision: queued as the session's work, or refused with ``answer``
    (what to tell the person, privately where the platform can). A refusal may still have
    queued work (``event_row``): the expiry of a request found expired when answered."""

    queued: bool
    session_id: int | None = None
    event_row: int | None = None
    answer: str = ""
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class DecidedRequest:
    """A request for approval (its outbox row, posted as ``posted_as``: a Slack ``channel:ts``
    or a Matrix event id) and what became of it: approved, denied or expired, ``by`` whom
    (empty for an expiry)."""

    request: OutboundMessage
    posted_as: str
    decision: str
    by: str


class Approvals:
    """The tool calls held for approval in one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # --- asking -------------------------------------------------------------------------

    @staticmethod
    def hold_in(
        s: Session,
        session: AgentSession,
        cause: int,
        pending: Mapping[str, Any],
        *,
        ttl: float,
    ) -> ToolApproval:
        """Keep the call ``pending`` (what the turn logged of it, with its tool-use ``id``) in
        the caller's transaction; the row that exists already when the turn ran before."""
        tool_use = str(pending.get("id", ""))
        found = s.exec(
            select(ToolApproval).where(
                ToolApproval.cause_event_id == cause, ToolApproval.tool_use_id == tool_use
            )
        ).first()
        if found is not None:
            return found
        now = utcnow()
        row = ToolApproval(
            session_id=session.id or 0,
            tenant_id=session.tenant_id,
            cause_event_id=cause,
            tool_use_id=tool_use,
            agent=str(pending.get("agent", "")),
            tool=str(pending.get("tool", "")),
            server=str(pending.get("server", "")),
            server_tool=str(pending.get("server_tool", "")),
            arguments=dict(pending.get("arguments") or {}),
            requested_by=str(pending.get("requested_by") or ""),
            requested_at=now,
            expires_at=now + timedelta(seconds=ttl),
        )
        s.add(row)
        s.flush()
        return row

    # --- reading ------------------------------------------------------------------------

    def get(self, approval_id: int) -> ToolApproval | None:
        """One held call by its number."""
        with self.db.session() as s:
            return s.get(ToolApproval, approval_id)

    def request_decided_in(self, notice: OutboundMessage) -> DecidedRequest | None:
        """The posted request ``notice`` tells the decision on, when ``notice`` is the first
        message answering a ``decision`` event (the worker's notice of it, whoever decided or
        the upkeep's expiry): the frontend closes that request, so it no longer asks."""
        if notice.seq != 0 or notice.kind != "notice":
            return None
        event = EventLog(self.db).event(notice.cause_event_id)
        if event is None or event.kind != EventKind.DECISION:
            return None
        approval = event.data.get("approval")
        with self.db.session() as s:
            requests = s.exec(
                select(OutboundMessage)
                .where(
                    OutboundMessage.session_id == notice.session_id,
                    OutboundMessage.kind == "approval",
                )
                .order_by(col(OutboundMessage.id))
            ).all()
        for request in requests:
            if request.data.get("approval") == approval and request.message_ref:
                decision = str(event.data.get("decision", ""))
                return DecidedRequest(request, request.message_ref, decision, event.user)
        return None

    def of_session(self, session_id: int) -> list[ToolApproval]:
        """The session's held calls, oldest first."""
        with self.db.session() as s:
            return list(
                s.exec(
                    select(ToolApproval)
                    .where(ToolApproval.session_id == session_id)
                    .order_by(col(ToolApproval.id))
                ).all()
            )

    def open_in(self, tenant: str, channel: str, thread: str) -> list[ToolApproval]:
        """The requests still waiting for a decision in a thread, oldest first."""
        with self.db.session() as s:
            return list(
                s.exec(
                    select(ToolApproval)
                    .join(AgentSession, col(AgentSession.id) == col(ToolApproval.session_id))
                    .where(
                        ToolApproval.tenant_id == tenant,
                        AgentSession.channel == channel,
                        AgentSession.thread_ref == thread,
                        ToolApproval.status == ApprovalStatus.PENDING,
                    )
                    .order_by(col(ToolApproval.id))
                ).all()
            )

    # --- deciding -----------------------------------------------------------------------

    def decide(
        self,
        log: EventLog,
        event: ChatEvent,
        settings: Settings,
        *,
        request: OutboundMessage | None = None,
    ) -> Decided:
        """Apply a person's decision (a validated DECISION event) to the call it names.

        A decision is made where its request was posted (docs/adr/0037): in the request's own
        thread, and, when the event names the message it was made on (a Slack click's
        ``message_id``, or ``request``, the message a reaction is on), on the request's own
        message. Refused with an answer for the person: a request that is not there (or not in
        this tenant and channel), one of another thread or message (audited as an ``error``
        event in the request's session), a person not allowed to decide, a request decided or
        expired already. An accepted decision moves the row and logs a pending ``decision``
        event in one transaction; the caller queues the session.
        """
        approval_id = int(event.target_id or 0)
        decision = str(event.decision)
        row = self.get(approval_id)
        session = log.session(row.session_id) if row is not None else None
        if (
            row is None
            or session is None
            or row.tenant_id != event.tenant
            or session.channel != event.channel
        ):
            return Decided(False, answer=f"There is no request #{approval_id} here to {decision}.")
        misplaced = self._misplaced(row, session, event, request)
        if misplaced:
            self._audit_misplaced(log, row, event, misplaced)
            return Decided(False, row.session_id, answer=misplaced)
        if not may_approve(settings, row.agent, row.server, event.user, admin=event.admin):
            return Decided(
                False,
                row.session_id,
                answer=(
                    f"You can't {decision} request #{approval_id} ({row.tool}): only "
                    f"{who_may(settings, row.agent, row.server)} may. Nothing changed."
                ),
            )
        now = utcnow()
        if row.status == ApprovalStatus.PENDING and row.expires_at <= now:
            # Expired before upkeep noticed: it is told now, and the model with it.
            expired = self.expire(log, row, now)
            return Decided(
                False,
                row.session_id,
                expired,
                answer=(
                    f"Request #{approval_id} ({row.tool}) expired at "
                    f"{row.expires_at:%H:%M} UTC, unanswered; it did not run. Ask again if it "
                    "is still needed."
                ),
            )
        status = _PAST[decision]
        try:
            logged = self._decide_once(
                log,
                row,
                status,
                now,
                text=f"{event.user} {status} {row.tool} (request #{approval_id})",
                user=event.user,
                event_ref=event.event_id or None,
                data={"admin": event.admin, "private": event.private},
            )
        except IntegrityError:
            return Decided(False, row.session_id, duplicate=True)
        if logged is None:
            return Decided(False, row.session_id, answer=self._already(approval_id))
        return Decided(True, row.session_id, logged)

    def _decide_once(
        self,
        log: EventLog,
        row: ToolApproval,
        status: ApprovalStatus,
        now: datetime,
        *,
        text: str,
        user: str = "",
        event_ref: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> int | None:
        """Move the pending ``row`` to ``status`` and log the pending ``decision`` event that
        resumes its session, in one transaction; returns the event's id, None when the row
        was no longer pending (or, for a person's decision, past its time)."""
        guard = [
            col(ToolApproval.id) == row.id,
            col(ToolApproval.status) == ApprovalStatus.PENDING,
        ]
        if status != ApprovalStatus.EXPIRED:
            guard.append(col(ToolApproval.expires_at) > now)
        with self.db.session() as s:
            moved = s.exec(
                update(ToolApproval)
                .where(*guard)
                .values(status=status, decided_by=user, decided_at=now)
            )
            if not moved.rowcount:
                return None
            logged = log.append_in(
                s,
                row.session_id,
                row.tenant_id,
                EventKind.DECISION,
                text=text,
                status=EventStatus.PENDING,
                user=user,
                agent=row.agent,
                event_ref=event_ref,
                data={
                    "approval": row.id,
                    "decision": status.value,
                    "tool": row.tool,
                    "decided_at": now.isoformat(),
                    **(data or {}),
                },
                wake=True,
            )
        return int(logged["id"])

    def _misplaced(
        self,
        row: ToolApproval,
        session: AgentSession,
        event: ChatEvent,
        request: OutboundMessage | None,
    ) -> str:
        """Why ``event`` may not decide ``row`` where it was made ("" when it may): another
        thread than the request's, or a message that is not the request's own."""
        if session.thread_ref != event.thread:
            return (
                f"Request #{row.id} was asked in another thread: decide it there, on its own "
                "message. Nothing changed."
            )
        if request is None and event.message_id:
            request = message_at(self.db, event.tenant, f"{event.channel}:{event.message_id}")
        made_on_a_message = request is not None or bool(event.message_id)
        if made_on_a_message and (
            request is None
            or request.kind != "approval"
            or request.session_id != row.session_id
            or request.data.get("approval") != row.id
        ):
            return (
                f"This message is not request #{row.id}: decide each request on its own "
                "message. Nothing changed."
            )
        return ""

    def _audit_misplaced(
        self, log: EventLog, row: ToolApproval, event: ChatEvent, answer: str
    ) -> None:
        """Keep a refused decision of another thread or message in the request's own session
        log (an ``error`` event, done: it wakes nothing), once per delivery."""
        where = {"platform": event.platform, "channel": event.channel, "thread": event.thread}
        try:
            log.append(
                row.session_id,
                row.tenant_id,
                EventKind.ERROR,
                text=f"refused: {event.user} tried to {event.decision} request #{row.id} "
                f"({row.tool}) from another thread or message",
                user=event.user,
                agent=row.agent,
                event_ref=event.event_id or None,
                data={
                    "approval": row.id,
                    "refused_decision": event.decision,
                    "reason": answer,
                    "from": {**where, "message": event.message_id},
                },
            )
        except IntegrityError:
            return  # this delivery was refused and kept already
        log_line.warning(
            "refused %s's %s of request #%s from %s: %s",
            event.user,
            event.decision,
            row.id,
            where,
            answer,
        )

    def _already(self, approval_id: int) -> str:
        row = self.get(approval_id)
        if row is None:  # pragma: no cover - rows are never deleted
            return f"There is no request #{approval_id}."
        if row.status == ApprovalStatus.EXPIRED:
            return f"Request #{approval_id} ({row.tool}) expired unanswered; it did not run."
        when = f" at {row.decided_at:%H:%M:%S} UTC" if row.decided_at else ""
        verb = "approved" if row.status != ApprovalStatus.DENIED else "denied"
        return f"Request #{approval_id} ({row.tool}) was already {verb} by {row.decided_by}{when}."

    # --- expiring -----------------------------------------------------------------------

    def due(self, now: datetime | None = None, limit: int = 100) -> list[ToolApproval]:
        """Requests past their expiry still waiting for a decision."""
        with self.db.session() as s:
            return list(
                s.exec(
                    select(ToolApproval)
                    .where(
                        ToolApproval.status == ApprovalStatus.PENDING,
                        col(ToolApproval.expires_at) <= (now or utcnow()),
                    )
                    .order_by(col(ToolApproval.id))
                    .limit(limit)
                ).all()
            )

    def expire(self, log: EventLog, row: ToolApproval, now: datetime | None = None) -> int | None:
        """Mark ``row`` expired and log a pending ``decision`` event saying so (the model is
        told at the session's next turn); returns the event's id, None when the request was
        decided meanwhile."""
        return self._decide_once(
            log,
            row,
            ApprovalStatus.EXPIRED,
            now or utcnow(),
            text=f"request #{row.id} to run {row.tool} expired unanswered",
        )

    def expire_due(self, log: EventLog, now: datetime | None = None) -> list[int]:
        """Expire every request past its time; returns the sessions that have news."""
        sessions = []
        for row in self.due(now):
            if self.expire(log, row, now) is not None:
                sessions.append(row.session_id)
        return sorted(set(sessions))

    # --- running ------------------------------------------------------------------------

    def take_run(self, approval_id: int) -> bool:
        """Take an approved call to run it now: True once, for one worker, ever."""
        return self._move_approved(approval_id, status=ApprovalStatus.RUNNING, started_at=utcnow())

    def refuse(self, approval_id: int, result: str) -> bool:
        """Close an approved call without running it (no longer allowed), keeping ``result``
        (what the model is told); True once, for one worker, like :meth:`take_run`."""
        return self._move_approved(
            approval_id, status=ApprovalStatus.REFUSED, outcome="refused", result=result
        )

    def _move_approved(self, approval_id: int, **values: Any) -> bool:
        """Set ``values`` on the row if it is still ``approved`` (one guarded update): True for
        the one caller that moved it."""
        with self.db.session() as s:
            moved = s.exec(
                update(ToolApproval)
                .where(
                    col(ToolApproval.id) == approval_id,
                    col(ToolApproval.status) == ApprovalStatus.APPROVED,
                )
                .values(**values)
            )
            return bool(moved.rowcount)

    def ran(self, approval_id: int, *, outcome: str, result: str, duration_ms: float) -> None:
        """Keep what the call gave (``result`` as the model is shown it)."""
        with self.db.session() as s:
            s.exec(
                update(ToolApproval)
                .where(col(ToolApproval.id) == approval_id)
                .values(
                    status=ApprovalStatus.RAN,
                    outcome=outcome[:32],
                    result=result,
                    duration_ms=round(duration_ms, 1),
                )
            )


def describe(rows: Sequence[ToolApproval]) -> list[dict[str, Any]]:
    """The rows as plain data (``cairn session show --json``)."""
    return [
        {
            "id": r.id,
            "tool": r.tool,
            "server": r.server,
            "server_tool": r.server_tool,
            "agent": r.agent,
            "arguments": r.arguments,
            "status": r.status,
            "cause": r.cause_event_id,
            "call_id": r.tool_use_id,
            "requested_by": r.requested_by,
            "requested_at": r.requested_at.isoformat(),
            "expires_at": r.expires_at.isoformat(),
            "decided_by": r.decided_by,
            "decided_at": r.decided_at.isoformat() if r.decided_at else None,
            "started_at": r.started_at.isoformat() if r.started_at else None,
            "duration_ms": r.duration_ms,
            "outcome": r.outcome,
        }
        for r in rows
    ]
