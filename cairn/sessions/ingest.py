"""Taking an event in: validate, dedupe, write it durably to its session's log, then enqueue.

The database's unique constraints on (tenant, event id) and (tenant, message id) are the
dedupe of record: a retried or double-delivered event finds its row already there. The
in-memory / Redis dedupe in :mod:`cairn.bot.dedupe` only saves the round trip.

One exception: when agents have bot identities of their own, one message reaches several
frontends, and the identity it mentions may come second. A copy addressed to an agent then
turns the logged, unaddressed copy into that agent's work, once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from cairn.core import stages
from cairn.core.gate import rejoin
from cairn.core.secrets import may_be_second_part
from cairn.core.settings import Settings
from cairn.db.models import EventKind, EventStatus, OutboundMessage, SessionEvent, utcnow
from cairn.sessions.approvals import Approvals, decision_of_reaction
from cairn.sessions.events import ChatEvent, EventType
from cairn.sessions.log import EventLog, ThreadRef
from cairn.sessions.outbox import message_at

__all__ = ["Admission", "Ingested", "ingest"]


class Admission(StrEnum):
    """What became of an incoming event."""

    QUEUED = "queued"  # written to the log; a worker must handle it
    DUPLICATE = "duplicate"  # seen before: nothing written, nothing to do
    IGNORED = "ignored"  # not for us (e.g. a reaction on a message that isn't the bot's)
    REFUSED = "refused"  # a decision not taken: see ``answer`` (tell the person privately)


@dataclass(frozen=True, slots=True)
class Ingested:
    """The outcome of :func:`ingest`."""

    admission: Admission
    session_id: int | None = None
    event_row: int | None = None
    answer: str = ""


def ingest(
    log: EventLog,
    event: ChatEvent,
    *,
    agent: str,
    max_chars: int,
    settings: Settings | None = None,
) -> Ingested:
    """Validate ``event`` and append it to its session's log as pending work.

    A decision on a held tool call (a DECISION event, or the approve or deny reaction on the
    request; ``settings`` says who may decide) is applied by
    :meth:`~cairn.sessions.approvals.Approvals.decide`; one not taken is REFUSED with the
    answer for the person. Raises InvalidInput for an empty, oversized or malformed event
    (nothing is written).
    """
    with stages.span("gate"):  # validation, and the gate of the text
        event = event.validated(max_chars)
    if event.type is EventType.MESSAGE:
        return _message(log, event, agent)
    if event.type is EventType.DECISION:
        return _decision(log, event, settings)
    return _reaction(log, event, settings)


def _decision(
    log: EventLog,
    event: ChatEvent,
    settings: Settings | None,
    request: OutboundMessage | None = None,
) -> Ingested:
    if settings is None:
        return Ingested(Admission.REFUSED, answer="decisions on tool calls are not taken here")
    decided = Approvals(log.db).decide(log, event, settings, request=request)
    if decided.duplicate:
        return Ingested(Admission.DUPLICATE, decided.session_id)
    if not decided.queued:
        return Ingested(
            Admission.REFUSED,
            decided.session_id,
            decided.event_row,
            answer=decided.answer,
        )
    return Ingested(Admission.QUEUED, decided.session_id, decided.event_row)


def _message(log: EventLog, event: ChatEvent, default_agent: str) -> Ingested:
    ref = ThreadRef(event.platform, event.tenant, event.channel, event.thread)
    session = log.open_session(ref, event.agent or default_agent)
    assert session.id is not None
    try:
        with log.db.session() as s:
            event = _rejoined(s, session.id, event)
            row = log.append_in(
                s,
                session.id,
                event.tenant,
                EventKind.MESSAGE,
                text=event.text,
                status=EventStatus.PENDING if event.addressed else EventStatus.DONE,
                user=event.user,
                agent=event.agent or session.agent,
                event_ref=event.event_id or None,
                message_ref=f"{event.channel}:{event.message_id}" if event.message_id else None,
                data={
                    "mentions": list(event.mentions),
                    "addressed": event.addressed,
                    "untrusted": event.untrusted,
                    "private": event.private,
                    **({"isolated": True} if event.isolated else {}),
                    **({"conversation": event.conversation} if event.conversation else {}),
                    **({"secrets": list(event.secrets)} if event.secrets else {}),
                    **({"hidden": event.hidden} if event.hidden else {}),
                    **_attached(event),
                },
                wake=True,  # a new message wakes an ended session
            )
    except IntegrityError:
        if event.addressed and event.message_id:
            upgraded = _address_logged_copy(log, event, f"{event.channel}:{event.message_id}")
            if upgraded is not None:
                return Ingested(Admission.QUEUED, session.id, upgraded)
        return Ingested(Admission.DUPLICATE, session.id)
    admission = Admission.QUEUED if event.addressed else Admission.IGNORED
    return Ingested(admission, session.id, row["id"])


def _attached(event: ChatEvent) -> dict[str, Any]:
    """What the log keeps of a message's artifact cards (pastes and files made cards)."""
    if not event.attached_chars:
        return {}
    return {"artifacts": list(event.artifacts), "attached_chars": event.attached_chars}


