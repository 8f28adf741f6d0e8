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
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, and_, delete, func, or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from cairn.bot.events import clean_text
from cairn.db import Database
from cairn.db.models import MemoryOutbox, MemoryRow, Tenant, utcnow
from cairn.errors import InvalidInput, NotFound
from cairn.memory.embed import Embedder
from cairn.memory.index import IndexedMemory, IndexUnavailable, VectorIndex
from cairn.memory.ranking import (
    RankWeights,
    Standing,
    fuse,
    fuse_scores,
    modifier,
    neighbours_boost,
)
from cairn.memory.scope import Scope, Source, Visibility
from cairn.memory.terms import terms

if TYPE_CHECKING:
    from cairn.config import Settings

__all__ = [
    "MAX_MEMORY_CHARS",
    "MEMORY_KINDS",
    "Candidates",
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
    tier: str = "hot"
    updated_at: datetime | None = None
    last_recalled_at: datetime | None = None
    merges: int = 0

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
            tier=row.tier,
            updated_at=row.updated_at,
            last_recalled_at=row.last_recalled_at,
            merges=row.merges,
        )


@dataclass(frozen=True, slots=True)
class Remembered:
    """The outcome of a write: the memory, and whether it is new or an existing duplicate.

    ``merged`` is true when the text was a near-duplicate folded into ``memory``.
    """

    memory: Memory
    created: bool
    merged: bool = False


@dataclass(frozen=True, slots=True)
class Candidates:
    """What each retriever proposes for a query, best first, before fusion and weighting.

    ``degraded`` is true when the vector index did not answer and lexical candidates come from
    the database instead.
    """

    lexical: list[tuple[int, float]] = field(default_factory=list)
    dense: list[tuple[int, float]] = field(default_factory=list)
    degraded: bool = False


@dataclass(frozen=True, slots=True)
class Recalled:
    """A memory found by recall, with its relevance score (higher is better)."""

    memory: Memory
    score: float


def content_hash(text: str) -> str:
    """The dedupe key of a memory's text: case, spacing and final punctuation do not count."""
    folded = re.sub(r"\s+", " ", text.casefold()).strip().rstrip(".!?;: ")
    return hashlib.sha256(folded.encode()).hexdigest()


def visible_to(scope: Scope, *, by_id: bool = False) -> ColumnElement[bool]:
    """The SQL condition every read path applies: same tenant, and shared or the agent's own.

    ``by_id`` is for reads of a few rows by primary key: the same condition, written so that
    SQLite's planner looks the ids up instead of scanning the tenant's index (35 ms instead of
    under 1 ms at 100,000 memories).
    """
    tenant = col(MemoryRow.tenant_id) + "" if by_id else col(MemoryRow.tenant_id)
    return and_(
        tenant == scope.tenant,
        or_(
            col(MemoryRow.visibility).in_([Visibility.TEAM.value, Visibility.PUBLIC.value]),
            col(MemoryRow.agent) == scope.agent,
        ),
    )


