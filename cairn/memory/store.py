"""Long-term memory: scoped writes with dedupe and an index outbox, and scoped recall.

Every read goes through :func:`visible_to`, so no query can return a row of another tenant or
another agent's private memory. The database is the source of truth; the vector index is
updated through the ``memory_outbox`` table written in the same transaction as the memory, so a
crash between the two leaves work to replay rather than a gap (see docs/adr/0003).
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, func, or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from cairn.bot.events import clean_text
from cairn.db import Database
from cairn.db.models import MemoryOutbox, MemoryRow, Tenant, utcnow
from cairn.errors import InvalidInput, NotFound
from cairn.memory.index import IndexedMemory, IndexUnavailable, VectorIndex
from cairn.memory.scope import Scope, Source, Visibility
from cairn.memory.terms import terms

__all__ = [
    "MAX_MEMORY_CHARS",
    "MEMORY_KINDS",
    "Memory",
    "MemoryStore",
    "Recalled",
    "Remembered",
    "content_hash",
    "visible_to",
]

log = logging.getLogger(__name__)

MAX_MEMORY_CHARS = 2000
MEMORY_KINDS = ("fact", "preference", "decision", "pattern", "mistake", "constraint", "episode")


@dataclass(frozen=True, slots=True)
class Memory:
    """A memory as callers see it (a detached copy of its row)."""

    id: int
    tenant: str
    agent: str | None
    visibility: str
    kind: str
    text: str
    author: str
    source_thread: str
    created_at: datetime
    recall_count: int
    validity: float
    usefulness: float
    confirmed: bool
    disputes: int
    retracted: bool

    @classmethod
    def from_row(cls, row: MemoryRow) -> Memory:
        """Copy the fields of ``row``."""
        assert row.id is not None
        return cls(
            id=row.id,
            tenant=row.tenant_id,
            agent=row.agent,
            visibility=row.visibility,
            kind=row.kind,
            text=row.text,
            author=row.author,
            source_thread=row.source_thread,
            created_at=row.created_at,
            recall_count=row.recall_count,
            validity=row.validity,
            usefulness=row.usefulness,
            confirmed=row.confirmed,
            disputes=row.disputes,
            retracted=row.retracted,
        )


@dataclass(frozen=True, slots=True)
class Remembered:
    """The outcome of a write: the memory, and whether it is new or an existing duplicate."""

    memory: Memory
    created: bool


@dataclass(frozen=True, slots=True)
class Recalled:
    """A memory found by recall, with its relevance score (higher is better)."""

    memory: Memory
    score: float


def content_hash(text: str) -> str:
    """The dedupe key of a memory's text: case, spacing and final punctuation do not count."""
    folded = re.sub(r"\s+", " ", text.casefold()).strip().rstrip(".!?;: ")
    return hashlib.sha256(folded.encode()).hexdigest()


def visible_to(scope: Scope) -> ColumnElement[bool]:
    """The SQL condition every read path applies: same tenant, and shared or the agent's own."""
    return and_(
        col(MemoryRow.tenant_id) == scope.tenant,
        or_(
            col(MemoryRow.visibility).in_([Visibility.TEAM.value, Visibility.PUBLIC.value]),
            col(MemoryRow.agent) == scope.agent,
        ),
    )