# How long after a message the next one may still be read as the rest of a credential it began.
_SPLIT_WINDOW = timedelta(minutes=10)


def _rejoined(s: Session, session_id: int, event: ChatEvent) -> ChatEvent:
    """``event``, with the second part of a credential split over the person's previous
    message in the thread and this one masked, and the first part masked in the log.

    Read only when the message opens with a key-like word (cairn.core.secrets.find_split):
    most messages cost nothing here.
    """
    if not may_be_second_part(event.text):
        return event
    previous = s.exec(
        select(SessionEvent)
        .where(
            SessionEvent.session_id == session_id,
            SessionEvent.kind == EventKind.MESSAGE,
            col(SessionEvent.created_at) >= utcnow() - _SPLIT_WINDOW,
        )
        .order_by(col(SessionEvent.seq).desc())
        .limit(1)
    ).first()
    if previous is None or previous.user != event.user or previous.data.get("attached_chars"):
        return event  # a credential in a file is masked in it: the next message is its own
    found = rejoin(previous.text, event.text)
    if found is None:
        return event
    kind, before, text = found
    s.exec(update(SessionEvent).where(col(SessionEvent.id) == previous.id).values(text=before))
    secrets = tuple(dict.fromkeys((*event.secrets, kind)))
    return replace(event, text=text, secrets=secrets)


def _address_logged_copy(log: EventLog, event: ChatEvent, message_ref: str) -> int | None:
    """Make the logged unaddressed copy of ``event``'s message pending work for its agent.

    Returns the row's id, or None when the logged copy was addressed already (a true
    duplicate). The guarded update lets only one of two racing copies win.
    """
    with log.db.session() as s:
        row = s.exec(
            select(SessionEvent).where(
                SessionEvent.tenant_id == event.tenant,
                SessionEvent.message_ref == message_ref,
                SessionEvent.kind == EventKind.MESSAGE,
            )
        ).first()
        if row is None or row.data.get("addressed", True) or row.status != EventStatus.DONE:
            return None
        changed = s.exec(
            update(SessionEvent)
            .where(
                col(SessionEvent.id) == row.id,
                col(SessionEvent.status) == EventStatus.DONE,
                col(SessionEvent.agent) == row.agent,  # not already taken by another copy
            )
            .values(
                status=EventStatus.PENDING,
                agent=event.agent or row.agent,
                data={**row.data, "addressed": True},
            )
        )
        return row.id if changed.rowcount else None


def _reaction(log: EventLog, event: ChatEvent, settings: Settings | None) -> Ingested:
    target = message_at(log.db, event.tenant, event.target_id or "")
    if target is None:
        return Ingested(Admission.IGNORED)  # not a message of ours: ignored quietly
    if target.kind == "approval":
        # A request for approval: its approve and deny reactions decide, nothing else counts.
        decision = decision_of_reaction(settings, event.reaction or "") if settings else None
        if decision is None or event.type is EventType.REACTION_REMOVED:
            return Ingested(Admission.IGNORED, target.session_id)
        approval = str(target.data.get("approval", ""))
        # Made on the request's own message, so in its thread (docs/adr/0037).
        decided = replace(
            event,
            type=EventType.DECISION,
            decision=decision,
            target_id=approval,
            thread=target.thread_ref,
        )
        return _decision(log, decided, settings, request=target)
    try:
        with log.db.session() as s:
            row = log.append_in(
                s,
                target.session_id,
                event.tenant,
                EventKind.REACTION,
                text=event.reaction or "",
                status=EventStatus.PENDING,
                user=event.user,
                agent=target.agent,  # its acknowledgement comes from the agent reacted to
                event_ref=event.event_id or None,
                data={
                    "emoji": event.reaction,
                    "target": event.target_id,
                    "outbound_id": target.id,
                    "removed": event.type is EventType.REACTION_REMOVED,
                    "admin": event.admin,
                    **({"steward": True} if event.steward else {}),
                    "untrusted": event.untrusted,
                    "private": event.private,
                    **({"isolated": True} if event.isolated else {}),
                },
            )
    except IntegrityError:
        return Ingested(Admission.DUPLICATE, target.session_id)
    return Ingested(Admission.QUEUED, target.session_id, row["id"])