class MemoryStore:
    """Scoped long-term memory over a database, an optional vector index and an embedder."""

    def __init__(
        self,
        db: Database,
        index: VectorIndex | None,
        *,
        embedder: Embedder | None = None,
        weights: RankWeights | None = None,
        default_k: int = 5,
    ) -> None:
        self.db = db
        self.index = index
        self.embedder = embedder
        self.weights = weights or RankWeights()
        self.default_k = default_k
        self._vectors: dict[int, list[float]] = {}  # embedded at write, handed to the outbox

    @classmethod
    def from_settings(cls, db: Database, settings: Settings, *, index: bool = True) -> MemoryStore:
        """The store the settings describe: embedder, Qdrant (server or local) and weights.

        Raises ConfigError when an explicitly named embedding model cannot be loaded.
        """
        from cairn.memory.embed import build_embedder
        from cairn.memory.index import index_for

        embedder = build_embedder(settings.embeddings)
        dim = embedder.dim if embedder is not None else None
        vectors = index_for(settings, dim) if index else None
        return cls(
            db,
            vectors,
            embedder=embedder,
            weights=RankWeights.from_settings(settings),
            default_k=settings.recall_k,
        )

    # --- writes -------------------------------------------------------------------------

    def remember(
        self,
        text: str,
        scope: Scope,
        *,
        kind: str = "fact",
        visibility: Visibility = Visibility.PRIVATE,
        source: Source | None = None,
        created_at: datetime | None = None,
        flush: bool = True,
        vector: Sequence[float] | None = None,
    ) -> Remembered:
        """Store ``text`` in ``scope``, or return the existing memory it duplicates.

        Exact duplicates (same text up to case, spacing and final punctuation) return the
        existing memory; near-duplicates of the same kind (cosine >= CAIRN_MEMORY_NEAR_DUPLICATE)
        merge into it when the new text adds no term. Episodic turns are never merged.
        ``created_at`` dates a memory that happened earlier (an imported conversation).
        ``flush=False`` leaves the index work in the outbox for a later :meth:`flush_outbox`
        (bulk loads); ``vector`` is the text's embedding when the caller has it already.

        Raises InvalidInput for empty or oversized text, control characters and unknown kinds.
        Re-remembering a retracted memory restores it, recording who restored it.
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
        with self.db.session() as s:
            exact = s.exec(
                select(MemoryRow.id).where(
                    MemoryRow.tenant_id == scope.tenant,
                    MemoryRow.scope_key == key,
                    MemoryRow.content_hash == digest,
                )
            ).first()
        if exact is not None:
            return Remembered(self._existing(scope, key, digest, source), created=False)
        if vector is not None:
            vector = [float(x) for x in vector]
        elif kind != "episode":  # episodes skip the near-duplicate check: embed in the outbox
            vector = self._embed_one(text)
        if kind != "episode" and vector is not None:
            near = self._near_duplicate(text, vector, scope, visibility, kind)
            if near is not None:
                return Remembered(self._merge(near, source), created=False, merged=True)
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
                if created_at is not None:
                    row.created_at = row.updated_at = created_at
                s.add(row)
                s.flush()
                assert row.id is not None
                s.add(MemoryOutbox(memory_id=row.id, op="upsert"))
                created = Memory.from_row(row)
        except IntegrityError:
            return Remembered(self._existing(scope, key, digest, source), created=False)
        if vector is not None:
            self._vectors[created.id] = vector
        if flush:
            self.flush_outbox()
        return Remembered(created, created=True)

    def _embed_one(self, text: str) -> list[float] | None:
        if self.embedder is None:
            return None
        try:
            return [float(x) for x in self.embedder.embed([text])[0]]
        except Exception as exc:  # a broken model must not stop a write; the outbox retries
            log.warning("embedding failed, the outbox will retry: %s", exc)
            return None

    def _near_duplicate(
        self, text: str, vector: list[float], scope: Scope, visibility: Visibility, kind: str
    ) -> int | None:
        """An existing memory this text restates: close in meaning and saying no new term.

        Cosine alone would merge "frozen until Monday" into "frozen until Tuesday"; requiring
        the existing memory to hold every term of the new text keeps different facts apart.
        """
        if self.index is None:
            return None
        try:
            hits = self.index.search_dense(vector, scope.tenant, scope.agent, 3)
        except IndexUnavailable:
            return None
        close = [mid for mid, score in hits if score >= self.weights.near_duplicate]
        if not close:
            return None
        owner = scope.agent if visibility is Visibility.PRIVATE else None
        mine = set(terms(text))
        with self.db.session() as s:
            rows = s.exec(
                select(MemoryRow).where(
                    col(MemoryRow.id).in_(close),
                    visible_to(scope),
                    MemoryRow.kind == kind,
                    MemoryRow.visibility == visibility.value,
                    MemoryRow.agent == owner if owner else col(MemoryRow.agent).is_(None),
                    col(MemoryRow.retracted).is_(False),
                )
            ).all()
            for row in rows:
                theirs = set(terms(row.text))
                if mine and mine <= theirs:  # the new text adds no term: a restatement
                    return row.id
            return None

    def _merge(self, memory_id: int, source: Source) -> Memory:
        with self.db.session() as s:
            row = s.get(MemoryRow, memory_id)
            assert row is not None
            row.merges += 1
            row.updated_at = utcnow()
            s.add(row)
            s.flush()
            log.info("merged a near-duplicate from %s into memory #%s", source.author, memory_id)
            return Memory.from_row(row)

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
                _tombstone(row, by, reason)
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
        self,
        scope: Scope,
        *,
        limit: int = 50,
        include_retracted: bool = False,
        kind: str | None = None,
        tier: str | None = None,
    ) -> list[Memory]:
        """The newest memories visible in ``scope``, optionally of one kind or tier."""
        with self.db.session() as s:
            query = select(MemoryRow).where(visible_to(scope))
            if not include_retracted:
                query = query.where(col(MemoryRow.retracted).is_(False))
            if kind is not None:
                query = query.where(MemoryRow.kind == kind)
            if tier is not None:
                query = query.where(MemoryRow.tier == tier)
            rows = s.exec(query.order_by(col(MemoryRow.id).desc()).limit(limit)).all()
            return [Memory.from_row(r) for r in rows]

    def candidates(
        self, query: str, scope: Scope, n: int, *, vector: Sequence[float] | None = None
    ) -> Candidates:
        """Up to ``n`` lexical and ``n`` dense candidates for ``query`` in ``scope``.

        Candidates are proposals only: :meth:`recall` re-reads them through :func:`visible_to`.
        A dead index degrades to lexical search in the database, logged as a warning.
        ``vector`` is the query's embedding when the caller has it already.
        """
        if self.index is not None:
            try:
                lexical = self.index.search(query, scope.tenant, scope.agent, n)
                dense: list[tuple[int, float]] = []
                if vector is None and self.embedder is not None:
                    vector = [float(x) for x in self.embedder.embed([query])[0]]
                if vector is not None:
                    dense = self.index.search_dense(list(vector), scope.tenant, scope.agent, n)
                return Candidates(lexical, dense)
            except IndexUnavailable as exc:
                log.warning("vector index unavailable, recalling lexically: %s", exc)
        return Candidates(self._lexical(query, scope, n), [], degraded=True)

    def recall(
        self,
        query: str,
        scope: Scope,
        k: int | None = None,
        *,
        now: datetime | None = None,
        touch: bool = True,
        vector: Sequence[float] | None = None,
    ) -> list[Recalled]:
        """The memories in ``scope`` most relevant to ``query``, best first, never retracted.

        Lexical and dense candidates are fused by rank, episodic turns borrow relevance from
        their neighbours in the conversation, and the result is weighted by recency, validity,
        usefulness, disputes, tier and scope (see :mod:`cairn.memory.ranking`). ``touch``
        counts the recall on the returned memories; ``now`` is the clock for recency;
        ``vector`` is the query's embedding when the caller has it already.
        """
        k = k or self.default_k
        pool = max(self.weights.pool, 4 * k)
        found = self.candidates(query, scope, pool, vector=vector)
        w = self.weights
        if w.fusion == "score":
            fused = fuse_scores([(w.lexical, found.lexical), (w.dense, found.dense)])
        else:
            fused = fuse(
                [
                    (w.lexical, [mid for mid, _ in found.lexical]),
                    (w.dense, [mid for mid, _ in found.dense]),
                ]
            )
        if not fused:
            return []
        # Only the best fused candidates go on to the database: re-reading rows dominates the
        # latency of recall, and weighting nudges rather than reorders wholesale.
        fused = dict(sorted(fused.items(), key=lambda kv: -kv[1])[: max(4 * k, 20)])
        now = now or utcnow()
        with self.db.session() as s:
            neighbours = self._neighbours(s, list(fused), scope) if w.context > 0 else {}
            scores = neighbours_boost(fused, neighbours, w.context)
            rows = s.exec(
                select(MemoryRow).where(
                    col(MemoryRow.id).in_(list(scores)),
                    visible_to(scope, by_id=True),
                    col(MemoryRow.retracted).is_(False),
                )
            ).all()
            weighted = {
                r.id or 0: scores[r.id or 0] * modifier(w, _standing(r, scope), now) for r in rows
            }
            ranked = sorted(rows, key=lambda r: (-weighted[r.id or 0], -(r.id or 0)))[:k]
            ids = [r.id for r in ranked]
            if ids and touch:
                s.exec(
                    update(MemoryRow)
                    .where(col(MemoryRow.id).in_(ids))
                    .values(recall_count=MemoryRow.recall_count + 1, last_recalled_at=now)
                )
            return [Recalled(Memory.from_row(r), weighted[r.id or 0]) for r in ranked]

    def _neighbours(self, s: Any, ids: Sequence[int], scope: Scope) -> dict[int, list[int]]:
        """For episodic candidates: the turns just before and after them in the same thread."""
        rows = s.exec(
            select(MemoryRow.id, MemoryRow.source_thread).where(
                col(MemoryRow.id).in_(ids),
                MemoryRow.kind == "episode",
                visible_to(scope, by_id=True),
            )
        ).all()
        if not rows:
            return {}
        threads = {t for _, t in rows if t}
        near = {i + d for i, _ in rows for d in (-2, -1, 1, 2)}
        around = s.exec(
            select(MemoryRow.id, MemoryRow.source_thread).where(
                col(MemoryRow.id).in_(near),
                col(MemoryRow.source_thread).in_(threads),
                MemoryRow.kind == "episode",
                visible_to(scope, by_id=True),
                col(MemoryRow.retracted).is_(False),
            )
        ).all()
        by_thread: dict[str, list[int]] = {}
        for mid, thread in [*rows, *around]:
            by_thread.setdefault(thread, []).append(mid)
        result: dict[int, list[int]] = {}
        for mid, thread in rows:
            if not thread:
                continue
            same = sorted(set(by_thread[thread]))
            at = same.index(mid)
            adjacent = same[max(0, at - 1) : at] + same[at + 1 : at + 2]
            for other in adjacent:
                result.setdefault(mid, []).append(other)
                result.setdefault(other, []).append(mid)
        return result

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

        Embeds what the write path did not, then upserts and deletes in the index. Leaves the
        entries in place (with the error recorded) when the index or the embedder fails, so
        that a later call, at start or on schedule, replays them.
        """
        if self.index is None:
            return 0
        applied = 0
        while True:
            done = self._flush_batch(limit)
            applied += max(done, 0)
            if done < limit:
                return applied

    def _flush_batch(self, limit: int) -> int:
        assert self.index is not None
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
        live = [
            m
            for mid, entry in latest.items()
            if (m := rows.get(mid)) is not None and entry.op == "upsert" and not m.retracted
        ]
        upserted = {m.id for m in live}
        deletes = [mid for mid in latest if mid not in upserted]
        try:
            vectors = self._vectors_for(live)
            upserts = [
                IndexedMemory(m.id or 0, m.text, m.tenant_id, m.agent, m.visibility, vector=v)
                for m, v in zip(live, vectors, strict=True)
            ]
            self.index.upsert(upserts)
            self.index.delete(deletes)
        except (IndexUnavailable, RuntimeError, ValueError) as exc:
            log.warning("index outbox left pending: %s", exc)
            with self.db.session() as s:
                s.exec(
                    update(MemoryOutbox)
                    .where(col(MemoryOutbox.id).in_([p.id for p in pending]))
                    .values(attempts=MemoryOutbox.attempts + 1, last_error=str(exc)[:500])
                )
            return -1
        with self.db.session() as s:
            s.exec(delete(MemoryOutbox).where(col(MemoryOutbox.id).in_([p.id for p in pending])))
        for m in live:
            self._vectors.pop(m.id or 0, None)
        return len(pending)

    def _vectors_for(self, rows: list[MemoryRow]) -> list[list[float] | None]:
        if self.embedder is None:
            return [None] * len(rows)
        missing = [r for r in rows if (r.id or 0) not in self._vectors]
        if missing:
            fresh = self.embedder.embed([r.text for r in missing])
            for r, v in zip(missing, fresh, strict=True):
                self._vectors[r.id or 0] = [float(x) for x in v]
        return [self._vectors[r.id or 0] for r in rows]

    def pending_outbox(self) -> int:
        """How many index entries wait in the outbox."""
        with self.db.session() as s:
            return int(s.exec(select(func.count()).select_from(MemoryOutbox)).one())

    def reconcile(self) -> tuple[int, int]:
        """Bring the index in step with the database; returns (replayed, re-enqueued).

        Replays the outbox, then compares counts: when the index holds fewer memories than the
        database has live ones (a new collection after a model change, a wiped folder), every
        live memory is enqueued again and flushed; after replays the index is optimised. Safe
        to run at any time, on a schedule.
        """
        if self.index is None:
            return 0, 0
        replayed = self.flush_outbox()
        try:
            if replayed:
                self.index.optimize()
            indexed = self.index.count()
        except IndexUnavailable as exc:
            log.warning("cannot reconcile the index: %s", exc)
            return replayed, 0
        with self.db.session() as s:
            live = int(
                s.exec(
                    select(func.count())
                    .select_from(MemoryRow)
                    .where(col(MemoryRow.retracted).is_(False))
                ).one()
            )
            if indexed >= live:
                return replayed, 0
            ids = s.exec(select(MemoryRow.id).where(col(MemoryRow.retracted).is_(False))).all()
            for mid in ids:
                s.add(MemoryOutbox(memory_id=mid or 0, op="upsert"))
        self.flush_outbox()
        self.optimize_index()
        return replayed, len(ids)

    def optimize_index(self) -> None:
        """Let the index build its search structures (after bulk writes; on a schedule)."""
        if self.index is None:
            return
        try:
            self.index.optimize()
        except IndexUnavailable as exc:
            log.warning("could not optimise the index: %s", exc)


