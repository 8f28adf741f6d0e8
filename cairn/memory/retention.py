"""Retention: session logs and episodes older than the configured days go (docs/adr/0043).

CAIRN_RETENTION_SESSION_DAYS deletes a session whose last activity is older than that, with its
whole log and everything hanging off it (replies, tool output, artifacts, checkpoints);
CAIRN_RETENTION_EPISODE_DAYS deletes unconfirmed episodes (turns of imported or remembered
conversations) written before that. Facts, decisions, preferences and the other kinds of
memory are kept, as are confirmed episodes: what a team agreed outlives the chat it came from.
A session with an event still waiting to be handled is left for a later run. Upkeep runs this
hourly with the tier rotation; ``cairn memory gc`` runs it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlmodel import Session, col, select

from cairn.core.settings import WorkerSettings
from cairn.db import Database
from cairn.db.models import (
    AgentSession,
    ContextArtifact,
    ContextTelemetry,
    EventStatus,
    MemoryRow,
    OutboundMessage,
    SessionEvent,
    ToolApproval,
    utcnow,
)
from cairn.memory.erasure import Removal, chunks, delete_in, ids_of, remove
from cairn.memory.index import VectorIndex

__all__ = ["RetentionReport", "apply_retention"]


@dataclass(frozen=True, slots=True)
class RetentionReport:
    """What retention deleted (or, on a dry run, would delete) in one tenant."""

    sessions: int = 0
    events: int = 0
    episodes: int = 0


# Rows a transaction deletes at most: an import of years of history can leave 100,000 episodes
# past the cutoff, and one transaction for all of them would hold SQLite's single write lock
# while every message waits (as tier rotation did, docs/adr/0041).
WRITE_CHUNK = 500
SESSION_CHUNK = 50  # sessions, each with its whole log


def apply_retention(
    db: Database,
    index: VectorIndex | None,
    tenant: str,
    policy: WorkerSettings,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
) -> RetentionReport:
    """Delete ``tenant``'s sessions idle for longer than ``policy.retention_session_days`` and
    its unconfirmed episodes older than ``policy.retention_episode_days`` (each unset: none).

    The deletions run in short transactions (``SESSION_CHUNK`` sessions, ``WRITE_CHUNK``
    episodes), each asking again whether its rows are still due: a session that woke up or an
    episode confirmed meanwhile stays. A run stopped part-way has deleted whole chunks; the
    next run deletes the rest. Episodes' index points go first. Raises IndexUnavailable when
    there are episodes to delete and the index cannot be reached (nothing more is deleted then;
    the next run tries again).
    """
    now = now or utcnow()
    session_cutoff = _cutoff(now, policy.retention_session_days)
    episode_cutoff = _cutoff(now, policy.retention_episode_days)
    with db.session() as s:
        sessions = _idle_sessions(s, tenant, session_cutoff)
        episodes = _old_episodes(s, tenant, episode_cutoff)
        if dry_run:
            events = ids_of(s, SessionEvent.id, SessionEvent.session_id, sessions)
            return RetentionReport(len(sessions), len(events), len(episodes))
    gone = RetentionReport()
    for chunk in chunks(sessions, SESSION_CHUNK):
        with db.session() as s:
            plan = _session_removal(s, _idle_sessions(s, tenant, session_cutoff, among=chunk))
            if plan.sessions:
                remove(s, index, plan)
                ids = sorted(plan.sessions)
                delete_in(s, ContextTelemetry, ContextTelemetry.session_id, ids)
                delete_in(s, AgentSession, AgentSession.id, ids)
        gone = replace(
            gone, sessions=gone.sessions + len(plan.sessions), events=gone.events + len(plan.events)
        )
    for chunk in chunks(episodes, WRITE_CHUNK):
        with db.session() as s:
            due = _old_episodes(s, tenant, episode_cutoff, among=chunk)
            if due:
                remove(s, index, Removal(memories=set(due)))
        gone = replace(gone, episodes=gone.episodes + len(due))
    return gone


def _cutoff(now: datetime, days: float | None) -> datetime | None:
    return None if days is None else now - timedelta(days=days)


def _idle_sessions(
    s: Session, tenant: str, cutoff: datetime | None, among: Sequence[int] | None = None
) -> list[int]:
    """``tenant``'s sessions (of ``among``, when given) last active before ``cutoff``, less
    those with an event still waiting to be handled; none without a cutoff."""
    if cutoff is None:
        return []
    query = select(AgentSession.id).where(
        AgentSession.tenant_id == tenant, col(AgentSession.updated_at) < cutoff
    )
    if among is not None:
        query = query.where(col(AgentSession.id).in_(among))
    old = sorted(sid for sid in s.exec(query).all() if sid is not None)
    waiting = {
        sid
        for chunk in chunks(old)
        for sid in s.exec(
            select(SessionEvent.session_id).where(
                col(SessionEvent.session_id).in_(chunk),
                SessionEvent.status == EventStatus.PENDING,
            )
        ).all()
    }
    return [sid for sid in old if sid not in waiting]


def _old_episodes(
    s: Session, tenant: str, cutoff: datetime | None, among: Sequence[int] | None = None
) -> list[int]:
    """``tenant``'s unconfirmed episodes (of ``among``, when given) written before ``cutoff``;
    none without a cutoff."""
    if cutoff is None:
        return []
    query = select(MemoryRow.id).where(
        MemoryRow.tenant_id == tenant,
        MemoryRow.kind == "episode",
        col(MemoryRow.confirmed).is_(False),
        col(MemoryRow.created_at) < cutoff,
    )
    if among is not None:
        query = query.where(col(MemoryRow.id).in_(among))
    return sorted(mid for mid in s.exec(query).all() if mid is not None)


def _session_removal(s: Session, sessions: list[int]) -> Removal:
    """What deleting ``sessions`` takes out: their log, replies, approvals and artifacts."""
    plan = Removal(sessions=set(sessions))
    if not sessions:
        return plan
    plan.events = ids_of(s, SessionEvent.id, SessionEvent.session_id, sessions)
    plan.outbound = ids_of(s, OutboundMessage.id, OutboundMessage.session_id, sessions)
    plan.approvals = ids_of(s, ToolApproval.id, ToolApproval.session_id, sessions)
    plan.context_artifacts = ids_of(s, ContextArtifact.id, ContextArtifact.session_id, sessions)
    plan.artifacts = {
        sha
        for chunk in chunks(sorted(plan.context_artifacts))
        for sha in s.exec(
            select(ContextArtifact.sha256).where(col(ContextArtifact.id).in_(chunk))
        ).all()
    }
    return plan
