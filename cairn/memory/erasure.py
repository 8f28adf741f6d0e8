"""Erasure on request: everything a person said and taught, out of every store (docs/adr/0043).

:func:`erase_person` deletes, in one transaction, what a person (a Slack or Matrix user id, or
a console name) said and what was made of it:

- memories they wrote or that were written in their turns (imported episodes included), and
  learnings drawn from their words; the index points of all of these go first;
- their messages, reactions and decisions in the session logs, with everything the bot did
  and said in answer (tool calls and results, replies, notices, requests for approval), the
  outbox rows, streamed replies, dead letters and telemetry of those turns; the sessions'
  checkpoints, which are derived from the log and rebuilt from what is left;
- the artifacts (pastes, files, long tool output) those turns made, with the bytes of the
  images they attached;
- memos they sent or asked an agent to send, and the reasons they gave for retractions.

Messages of the bot in other people's threads that showed an erased memory keep their place
but lose their text. One ``erasure`` row records whom, by whom and when, with counts only.
:func:`compact` then makes the freed bytes unreadable where Cairn owns the files: SQLite is
vacuumed and its write-ahead log truncated, and the embedded index is rewritten.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, delete, or_, true, update
from sqlmodel import Session, col, select

from cairn.core.errors import StorageError
from cairn.db import Database
from cairn.db.models import (
    Artifact,
    ArtifactImage,
    ContextArtifact,
    ContextCheckpoint,
    ContextTelemetry,
    DeadLetter,
    Erasure,
    MemoReceipt,
    MemoRow,
    MemoryAudit,
    MemoryOutbox,
    MemoryRow,
    MemoryUse,
    OutboundMessage,
    Reaction,
    SessionEvent,
    StreamedReply,
    ToolApproval,
)
from cairn.memory.index import IndexUnavailable, VectorIndex
from cairn.memory.store import LEARNED, RETRACT

__all__ = [
    "ERASED_TEXT",
    "ErasureReport",
    "Removal",
    "chunks",
    "compact",
    "delete_in",
    "erase_person",
    "ids_of",
    "ids_where",
    "remove",
]

# What a bot message that showed an erased memory says afterwards.
ERASED_TEXT = "[erased on request]"
# An artifact's short id on a card ("[artifact 1f2e3d4c5b6a ·", retrieve_artifact("...")).
_ARTIFACT_REF = re.compile(r"\b([0-9a-f]{12,64})\b")


@dataclass(frozen=True, slots=True)
class ErasureReport:
    """What an erasure removed (or, on a dry run, would remove): rows per kind, and the
    tenants they were in. ``audit_id`` is the ``erasure`` row (None on a dry run)."""

    person: str
    dry_run: bool
    counts: dict[str, int] = field(default_factory=dict)
    tenants: list[str] = field(default_factory=list)
    audit_id: int | None = None

    @property
    def total(self) -> int:
        """Rows removed or blanked, all kinds together."""
        return sum(self.counts.values())


@dataclass(slots=True)
class Removal:
    """The rows to take out, by kind (see :func:`remove`)."""

    memories: set[int] = field(default_factory=set)
    events: set[int] = field(default_factory=set)
    outbound: set[int] = field(default_factory=set)
    redacted: set[int] = field(default_factory=set)  # other threads' messages showing one
    redacted_events: set[int] = field(default_factory=set)
    sessions: set[int] = field(default_factory=set)
    context_artifacts: set[int] = field(default_factory=set)
    artifacts: set[str] = field(default_factory=set)
    memos: set[int] = field(default_factory=set)
    reactions: set[int] = field(default_factory=set)
    approvals: set[int] = field(default_factory=set)
    reasons: set[int] = field(default_factory=set)  # memories whose retraction reason is theirs
    said_in_audit: set[int] = field(default_factory=set)  # audit rows holding their reason
    tenants: set[str] = field(default_factory=set)

    def counts(self) -> dict[str, int]:
        return {
            "memories": len(self.memories),
            "session_events": len(self.events),
            "bot_messages": len(self.outbound),
            "bot_messages_blanked": len(self.redacted),
            "artifacts": len(self.artifacts),
            "memos": len(self.memos),
            "reactions": len(self.reactions),
            "approvals": len(self.approvals),
            "retraction_reasons": len(self.reasons),
        }


def erase_person(
    db: Database,
    index: VectorIndex | None,
    person: str,
    *,
    by: str,
    tenant: str | None = None,
    dry_run: bool = False,
) -> ErasureReport:
    """Erase ``person`` (in ``tenant``, or in every tenant when None), recording ``by``.

    The index points of the erased memories are deleted before the database rows, so a
    failure between the two leaves rows that a second run erases. ``dry_run`` counts what
    would go and changes nothing. Raises StorageError when the vector index cannot be
    reached (nothing is erased then: run again once it is up).
    """
    with db.session() as s:
        plan = _plan(s, person, tenant)
        report = ErasureReport(person, dry_run, plan.counts(), sorted(plan.tenants))
        if dry_run:
            return report
        try:
            remove(s, index, plan)
        except IndexUnavailable as exc:
            raise StorageError(
                f"nothing was erased: the vector index is unavailable ({exc}). With the "
                "embedded index, stop the process that holds it (cairn run, cairn worker) and "
                "run the erasure again"
            ) from exc
        audit = Erasure(tenant_id=tenant or "", person=person, erased_by=by, counts=report.counts)
        s.add(audit)
        s.flush()
        return ErasureReport(person, False, report.counts, report.tenants, audit.id)


def compact(db: Database, index: VectorIndex | None) -> list[str]:
    """Leave no erased byte readable in the files Cairn owns; returns what could not be done.

    SQLite: VACUUM rewrites the file without free pages, and a truncating checkpoint empties
    the write-ahead log (both wait for other connections' transactions; one still open makes
    the checkpoint partial, which is reported). The embedded index is rewritten with its live
    points only (it keeps deleted ones in its log). PostgreSQL's own files are the server's:
    its VACUUM reclaims dead rows in time.
    """
    problems: list[str] = []
    if db.is_sqlite:
        with db.engine.connect() as conn:
            raw = conn.connection.driver_connection
            assert raw is not None
            raw.execute("PRAGMA secure_delete=ON")
            raw.commit()
            raw.execute("VACUUM")
            busy = raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy is not None and busy[0]:
                problems.append("the SQLite log is in use by another process: run erase again")
    if index is not None:
        try:
            index.compact()
        except IndexUnavailable as exc:
            problems.append(f"the vector index was not compacted: {exc}")
    return problems


# --- what goes ------------------------------------------------------------------------------


def _in_tenant(column: Any, tenant: str | None) -> Any:
    return true() if tenant is None else column == tenant


def _plan(s: Session, person: str, tenant: str | None) -> Removal:
    plan = Removal()
    _plan_memories(s, plan, person, tenant)
    _plan_sessions(s, plan, person, tenant)
    _plan_redactions(s, plan)
    memos = s.exec(
        select(MemoRow.id, MemoRow.tenant_id).where(
            or_(col(MemoRow.sender) == person, col(MemoRow.asked_by) == person),
            _in_tenant(MemoRow.tenant_id, tenant),
        )
    ).all()
    plan.memos = {mid for mid, _ in memos if mid is not None}
    plan.tenants.update(t for _, t in memos)
    plan.reactions |= ids_where(
        s, Reaction.id, and_(col(Reaction.user) == person, _in_tenant(Reaction.tenant_id, tenant))
    )
    plan.approvals |= ids_where(
        s,
        ToolApproval.id,
        and_(col(ToolApproval.requested_by) == person, _in_tenant(ToolApproval.tenant_id, tenant)),
    )
    plan.reasons = {
        mid
        for mid in s.exec(
            select(MemoryRow.id).where(
                MemoryRow.retracted_by == person,
                MemoryRow.retraction_reason != "",
                _in_tenant(MemoryRow.tenant_id, tenant),
            )
        ).all()
        if mid is not None and mid not in plan.memories
    }
    # A retraction's audit row keeps the reason given, in the retracting person's words.
    plan.said_in_audit = {
        aid
        for aid, memory_id, data in s.exec(
            select(MemoryAudit.id, MemoryAudit.memory_id, MemoryAudit.data).where(
                MemoryAudit.actor == person,
                MemoryAudit.action == RETRACT,
                _in_tenant(MemoryAudit.tenant_id, tenant),
            )
        ).all()
        if aid is not None and memory_id not in plan.memories and (data or {}).get("reason")
    }
    return plan


def _plan_memories(s: Session, plan: Removal, person: str, tenant: str | None) -> None:
    rows = s.exec(
        select(MemoryRow.id, MemoryRow.tenant_id).where(
            or_(col(MemoryRow.author) == person, col(MemoryRow.user_id) == person),
            _in_tenant(MemoryRow.tenant_id, tenant),
        )
    ).all()
    for memory_id, in_tenant in rows:
        plan.memories.add(memory_id or 0)
        plan.tenants.add(in_tenant)
    # Learnings record the people whose words they were drawn from (a "learned" audit row).
    learned = s.exec(
        select(MemoryAudit.memory_id, MemoryAudit.tenant_id, MemoryAudit.data).where(
            MemoryAudit.action == LEARNED, _in_tenant(MemoryAudit.tenant_id, tenant)
        )
    ).all()
    for memory_id, in_tenant, data in learned:
        if person in (data or {}).get("from", ()):
            plan.memories.add(memory_id)
            plan.tenants.add(in_tenant)


def _plan_sessions(s: Session, plan: Removal, person: str, tenant: str | None) -> None:
    theirs = s.exec(
        select(SessionEvent.id, SessionEvent.session_id, SessionEvent.tenant_id).where(
            SessionEvent.user == person, _in_tenant(SessionEvent.tenant_id, tenant)
        )
    ).all()
    plan.events = {eid for eid, _, _ in theirs if eid is not None}
    plan.sessions = {sid for _, sid, _ in theirs}
    plan.tenants.update(t for _, _, t in theirs)
    erased_texts: dict[int, list[str]] = {}
    for session_id in plan.sessions:
        events = s.exec(
            select(SessionEvent)
            .where(SessionEvent.session_id == session_id)
            .order_by(col(SessionEvent.seq))
        ).all()
        for event in events:  # in order: what answers an erased event comes after it
            if event.id in plan.events or (event.data or {}).get("cause") in plan.events:
                plan.events.add(event.id or 0)
                erased_texts.setdefault(session_id, []).append(
                    event.text + " " + str(event.data or "")
                )
    if not plan.events:
        return
    ids = sorted(plan.events)
    plan.outbound = ids_of(s, OutboundMessage.id, OutboundMessage.cause_event_id, ids)
    plan.approvals |= ids_of(s, ToolApproval.id, ToolApproval.cause_event_id, ids)
    for session_id, texts in erased_texts.items():
        _plan_artifacts(s, plan, session_id, texts)


def _plan_artifacts(s: Session, plan: Removal, session_id: int, texts: list[str]) -> None:
    """The artifacts of ``session_id`` that erased events made: those their cards name, and
    those whose text an erased event holds whole (long tool output carded when compiled)."""
    said = "\n".join(texts)
    named = set(_ARTIFACT_REF.findall(said))
    seen = s.exec(
        select(ContextArtifact.id, ContextArtifact.sha256).where(
            ContextArtifact.session_id == session_id
        )
    ).all()
    for row_id, sha in seen:
        content = s.get(Artifact, sha)
        if any(sha.startswith(ref) for ref in named) or (
            content is not None and content.content and content.content in said
        ):
            plan.context_artifacts.add(row_id or 0)
            plan.artifacts.add(sha)


def _plan_redactions(s: Session, plan: Removal) -> None:
    """Bot messages outside the erased turns that showed, used or announced an erased memory."""
    if not plan.memories:
        return
    shown = ids_of(s, MemoryUse.outbound_id, MemoryUse.memory_id, sorted(plan.memories))
    plan.redacted = shown - plan.outbound
    for outbound_id in plan.redacted:
        message = s.get(OutboundMessage, outbound_id)
        if message is None:
            continue
        for event in s.exec(
            select(SessionEvent).where(
                SessionEvent.session_id == message.session_id,
                col(SessionEvent.kind).in_(["reply", "notice"]),
                SessionEvent.text == message.text,
            )
        ).all():
            if (event.data or {}).get("cause") == message.cause_event_id:
                plan.redacted_events.add(event.id or 0)
                plan.sessions.add(message.session_id)


def ids_where(s: Session, column: Any, where: Any) -> set[int]:
    """The ids in ``column`` of the rows that match ``where``."""
    return {i for i in s.exec(select(column).where(where)).all() if i is not None}


def ids_of(s: Session, column: Any, key: Any, among: Sequence[Any]) -> set[int]:
    """The ids in ``column`` of the rows whose ``key`` is one of ``among``, asked in chunks
    (SQLite takes at most 32,766 values in one statement)."""
    found: set[int] = set()
    for chunk in chunks(among):
        found |= ids_where(s, column, col(key).in_(chunk))
    return found


# --- taking it out --------------------------------------------------------------------------


def remove(s: Session, index: VectorIndex | None, plan: Removal) -> None:
    """Take ``plan``'s rows out in the caller's transaction, its memories' index points first
    (raises IndexUnavailable, before any row is touched, when the index cannot be reached)."""
    if index is not None and plan.memories:
        index.delete(sorted(plan.memories))
    memories, events = sorted(plan.memories), sorted(plan.events)
    outbound = sorted(plan.outbound)
    delete_in(s, MemoryUse, MemoryUse.outbound_id, outbound)
    delete_in(s, MemoryUse, MemoryUse.memory_id, memories)
    delete_in(s, Reaction, Reaction.outbound_id, outbound)
    delete_in(s, Reaction, Reaction.id, sorted(plan.reactions))
    delete_in(s, OutboundMessage, OutboundMessage.id, outbound)
    delete_in(s, StreamedReply, StreamedReply.cause_event_id, events)
    delete_in(s, ToolApproval, ToolApproval.id, sorted(plan.approvals))
    delete_in(s, DeadLetter, DeadLetter.event_id, events)
    seqs = [
        row
        for chunk in chunks(events)
        for row in s.exec(
            select(SessionEvent.session_id, SessionEvent.seq).where(col(SessionEvent.id).in_(chunk))
        ).all()
    ]
    for session_id, seq in seqs:
        s.execute(
            delete(ContextTelemetry).where(
                col(ContextTelemetry.session_id) == session_id,
                col(ContextTelemetry.event_seq) == seq,
            )
        )
    delete_in(s, SessionEvent, SessionEvent.id, events)
    # Derived from the log, deterministically: rebuilt from what is left when next needed.
    delete_in(s, ContextCheckpoint, ContextCheckpoint.session_id, sorted(plan.sessions))
    delete_in(s, ContextArtifact, ContextArtifact.id, sorted(plan.context_artifacts))
    for sha in sorted(plan.artifacts):
        if s.exec(select(ContextArtifact.id).where(ContextArtifact.sha256 == sha)).first() is None:
            s.execute(delete(ArtifactImage).where(col(ArtifactImage.sha256) == sha))
            s.execute(delete(Artifact).where(col(Artifact.sha256) == sha))
    _blank(s, OutboundMessage, OutboundMessage.id, sorted(plan.redacted))
    _blank(s, SessionEvent, SessionEvent.id, sorted(plan.redacted_events))
    # The memories: what pointed at them first, then the rows (a replaced fact is current again).
    delete_in(s, MemoryOutbox, MemoryOutbox.memory_id, memories)
    delete_in(s, MemoryAudit, MemoryAudit.memory_id, memories)
    for chunk in chunks(memories):
        s.execute(
            update(MemoryRow)
            .where(col(MemoryRow.superseded_by).in_(chunk))
            .values(superseded_by=None, valid_until=None)
        )
    delete_in(s, MemoryRow, MemoryRow.id, memories)
    for chunk in chunks(sorted(plan.reasons)):
        s.execute(
            update(MemoryRow).where(col(MemoryRow.id).in_(chunk)).values(retraction_reason="")
        )
    for audit_id in sorted(plan.said_in_audit):
        row = s.get(MemoryAudit, audit_id)
        if row is not None:
            row.data = {**row.data, "reason": ""}
            s.add(row)
    memos = sorted(plan.memos)
    delete_in(s, MemoReceipt, MemoReceipt.memo_id, memos)
    delete_in(s, MemoRow, MemoRow.id, memos)


def chunks(ids: Sequence[Any], size: int = 500) -> Iterable[Sequence[Any]]:
    """``ids`` in slices of ``size``, for statements with one bound value per id."""
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def delete_in(s: Session, model: type[Any], column: Any, ids: Sequence[Any]) -> None:
    """Delete the rows of ``model`` whose ``column`` is one of ``ids``."""
    for chunk in chunks(ids):
        s.execute(delete(model).where(col(column).in_(chunk)))


def _blank(s: Session, model: type[Any], column: Any, ids: Sequence[int]) -> None:
    for chunk in chunks(ids):
        s.execute(update(model).where(col(column).in_(chunk)).values(text=ERASED_TEXT, data={}))
