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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Connection, Row, and_, bindparam, delete, func, or_, update
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from cairn.core.errors import InvalidInput, NotFound
from cairn.core.logs import Throttle
from cairn.core.text import clean_text
from cairn.db import Database
from cairn.db.models import MemoryOutbox, MemoryRow, Tenant, utcnow
from cairn.memory.embed import Embedder
from cairn.memory.index import IndexedMemory, IndexUnavailable, VectorIndex
from cairn.memory.periods import Period, mentioned_periods, without_dates
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
    from cairn.core.settings import Settings

__all__ = [
    "FIRST_INDEXABLE_ID",
    "MAX_MEMORY_CHARS",
    "MEMORY_KINDS",
    "Candidates",
    "Memory",
    "MemoryStore",
    "Recalled",
    "Remembered",
    "checked_memory",
    "content_hash",
    "visible_to",
]

log = logging.getLogger(__name__)

MAX_MEMORY_CHARS = 2000
MEMORY_KINDS = ("fact", "preference", "decision", "pattern", "mistake", "constraint", "episode")
# The index keys points by memory id and Qdrant takes unsigned ids only; a row below this (an
# import let one in once) stays out of the index instead of failing every flush and every start.
FIRST_INDEXABLE_ID = 1


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
    untrusted: bool = False

    @classmethod
    def from_row(cls, row: MemoryRow | Row[Any]) -> Memory:
        """Copy the fields of ``row`` (a model, or a row selected from the memory table)."""
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
            untrusted=row.untrusted,
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
        self._degraded_warnings = Throttle(60.0)  # one line a minute while the index is down
        self.embedder = embedder
        self.weights = weights or RankWeights()
        self.default_k = default_k
        self._vectors: dict[int, list[float]] = {}  # embedded at write, handed to the outbox
        self._statements: dict[tuple[str, str, str], Any] = {}  # see _statement
        self._tenants: set[str] = set()  # known to exist in the database

    @classmethod
    def from_settings(cls, db: Database, settings: Settings, *, index: bool = True) -> MemoryStore:
        """The store the settings describe: embedder, Qdrant (server or local) and weights.

        Raises ConfigError when an explicitly named embedding model cannot be loaded.
        """
        from cairn.memory.embed import build_embedder
        from cairn.memory.index import index_for

        embedder = build_embedder(settings.embeddings, settings.embedding_engine)
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
        text = checked_memory(text, kind)
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
                    untrusted=source.untrusted,
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
            self._flush_after_write()
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
        self._flush_after_write()
        return memory

    def _ensure_tenant(self, tenant: str, platform: str) -> None:
        # Tenants are never deleted, so one found or created stays known (a lookup per write
        # cost a fifth of the write path).
        if tenant in self._tenants:
            return
        with self.db.session() as s:
            if s.get(Tenant, tenant) is not None:
                self._tenants.add(tenant)
                return
        try:
            with self.db.session() as s:
                s.add(Tenant(id=tenant, platform=platform or tenant.split(":")[0]))
        except IntegrityError:
            pass  # another writer created it first
        self._tenants.add(tenant)

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
        self._flush_after_write()
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
        self._flush_after_write()

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
        self,
        query: str,
        scope: Scope,
        n: int,
        *,
        vector: Sequence[float] | None = None,
        periods: Sequence[Period] = (),
    ) -> Candidates:
        """Up to ``n`` lexical and ``n`` dense candidates for ``query`` in ``scope``.

        Candidates are proposals only: :meth:`recall` re-reads them through :func:`visible_to`.
        A dead index degrades to lexical search in the database, logged as a warning.
        ``vector`` is the query's embedding when the caller has it already. ``periods`` adds
        up to ``n`` more of each from memories written within those periods.
        """
        if self.index is not None:
            try:
                lexical = self.index.search(query, scope.tenant, scope.agent, n)
                if periods:
                    within = self.index.search(query, scope.tenant, scope.agent, n, periods=periods)
                    lexical = _merged(lexical, within)
                dense: list[tuple[int, float]] = []
                if vector is None and self.embedder is not None:
                    vector = self.embedder.embed([query])[0].tolist()
                if vector is not None:
                    dense = self.index.search_dense(list(vector), scope.tenant, scope.agent, n)
                    if periods:
                        within = self.index.search_dense(
                            list(vector), scope.tenant, scope.agent, n, periods=periods
                        )
                        dense = _merged(dense, within)
                return Candidates(lexical, dense)
            except IndexUnavailable as exc:
                held = self._degraded_warnings.allow()
                if held is not None:
                    log.warning(
                        "vector index unavailable, recalling lexically: %s%s",
                        exc,
                        f" ({held} more recalls since the last warning)" if held else "",
                    )
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

        Lexical and dense candidates are fused (see :mod:`cairn.memory.ranking`); memories
        written within a date the query names ("on 9 November, 2022") are preferred; episodic
        turns borrow relevance from the turns around them in the conversation; and the result
        is weighted by recency, validity, usefulness, disputes, tier and scope. ``touch``
        counts the recall on the returned memories; ``now`` is the clock for recency;
        ``vector`` is the query's embedding when the caller has it already.
        """
        k = k or self.default_k
        w = self.weights
        periods = mentioned_periods(query) if w.period > 0 else ()
        pool = max(w.pool, 4 * k)
        # A date the query names becomes a period; the rest of the query is what to look for.
        search = (without_dates(query) or query) if periods else query
        found = self.candidates(search, scope, pool, vector=vector, periods=periods)
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
        # latency of recall, and weighting nudges rather than reorders wholesale. A dated query
        # reads them all, since the date may lift one from far down the list.
        best = max(4 * k, 20)
        ids = sorted(fused, key=lambda mid: -fused[mid])
        now = now or utcnow()
        with self.db.engine.connect() as conn:
            rows = {
                r.id: r
                for r in conn.execute(
                    self._statement(scope, "rows"), {"ids": ids if periods else ids[:best]}
                )
            }
            if periods:
                fused = {
                    mid: score * (1.0 + w.period) if _within(rows[mid], periods) else score
                    for mid, score in fused.items()
                    if mid in rows
                }
            fused = dict(sorted(fused.items(), key=lambda kv: -kv[1])[:best])
            rows = {mid: rows[mid] for mid in fused if mid in rows}
            scores = fused
            if w.context > 0 and w.context_turns > 0:
                neighbours = self._neighbours(conn, scope, rows, w.context_turns)
                scores = neighbours_boost(fused, neighbours, w.context)
            weighted = {
                mid: scores[mid] * modifier(w, _standing(row, scope), now)
                for mid, row in rows.items()
                if mid in scores
            }
            ranked = sorted(weighted, key=lambda mid: (-weighted[mid], -mid))[:k]
            if ranked and touch:
                conn.execute(
                    update(MemoryRow)
                    .where(col(MemoryRow.id).in_(ranked))
                    .values(recall_count=MemoryRow.recall_count + 1, last_recalled_at=now)
                )
                conn.commit()
            return [Recalled(Memory.from_row(rows[mid]), weighted[mid]) for mid in ranked]

    def _statement(self, scope: Scope, which: str) -> Any:
        """The (cached) select of whole memory rows recall runs for ``scope``.

        ``rows`` takes ``ids``; ``near`` takes ``ids`` and ``threads`` and keeps episodic turns
        of those threads. Building a statement costs more than running it, so each is built
        once per tenant and agent, with the ids as parameters.
        """
        key = (scope.tenant, scope.agent, which)  # all that visible_to reads of the scope
        statement = self._statements.get(key)
        if statement is None:
            conditions = [
                col(MemoryRow.id).in_(bindparam("ids", expanding=True)),
                visible_to(scope, by_id=True),
                col(MemoryRow.retracted).is_(False),
            ]
            if which == "near":
                conditions += [
                    col(MemoryRow.source_thread).in_(bindparam("threads", expanding=True)),
                    col(MemoryRow.kind) == "episode",
                ]
            statement = sa_select(MemoryRow.__table__).where(*conditions)  # type: ignore[attr-defined]
            self._remember_statement(key, statement)
        return statement

    def _lexical_statement(self, scope: Scope, n: int) -> Any:
        """The (cached) select of ids and texts that contain one of ``n`` terms (parameters
        t0 ... t{n-1}), for lexical recall without the index: built once per tenant, agent and
        number of terms."""
        key = (scope.tenant, scope.agent, f"lexical:{n}")
        statement = self._statements.get(key)
        if statement is None:
            text = func.lower(col(MemoryRow.text))
            statement = (
                sa_select(col(MemoryRow.id), col(MemoryRow.text))
                .where(
                    visible_to(scope),
                    col(MemoryRow.retracted).is_(False),
                    or_(*(text.contains(bindparam(f"t{i}")) for i in range(n))),
                )
                .order_by(col(MemoryRow.id).desc())
                .limit(500)
            )
            self._remember_statement(key, statement)
        return statement

    def _remember_statement(self, key: tuple[str, str, str], statement: Any) -> None:
        if len(self._statements) >= 512:
            self._statements.clear()
        self._statements[key] = statement

    def _neighbours(
        self, conn: Connection, scope: Scope, rows: dict[int, Any], turns: int
    ) -> dict[int, list[int]]:
        """For episodic candidates: up to ``turns`` turns before and after each in its thread.

        Adds the rows of those turns to ``rows``. Turns of one thread are written in order, so
        they sit close together by id; ids within twice ``turns`` are looked at, which allows
        for turns of other threads written in between.
        """
        episodic = [r for r in rows.values() if r.kind == "episode" and r.source_thread]
        if not episodic:
            return {}
        span = 2 * turns
        near = {r.id + d for r in episodic for d in range(-span, span + 1)} - set(rows)
        threads = sorted({r.source_thread for r in episodic})
        if near:
            for r in conn.execute(
                self._statement(scope, "near"), {"ids": sorted(near), "threads": threads}
            ):
                rows.setdefault(r.id, r)
        by_thread: dict[str, list[int]] = {}
        for r in rows.values():
            if r.kind == "episode" and r.source_thread:
                by_thread.setdefault(r.source_thread, []).append(r.id)
        for same in by_thread.values():
            same.sort()
        result: dict[int, list[int]] = {}
        for r in episodic:
            same = by_thread[r.source_thread]
            at = same.index(r.id)
            for other in same[max(0, at - turns) : at] + same[at + 1 : at + 1 + turns]:
                result.setdefault(r.id, []).append(other)
                result.setdefault(other, []).append(r.id)
        return result

    def _lexical(self, query: str, scope: Scope, k: int) -> list[tuple[int, float]]:
        wanted = set(terms(query))
        if not wanted:
            return []
        looked_for = sorted(wanted)[:16]
        params = {f"t{i}": t for i, t in enumerate(looked_for)}
        with self.db.engine.connect() as conn:
            rows = conn.execute(self._lexical_statement(scope, len(looked_for)), params).all()
        scored = []
        for memory_id, text in rows:
            overlap = len(wanted & set(terms(text)))
            if overlap:
                scored.append((memory_id, overlap / len(wanted)))
        scored.sort(key=lambda pair: -pair[1])
        return scored[:k]

    # --- the index outbox ---------------------------------------------------------------

    def flush_outbox(
        self, limit: int = 500, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Apply pending index work; returns how many entries were applied.

        Embeds what the write path did not, then upserts and deletes in the index. Leaves the
        entries in place (with the error recorded) when the index or the embedder fails, so
        that a later call, at start or on schedule, replays them. ``progress`` hears
        (entries applied, entries that were pending) after each batch.
        """
        if self.index is None:
            return 0
        total = self.pending_outbox() if progress is not None else 0
        applied = 0
        while True:
            done = self._flush_batch(limit)
            applied += max(done, 0)
            if progress is not None:
                total = max(total, applied)
                progress(applied, total)
            if done < limit:
                return applied

    def _flush_after_write(self) -> None:
        """Bring the index up to date after a committed write, best effort.

        The write is done and its outbox entry is safe in the database: a failure here must not
        make the caller think the write failed (a retried turn would then find its own memory
        and say it knew it already). A later flush, at start or on schedule, replays it.
        """
        try:
            self.flush_outbox()
        except Exception:
            log.exception("index update after a write failed; the outbox replays it later")

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
        unindexable = sorted(mid for mid in latest if mid < FIRST_INDEXABLE_ID)
        if unindexable:
            log.error(
                "memories %s have ids the vector index cannot hold; they stay out of it "
                "(see `cairn memory doctor`)",
                ", ".join(f"#{mid}" for mid in unindexable),
            )
            for mid in unindexable:
                del latest[mid]
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
                IndexedMemory(
                    m.id or 0,
                    m.text,
                    m.tenant_id,
                    m.agent,
                    m.visibility,
                    vector=v,
                    created_at=m.created_at,
                )
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
        # Read the shared cache once: a flush on another thread may pop an entry (it indexed
        # the same memory) between a check here and a later read.
        found = {r.id or 0: v for r in rows if (v := self._vectors.get(r.id or 0)) is not None}
        missing = [r for r in rows if (r.id or 0) not in found]
        if missing:
            fresh = self.embedder.embed([r.text for r in missing])
            for r, v in zip(missing, fresh, strict=True):
                found[r.id or 0] = self._vectors[r.id or 0] = [float(x) for x in v]
        return [found[r.id or 0] for r in rows]

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
        indexable = (
            col(MemoryRow.retracted).is_(False),
            col(MemoryRow.id) >= FIRST_INDEXABLE_ID,
        )
        with self.db.session() as s:
            live = int(s.exec(select(func.count()).select_from(MemoryRow).where(*indexable)).one())
            if indexed >= live:
                return replayed, 0
            ids = s.exec(select(MemoryRow.id).where(*indexable)).all()
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


