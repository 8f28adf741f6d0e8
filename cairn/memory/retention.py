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

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import col, select

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

    Episodes' index points go first. Raises IndexUnavailable when there are episodes to delete
    and the index cannot be reached (nothing is deleted then; the next run tries again).
    """
    now = now or utcnow()
    plan = Removal()
    with db.session() as s:
        if policy.retention_session_days is not None:
            cutoff = now - timedelta(days=policy.retention_session_days)
            old = set(
                s.exec(
                    select(AgentSession.id).where(
                        AgentSession.tenant_id == tenant, col(AgentSession.updated_at) < cutoff
                    )
                ).all()
            )
            waiting = {
                sid
                for chunk in chunks(sorted(sid for sid in old if sid is not None))
                for sid in s.exec(
                    select(SessionEvent.session_id).where(
                        col(SessionEvent.session_id).in_(chunk),
                        SessionEvent.status == EventStatus.PENDING,
                    )
                ).all()
            }
            plan.sessions = {sid for sid in old - waiting if sid is not None}
        if policy.retention_episode_days is not None:
            cutoff = now - timedelta(days=policy.retention_episode_days)
            plan.memories = {
                mid
                for mid in s.exec(
                    select(MemoryRow.id).where(
                        MemoryRow.tenant_id == tenant,
                        MemoryRow.kind == "episode",
                        col(MemoryRow.confirmed).is_(False),
                        col(MemoryRow.created_at) < cutoff,
                    )
                ).all()
                if mid is not None
            }
        sessions = sorted(plan.sessions)
        if sessions:
            plan.events = ids_of(s, SessionEvent.id, SessionEvent.session_id, sessions)
            plan.outbound = ids_of(s, OutboundMessage.id, OutboundMessage.session_id, sessions)
            plan.approvals = ids_of(s, ToolApproval.id, ToolApproval.session_id, sessions)
            cards = ids_of(s, ContextArtifact.id, ContextArtifact.session_id, sessions)
            plan.context_artifacts = cards
            plan.artifacts = {
                sha
                for chunk in chunks(sorted(cards))
                for sha in s.exec(
                    select(ContextArtifact.sha256).where(col(ContextArtifact.id).in_(chunk))
                ).all()
            }
        report = RetentionReport(len(plan.sessions), len(plan.events), len(plan.memories))
        if dry_run or not (plan.sessions or plan.memories):
            return report
        remove(s, index, plan)
        delete_in(s, ContextTelemetry, ContextTelemetry.session_id, sessions)
        delete_in(s, AgentSession, AgentSession.id, sessions)
    return report
