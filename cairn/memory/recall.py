"""Scoped recall: lexical and dense candidates, fused, re-read through the scope and weighted.

Candidates come from the vector index (or, when it is down, from a lexical scan of the
database); they are proposals only, and every row is re-read through
:func:`~cairn.memory.records.visible_to`. Fusion and weighting are :mod:`cairn.memory.ranking`'s.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, bindparam, func, or_, update
from sqlalchemy import select as sa_select
from sqlmodel import col

from cairn.core import stages
from cairn.core.logs import Throttle
from cairn.core.settings import MemorySettings
from cairn.db import Database, table
from cairn.db.models import MemoryAudit, MemoryRow, utcnow
from cairn.memory.claims import asks_about
from cairn.memory.embed import Embedder
from cairn.memory.index import IndexUnavailable, VectorIndex
from cairn.memory.periods import Period, mentioned_periods, without_dates
from cairn.memory.ranking import Standing, fuse, fuse_scores, modifier, neighbours_boost
from cairn.memory.records import CONFIRM, UNCONFIRM, Memory, visible_to, vouchers
from cairn.memory.scope import Scope
from cairn.memory.speakers import named_speaker, speaker_terms, without_speakers
from cairn.memory.supersession import as_of, stale, valid_at
from cairn.memory.terms import term_set, terms

__all__ = ["Candidates", "Recall", "Recalled", "count_recalls"]

log = logging.getLogger(__name__)

# How long a process trusts the authors it read for a tenant (see Recall.query_vector): a new
# speaker's name is taken out of dense queries within this many seconds.
AUTHORS_TTL = 60.0
FEEDBACK_TERMS = 12
"""Words of the best candidates a feedback search adds to the query (see Recall._feedback)."""


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
    """A memory found by recall, with its relevance score (higher is better).

    ``replaced_by`` is the memory that replaced a superseded one; ``replaced`` the one a
    current memory replaced (see :mod:`cairn.memory.supersession`), so that an answer can say
    what changed and when.
    """

    memory: Memory
    score: float
    replaced_by: Memory | None = None
    replaced: Memory | None = None
    # Who confirmed it (each person's latest word a confirmation), for a confirmed memory.
    vouched_by: tuple[str, ...] = ()


class Recall:
    """Recall over a database and an optional vector index, with ``weights`` for ranking and
    ``default_k`` memories when a caller names no number."""

    def __init__(
        self,
        db: Database,
        index: VectorIndex | None,
        embedder: Embedder | None,
        weights: MemorySettings,
        default_k: int,
    ) -> None:
        self.db = db
        self.index = index
        self.embedder = embedder
        self.weights = weights
        self.default_k = default_k
        self._degraded_warnings = Throttle(60.0)  # one line a minute while the index is down
        self._statements: dict[tuple[object, ...], Any] = {}  # see _statement
        self._authors: dict[str, tuple[float, dict[str, tuple[str, ...]]]] = {}  # _authors_of

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
                if vector is None and self.embedder is not None:
                    vector = self.embedder.embed([query])[0].tolist()
                # One call for both searches: one round trip where another process holds the
                # embedded index (ADR 0047).
                lexical, dense = self.index.candidates(
                    query,
                    None if vector is None else list(vector),
                    scope.tenant,
                    scope.agent,
                    n,
                    rooms=scope.rooms,
                    periods=periods,
                )
                return Candidates(lexical, dense)
            except IndexUnavailable as exc:
                held = self._degraded_warnings.allow()
                if held is not None:
                    log.warning(
                        "vector index unavailable, recalling lexically: %s%s",
                        exc,
                        f" ({held} more recalls since the last warning)" if held else "",
                    )
        # A stage of its own, so that `cairn bench pipeline` shows how many turns recalled
        # without the index (ADR 0047).
        with stages.span("lexical_only"):
            return Candidates(self._lexical(query, scope, n), [], degraded=True)

    def query_vector(self, query: str, scope: Scope) -> list[float] | None:
        """The embedding the dense search looks for ``query`` by: of the query without the
        names of the tenant's authors it names (:func:`without_speakers`, ADR 0048), since a
        name pulls the search toward everything that person said rather than what is asked.
        None without an embedder."""
        if self.embedder is None:
            return None
        by_term = self._authors_of(scope.tenant)
        authors = {a for t in set(terms(query)) for a in by_term.get(t, ())}
        asked = without_speakers(query, authors) if authors else query
        vector: list[float] = self.embedder.embed([asked])[0].tolist()
        return vector

    def _authors_of(self, tenant: str) -> dict[str, tuple[str, ...]]:
        """The distinct authors of ``tenant``'s memories by each term of their names, read at
        most every ``AUTHORS_TTL`` seconds per process (by index: ``ix_memory_author``), so
        that a query looks up its own few terms rather than every author."""
        now = time.monotonic()
        cached = self._authors.get(tenant)
        if cached is not None and cached[0] > now:
            return cached[1]
        by_term: dict[str, list[str]] = {}
        with self.db.engine.connect() as conn:
            for (author,) in conn.execute(
                sa_select(col(MemoryRow.author))
                .where(col(MemoryRow.tenant_id) == tenant, col(MemoryRow.author) != "")
                .distinct()
            ):
                for term in speaker_terms(author):
                    by_term.setdefault(term, []).append(author)
        found = {term: tuple(authors) for term, authors in by_term.items()}
        if len(self._authors) >= 1024:
            self._authors.clear()
        self._authors[tenant] = (now + AUTHORS_TTL, found)
        return found

    def recall(
        self,
        query: str,
        scope: Scope,
        k: int | None = None,
        *,
        now: datetime | None = None,
        touch: bool = True,
        vector: Sequence[float] | None = None,
        counted: int | None = None,
    ) -> list[Recalled]:
        """The memories in ``scope`` most relevant to ``query``, best first, never retracted.

        Lexical and dense candidates are fused (see :mod:`cairn.memory.ranking`); memories
        written within a date the query names ("on 9 November, 2022") are preferred, and so are
        facts that held then; episodic turns borrow relevance from the turns around them in the
        conversation; and the result is weighted by recency, validity, usefulness, disputes,
        tier, scope, whether the query names the memory's author, and supersession (a fact a
        newer value replaced ranks lower, unless the query asks about a time it held).
        ``touch`` counts the recall on the returned memories (on the best ``counted`` of them
        when given: a caller that recalls a pool to fill spare room, as the context engine's
        pipeline does, counts what it would have recalled without it); ``now`` is the clock
        for recency;
        ``vector`` is the query's embedding when the caller has it already (as
        :meth:`query_vector` gives it).
        """
        k = k or self.default_k
        w = self.weights
        periods = mentioned_periods(query) if w.weight_period > 0 else ()
        instants = as_of(periods)
        pool = max(w.candidates, 4 * k)
        # A date the query names becomes a period; the rest of the query is what to look for.
        search = (without_dates(query) or query) if periods else query
        if vector is None and self.index is not None:
            vector = self.query_vector(search, scope)
        found = self.candidates(search, scope, pool, vector=vector, periods=periods)
        lists = [(w.weight_lexical, found.lexical), (w.weight_dense, found.dense)]
        fused = self._fused(lists)
        if not fused:
            return []
        if w.weight_feedback > 0 and not found.degraded:
            more = self._feedback(scope, search, fused, pool)
            if more:
                fused = self._fused([*lists, (w.weight_feedback, more)])
        # Only the best fused candidates go on to the database: re-reading rows dominates the
        # latency of recall, and weighting nudges rather than reorders wholesale. A dated query
        # reads them all, since the date may lift one from far down the list.
        best = max(4 * k, 20)
        now = now or utcnow()
        with self.db.engine.connect() as conn:
            if w.weight_subject > 0:
                fused = self._about(conn, scope, fused, search, 1.0 + w.weight_subject)
            ids = sorted(fused, key=lambda mid: -fused[mid])
            rows = {
                r.id: r
                for r in conn.execute(
                    self._statement(scope, "rows"), {"ids": ids if periods else ids[:best]}
                )
            }
            if periods:
                fused = {
                    mid: score * (1.0 + w.weight_period)
                    if _within(rows[mid], periods, instants)
                    else score
                    for mid, score in fused.items()
                    if mid in rows
                }
            fused = dict(sorted(fused.items(), key=lambda kv: -kv[1])[:best])
            rows = {mid: rows[mid] for mid in fused if mid in rows}
            scores = fused
            if w.weight_context > 0 and w.context_turns > 0:
                neighbours = self._neighbours(conn, scope, rows, w.context_turns)
                scores = neighbours_boost(fused, neighbours, w.weight_context)
            # The author's name is weighed after the neighbours' share: an answer often follows
            # the other speaker's question, and is then found through that question's words.
            asked = frozenset(terms(search)) if w.weight_speaker > 0 else frozenset()
            weighted = {
                mid: scores[mid] * modifier(w, _standing(row, scope, instants, asked), now)
                for mid, row in rows.items()
                if mid in scores
            }
            ranked = sorted(weighted, key=lambda mid: (-weighted[mid], -mid))[:k]
            if ranked and touch:
                count_recalls(conn, ranked[:counted], now)
                conn.commit()
            after, before = self._changes(conn, scope, [rows[mid] for mid in ranked])
            vouched = _vouched(conn, [mid for mid in ranked if rows[mid].confirmed])
            return [
                Recalled(
                    Memory.from_row(rows[mid]),
                    weighted[mid],
                    replaced_by=after.get(mid),
                    replaced=before.get(mid),
                    vouched_by=vouched.get(mid, ()),
                )
                for mid in ranked
            ]

    def _fused(self, lists: list[tuple[float, list[tuple[int, float]]]]) -> dict[int, float]:
        if self.weights.fusion == "score":
            return fuse_scores(lists)
        return fuse([(weight, [mid for mid, _ in found]) for weight, found in lists])

    def _feedback(
        self, scope: Scope, search: str, fused: dict[int, float], n: int
    ) -> list[tuple[int, float]]:
        """Pseudo-relevance feedback: a lexical search for ``search`` together with the words
        of its best ``feedback_docs`` candidates (their speakers' names left out), which finds
        what shares words with the answer's neighbours of topic rather than with the question
        (a multi-hop question's second fact). Empty when it finds nothing new."""
        best = sorted(fused, key=lambda mid: -fused[mid])[: self.weights.feedback_docs]
        with self.db.engine.connect() as conn:
            rows = list(conn.execute(self._statement(scope, "rows"), {"ids": best}))
        asked = set(terms(search))
        words: Counter[str] = Counter()
        for row in rows:
            named = speaker_terms(row.author) if row.author else frozenset()
            words.update(t for t in term_set(row.text) if t not in asked and t not in named)
        if not words or self.index is None:
            return []
        expanded = " ".join([search, search, *(t for t, _ in words.most_common(FEEDBACK_TERMS))])
        try:
            return self.index.search(expanded, scope.tenant, scope.agent, n, rooms=scope.rooms)
        except IndexUnavailable:
            return []

    def _about(
        self, conn: Connection, scope: Scope, fused: dict[int, float], query: str, boost: float
    ) -> dict[int, float]:
        """``fused`` with the facts whose subject ``query`` names (see
        :func:`~cairn.memory.claims.asks_about`) multiplied by ``boost``.

        All candidates are looked at, before the cut to the best few, so that the fact that
        answers the question is not lost below remarks that share more words with it; only ids
        and subjects are read (no text), and memories without a subject are not returned.
        """
        asked = frozenset(terms(query))
        if not asked:
            return fused
        named = {
            mid
            for mid, subject in conn.execute(
                self._statement(scope, "subjects"), {"ids": list(fused)}
            )
            if asks_about(subject, asked)
        }
        if not named:
            return fused
        return {mid: score * boost if mid in named else score for mid, score in fused.items()}

    def _changes(
        self, conn: Connection, scope: Scope, found: Sequence[Any]
    ) -> tuple[dict[int, Memory], dict[int, Memory]]:
        """For recalled facts in a change: the memory that replaced each superseded one, and
        the newest one each current one replaced (by id of the recalled memory). Memories
        without a subject (every episode) cost nothing here."""
        facts = [r for r in found if r.subject]
        if not facts:
            return {}, {}
        successors = {r.superseded_by for r in facts if r.superseded_by is not None}
        current = [r.id for r in facts if r.valid_until is None]
        table = MemoryRow.__table__  # type: ignore[attr-defined]
        conditions = [visible_to(scope), col(MemoryRow.retracted).is_(False)]
        near: list[ColumnElement[bool]] = []
        if successors:
            near.append(col(MemoryRow.id).in_(sorted(successors)))
        if current:
            near.append(
                and_(
                    col(MemoryRow.scope_key).in_(sorted({r.scope_key for r in facts})),
                    col(MemoryRow.subject).in_(sorted({r.subject for r in facts})),
                    col(MemoryRow.superseded_by).in_(current),
                )
            )
        if not near:
            return {}, {}
        rows = conn.execute(sa_select(table).where(*conditions, or_(*near))).all()
        by_id = {r.id: r for r in rows}
        after = {
            r.id: Memory.from_row(by_id[r.superseded_by]) for r in facts if r.superseded_by in by_id
        }
        before: dict[int, Memory] = {}
        for r in sorted(rows, key=lambda r: (r.created_at, r.id)):
            if r.superseded_by in current:  # the newest one it replaced wins
                before[r.superseded_by] = Memory.from_row(r)
        return after, before

    def _statement(self, scope: Scope, which: str) -> Any:
        """The (cached) select of whole memory rows recall runs for ``scope``.

        ``rows`` takes ``ids``; ``near`` takes ``ids`` and ``threads`` and keeps episodic turns
        of those threads; ``subjects`` takes ``ids`` and selects only ids and subjects of
        facts. Building a statement costs more than running it, so each is built
        once per tenant and agent, with the ids as parameters.
        """
        key = (*scope.reader, which)  # all that visible_to reads of the scope
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
            if which == "subjects":
                conditions.append(col(MemoryRow.subject) != "")
                statement = sa_select(col(MemoryRow.id), col(MemoryRow.subject)).where(*conditions)
            else:
                statement = sa_select(MemoryRow.__table__).where(*conditions)  # type: ignore[attr-defined]
            self._remember_statement(key, statement)
        return statement

    def _lexical_statement(self, scope: Scope, n: int) -> Any:
        """The (cached) select of ids and texts that contain one of ``n`` terms (parameters
        t0 ... t{n-1}), for lexical recall without the index: built once per tenant, agent and
        number of terms."""
        key = (*scope.reader, f"lexical:{n}")
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

    def _remember_statement(self, key: tuple[object, ...], statement: Any) -> None:
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
            overlap = len(wanted & term_set(text))
            if overlap:
                scored.append((memory_id, overlap / len(wanted)))
        scored.sort(key=lambda pair: -pair[1])
        return scored[:k]


def count_recalls(conn: Connection, ids: Sequence[int], now: datetime) -> None:
    """Count a recall on the memories ``ids`` at ``now``, inside the caller's transaction.

    :meth:`Recall.recall` does it on its own (``touch``); a turn recalls without it and counts
    what it recalled in the transaction that writes its reply, so that a message's path
    takes the write lock once for both (and a turn redone after a crash counts once).
    """
    times: dict[int, list[int]] = {}  # a memory two recalls of the turn found counts twice
    for mid, n in Counter(ids).items():
        times.setdefault(n, []).append(mid)
    for n, found in times.items():
        conn.execute(_COUNT_RECALLS, {"ids": found, "n": n, "now": now})


_COUNT_RECALLS = (
    update(MemoryRow)
    .where(col(MemoryRow.id).in_(bindparam("ids", expanding=True)))
    .values(recall_count=MemoryRow.recall_count + bindparam("n"), last_recalled_at=bindparam("now"))
)


def _within(row: Any, periods: Sequence[Period], instants: Sequence[datetime]) -> bool:
    """Whether ``row`` belongs to the time a query names: written within it, or, for a fact
    (a memory with a subject), holding then, however long before it was written."""
    if row.subject and instants:
        return any(valid_at(row, when) for when in instants)
    return any(row.created_at in period for period in periods)


def _standing(
    row: MemoryRow | Any,
    scope: Scope,
    instants: Sequence[datetime] = (),
    asked: frozenset[str] = frozenset(),
) -> Standing:
    created, recalled = row.created_at, row.last_recalled_at
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
        flagged=row.flagged and not row.confirmed,
        stale=stale(row, instants),
        named=bool(asked and row.author) and named_speaker(row.author, asked),
    )


def _vouched(conn: Connection, ids: list[int]) -> dict[int, tuple[str, ...]]:
    """Who confirmed each of the confirmed memories ``ids`` (one query; none when no recalled
    memory is confirmed)."""
    if not ids:
        return {}
    audit = table(MemoryAudit)
    rows = conn.execute(
        sa_select(audit.c.memory_id, audit.c.action, audit.c.actor)
        .where(audit.c.memory_id.in_(ids), audit.c.action.in_([CONFIRM, UNCONFIRM]))
        .order_by(audit.c.id)
    ).all()
    acts: dict[int, list[tuple[str, str]]] = {}
    for memory_id, action, actor in rows:
        acts.setdefault(memory_id, []).append((action, actor))
    return {mid: tuple(vouchers(done)) for mid, done in acts.items()}