class MemoryStore:
    """Scoped long-term memory over a database and an optional vector index."""

    def __init__(self, db: Database, index: VectorIndex | None, *, default_k: int = 5) -> None:
        self.db = db
        self.index = index
        self.default_k = default_k

    # --- writes -------------------------------------------------------------------------

    def remember(
        self,
        text: str,
        scope: Scope,
        *,
        kind: str = "fact",
        visibility: Visibility = Visibility.PRIVATE,
        source: Source | None = None,
    ) -> Remembered:
        """Store ``text`` in ``scope``, or return the existing memory it duplicates.

        Raises InvalidInput for empty or oversized text and unknown kinds. Re-remembering a
        retracted memory restores it, recording who restored it.
        """
        text = _validated_text(text)
        if kind not in MEMORY_KINDS:
            raise InvalidInput(
                f"unknown memory kind {kind!r}; use one of {', '.join(MEMORY_KINDS)}"
            )
        source = source or Source()
        digest = content_hash(text)
        key = scope.key(visibility)
        self._ensure_tenant(scope.tenant, source.platform)
        try:
            with self.db.session() as s:
                row = MemoryRow(
                    tenant_id=scope.tenant,
                    agent=scope.agent if visibility is Visibility.PRIVATE else None,
                    channel=scope.channel,
                    user_id=scope.user,
                    thread_ref=scope.thread,
                    visibility=visibility.value,
                    scope_key=key,
                    kind=kind,
                    text=text,
                    content_hash=digest,
                    source_platform=source.platform,
                    source_channel=source.channel,
                    source_thread=source.thread,
                    source_message=source.message,
                    author=source.author,
                )
                s.add(row)
                s.flush()
                assert row.id is not None
                s.add(MemoryOutbox(memory_id=row.id, op="upsert"))
                created = Memory.from_row(row)
        except IntegrityError:
            return Remembered(self._existing(scope, key, digest, source), created=False)
        self.flush_outbox()
        return Remembered(created, created=True)

    def _existing(self, scope: Scope, key: str, digest: str, source: Source) -> Memory:
        with self.db.session() as s:
            row = s.exec(
                select(MemoryRow).where(
                    MemoryRow.tenant_id == scope.tenant,
                    MemoryRow.scope_key == key,
                    MemoryRow.content_hash == digest,
                )
            ).one()
            if row.retracted:
                row.retracted = False
                row.retracted_at = None
                row.retraction_reason = f"restored by {source.author or 'unknown'}"
                row.updated_at = utcnow()
                s.add(row)
                s.flush()
                assert row.id is not None
                s.add(MemoryOutbox(memory_id=row.id, op="upsert"))
            memory = Memory.from_row(row)
        self.flush_outbox()
        return memory

    def _ensure_tenant(self, tenant: str, platform: str) -> None:
        with self.db.session() as s:
            if s.get(Tenant, tenant) is not None:
                return
        try:
            with self.db.session() as s:
                s.add(Tenant(id=tenant, platform=platform or tenant.split(":")[0]))
        except IntegrityError:
            pass  # another writer created it first

    def retract(self, memory_id: int, scope: Scope, *, by: str, reason: str = "") -> Memory:
        """Tombstone a memory visible in ``scope``; it is kept for audit but never recalled.

        Raises NotFound when no such memory is visible in ``scope``.
        """
        with self.db.session() as s:
            row = s.exec(
                select(MemoryRow).where(MemoryRow.id == memory_id, visible_to(scope))
            ).first()
            if row is None:
                raise NotFound(f"no memory #{memory_id} in this scope")
            if not row.retracted:
                row.retracted = True
                row.retracted_at = utcnow()
                row.retracted_by = by
                row.retraction_reason = reason
                row.updated_at = utcnow()
                s.add(row)
                s.add(MemoryOutbox(memory_id=memory_id, op="delete"))
            memory = Memory.from_row(row)
        self.flush_outbox()
        return memory

    def adjust(
        self,
        memory_id: int,
        *,
        validity: float = 0.0,
        usefulness: float = 0.0,
        disputes: int = 0,
        confirmed: bool | None = None,
    ) -> None:
        """Move a memory's scores by the given amounts (feedback from people)."""
        values: dict[str, Any] = {
            "validity": MemoryRow.validity + validity,
            "usefulness": MemoryRow.usefulness + usefulness,
            "disputes": MemoryRow.disputes + disputes,
            "updated_at": utcnow(),
        }
        if confirmed is not None:
            values["confirmed"] = confirmed
        with self.db.session() as s:
            s.exec(update(MemoryRow).where(col(MemoryRow.id) == memory_id).values(**values))

    def restore(self, memory_id: int) -> None:
        """Undo a retraction (a retract reaction was removed)."""
        with self.db.session() as s:
            row = s.get(MemoryRow, memory_id)
            if row is None or not row.retracted:
                return
            row.retracted = False
            row.retracted_at = None
            row.updated_at = utcnow()
            s.add(row)
            s.add(MemoryOutbox(memory_id=memory_id, op="upsert"))
        self.flush_outbox()

    # --- reads --------------------------------------------------------------------------

    def get(self, memory_id: int, scope: Scope) -> Memory | None:
        """The memory with ``memory_id`` if it is visible in ``scope`` (retracted ones too)."""
        with self.db.session() as s:
            row = s.exec(
                select(MemoryRow).where(MemoryRow.id == memory_id, visible_to(scope))
            ).first()
            return Memory.from_row(row) if row else None

    def newest(
        self, scope: Scope, *, limit: int = 50, include_retracted: bool = False
    ) -> list[Memory]:
        """The newest memories visible in ``scope``."""
        with self.db.session() as s:
            query = select(MemoryRow).where(visible_to(scope))
            if not include_retracted:
                query = query.where(col(MemoryRow.retracted).is_(False))
            rows = s.exec(query.order_by(col(MemoryRow.id).desc()).limit(limit)).all()
            return [Memory.from_row(r) for r in rows]

    def recall(self, query: str, scope: Scope, k: int | None = None) -> list[Recalled]:
        """The memories in ``scope`` most relevant to ``query``, best first, never retracted.

        Uses the vector index when it answers, and lexical search in the database (with a
        warning in the log) when it does not.
        """
        k = k or self.default_k
        candidates: list[tuple[int, float]] | None = None
        if self.index is not None:
            try:
                candidates = self.index.search(query, scope.tenant, scope.agent, k * 3)
            except IndexUnavailable as exc:
                log.warning("vector index unavailable, recalling lexically: %s", exc)
        if candidates is None:
            candidates = self._lexical(query, scope, k * 3)
        if not candidates:
            return []
        scores = dict(candidates)
        now = utcnow()
        with self.db.session() as s:
            rows = s.exec(
                select(MemoryRow).where(
                    col(MemoryRow.id).in_(list(scores)),
                    visible_to(scope),
                    col(MemoryRow.retracted).is_(False),
                )
            ).all()
            ranked = sorted(rows, key=lambda r: (-_ranked(scores[r.id or 0], r), -(r.id or 0)))[:k]
            ids = [r.id for r in ranked]
            if ids:
                s.exec(
                    update(MemoryRow)
                    .where(col(MemoryRow.id).in_(ids))
                    .values(recall_count=MemoryRow.recall_count + 1, last_recalled_at=now)
                )
            return [Recalled(Memory.from_row(r), _ranked(scores[r.id or 0], r)) for r in ranked]

    def _lexical(self, query: str, scope: Scope, k: int) -> list[tuple[int, float]]:
        wanted = set(terms(query))
        if not wanted:
            return []
        like = [func.lower(MemoryRow.text).contains(t) for t in sorted(wanted)[:16]]
        with self.db.session() as s:
            rows = s.exec(
                select(MemoryRow)
                .where(visible_to(scope), col(MemoryRow.retracted).is_(False), or_(*like))
                .order_by(col(MemoryRow.id).desc())
                .limit(500)
            ).all()
        scored = []
        for row in rows:
            overlap = len(wanted & set(terms(row.text)))
            if overlap:
                scored.append((row.id or 0, overlap / len(wanted)))
        scored.sort(key=lambda pair: -pair[1])
        return scored[:k]

    # --- the index outbox ---------------------------------------------------------------

    def flush_outbox(self, limit: int = 500) -> int:
        """Apply pending index work; returns how many entries were applied.

        Leaves the entries in place (with the error recorded) when the index is unavailable,
        so that a later call, at start or on schedule, replays them.
        """
        if self.index is None:
            return 0
        with self.db.session() as s:
            pending = s.exec(select(MemoryOutbox).order_by(col(MemoryOutbox.id)).limit(limit)).all()
            if not pending:
                return 0
            rows = {
                r.id: r
                for r in s.exec(
                    select(MemoryRow).where(col(MemoryRow.id).in_({p.memory_id for p in pending}))
                ).all()
            }
        latest: dict[int, MemoryOutbox] = {p.memory_id: p for p in pending}
        upserts = [
            IndexedMemory(m.id or 0, m.text, m.tenant_id, m.agent, m.visibility)
            for mid, entry in latest.items()
            if (m := rows.get(mid)) is not None and entry.op == "upsert" and not m.retracted
        ]
        deletes = [mid for mid in latest if mid not in {u.memory_id for u in upserts}]
        try:
            self.index.upsert(upserts)
            self.index.delete(deletes)
        except IndexUnavailable as exc:
            log.warning("index outbox left pending: %s", exc)
            with self.db.session() as s:
                s.exec(
                    update(MemoryOutbox)
                    .where(col(MemoryOutbox.id).in_([p.id for p in pending]))
                    .values(attempts=MemoryOutbox.attempts + 1, last_error=str(exc)[:500])
                )
            return 0
        with self.db.session() as s:
            for entry in pending:
                done = s.get(MemoryOutbox, entry.id)
                if done is not None:
                    s.delete(done)
        return len(pending)

    def pending_outbox(self) -> int:
        """How many index entries wait in the outbox."""
        with self.db.session() as s:
            return int(s.exec(select(func.count()).select_from(MemoryOutbox)).one())


def _ranked(relevance: float, row: MemoryRow) -> float:
    # Confirmation and usefulness nudge, never override, relevance; disputes push down.
    return relevance * (1.0 + 0.1 * row.validity + 0.05 * row.usefulness - 0.1 * row.disputes)


def _validated_text(text: str) -> str:
    cleaned = clean_text(text)
    if not cleaned:
        raise InvalidInput("nothing to remember: the text is empty")
    if len(cleaned) > MAX_MEMORY_CHARS:
        raise InvalidInput(
            f"a memory holds at most {MAX_MEMORY_CHARS} characters; this one has {len(cleaned)}. "
            "Keep the essential fact."
        )
    return cleaned