def _tombstone(row: MemoryRow, by: str, reason: str) -> None:
    row.retracted = True
    row.retracted_at = utcnow()
    row.retracted_by = by
    row.retraction_reason = reason
    row.updated_at = utcnow()


def _standing(row: MemoryRow, scope: Scope) -> Standing:
    touched = max(_aware(row.created_at), _aware(row.last_recalled_at or row.created_at))
    same_place = bool(
        (scope.thread and row.thread_ref == scope.thread)
        or (scope.channel and row.channel == scope.channel)
    )
    return Standing(
        last_touched=touched,
        validity=row.validity,
        usefulness=row.usefulness,
        disputes=row.disputes,
        tier=row.tier,
        same_place=same_place,
    )


def _aware(value: datetime) -> datetime:
    # SQLite hands back naive datetimes; the schema stores UTC only.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _validated_text(text: str) -> str:
    control = _CONTROL.search(text)
    if control is not None:
        raise InvalidInput(
            f"a memory cannot contain control characters (found {control.group()!r} at "
            f"position {control.start()}); remove them and try again"
        )
    cleaned = clean_text(text)
    if not cleaned:
        raise InvalidInput("nothing to remember: the text is empty")
    if len(cleaned) > MAX_MEMORY_CHARS:
        raise InvalidInput(
            f"a memory holds at most {MAX_MEMORY_CHARS} characters; this one has {len(cleaned)}. "
            "Keep the essential fact."
        )
    return cleaned