def _merged(*lists: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Candidate lists joined, each id at its best score, best first."""
    best: dict[int, float] = {}
    for pairs in lists:
        for mid, score in pairs:
            best[mid] = max(score, best.get(mid, score))
    return sorted(best.items(), key=lambda pair: -pair[1])


def _within(row: Any, periods: Sequence[Period]) -> bool:
    return any(row.created_at in period for period in periods)


def _standing(row: MemoryRow | Any, scope: Scope) -> Standing:
    created, recalled = row.created_at, row.last_recalled_at
    # Both come from one database, so both are naive (SQLite) or both aware: compare first.
    touched = recalled if recalled is not None and recalled > created else created
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
        untrusted=row.untrusted and not row.confirmed,
    )


def _aware(value: datetime) -> datetime:
    # SQLite hands back naive datetimes; the schema stores UTC only.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def checked_memory(text: str, kind: str) -> str:
    """``text`` as a memory of ``kind`` is stored (cleaned), after every check a write applies.

    Raises InvalidInput for empty or oversized text, control characters and unknown kinds.
    """
    text = _validated_text(text)
    if kind not in MEMORY_KINDS:
        raise InvalidInput(f"unknown memory kind {kind!r}; use one of {', '.join(MEMORY_KINDS)}")
    return text


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
