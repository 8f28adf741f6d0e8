"""The index outbox: how the vector index follows the database.

Every write puts a ``memory_outbox`` entry in the same transaction as the memory, so a crash
between the database and the index leaves work to replay rather than a gap (see docs/adr/0003).
A flush embeds what the write path did not, applies the entries to the index and removes them;
when the index or the embedder fails they stay, with the error, for a later flush at start or on
schedule. The reconciler re-enqueues every live memory when the index holds fewer than the
database (a new collection after a model change, a wiped folder).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy import delete, func, update
from sqlmodel import col, select

from cairn.db import Database
from cairn.db.models import MemoryOutbox, MemoryRow
from cairn.memory.embed import Embedder
from cairn.memory.index import IndexedMemory, IndexUnavailable, VectorIndex
from cairn.memory.index.port import FIRST_INDEXABLE_ID

__all__ = ["SETTLE_EVERY", "IndexOutbox"]

log = logging.getLogger(__name__)

SETTLE_EVERY = 20_000
"""Entries a bulk flush applies between two optimisations of the index."""


class IndexOutbox:
    """Replays the ``memory_outbox`` table into ``index``, embedding texts with ``embedder``.

    Vectors embedded at write time wait in a cache (:meth:`keep`) until a flush indexes them, so
    a text is embedded once.
    """

    def __init__(self, db: Database, index: VectorIndex | None, embedder: Embedder | None) -> None:
        self.db = db
        self.index = index
        self.embedder = embedder
        self._vectors: dict[int, list[float]] = {}  # embedded at write, handed to a flush

    def keep(self, memory_id: int, vector: list[float]) -> None:
        """Hold the embedding of a memory just written for the flush that indexes it."""
        self._vectors[memory_id] = vector

    def flush(
        self,
        limit: int = 500,
        progress: Callable[[int, int], None] | None = None,
        *,
        bulk: bool = False,
    ) -> int:
        """Apply pending index work; returns how many entries were applied.

        Embeds what the write path did not, then upserts and deletes in the index. Leaves the
        entries in place (with the error recorded) when the index or the embedder fails, so
        that a later call, at start or on schedule, replays them. ``progress`` hears
        (entries applied, entries that were pending) after each batch.

        ``bulk`` (an import, a reindex) optimises the index every :data:`SETTLE_EVERY` entries
        and at the end: an embedded shard holds what was written since its last optimisation
        in memory, so a bulk write that never settles leaves every process that opens the
        shard holding all of it, searching it unindexed, and paying for the optimisation
        whenever one comes (ADR 0046, "Bulk writes").
        """
        if self.index is None:
            return 0
        total = self.pending() if progress is not None else 0
        applied = settled = 0
        while True:
            done = self._flush_batch(limit)
            applied += max(done, 0)
            if progress is not None:
                total = max(total, applied)
                progress(applied, total)
            if bulk and applied > settled and (done < limit or applied - settled >= SETTLE_EVERY):
                settled = applied
                self.optimize()
            if done < limit:
                return applied

    def after_write(self) -> None:
        """Bring the index up to date after a committed write, best effort.

        The write is done and its outbox entry is safe in the database: a failure here must not
        make the caller think the write failed (a retried turn would then find its own memory
        and say it knew it already). A later flush, at start or on schedule, replays it.
        """
        try:
            self.flush()
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
                    private_to=m.private_to,
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

    def pending(self) -> int:
        """How many index entries wait in the outbox."""
        with self.db.session() as s:
            return int(s.exec(select(func.count()).select_from(MemoryOutbox)).one())

    def reconcile(self) -> tuple[int, int]:
        """Bring the index in step with the database; returns (replayed, re-enqueued).

        Replays the outbox, then compares counts: when the index holds fewer memories than the
        database has live ones (a new collection after a model change, a wiped folder), every
        live memory is enqueued again and flushed; after replays the index is optimised. Safe
        to run at any time, on a schedule, beside other writers: a memory written since the
        replay waits in the outbox (its row and its entry are one transaction), so it counts as
        on its way, not as missing.
        """
        if self.index is None:
            return 0, 0
        replayed = self.flush()
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
            waiting = int(s.exec(select(func.count()).select_from(MemoryOutbox)).one())
            if indexed + waiting >= live:
                return replayed, 0
            ids = s.exec(select(MemoryRow.id).where(*indexable)).all()
            for mid in ids:
                s.add(MemoryOutbox(memory_id=mid or 0, op="upsert"))
        self.flush()
        self.optimize()
        return replayed, len(ids)

    def optimize(self) -> None:
        """Let the index build its search structures (after bulk writes; on a schedule)."""
        if self.index is None:
            return
        try:
            self.index.optimize()
        except IndexUnavailable as exc:
            log.warning("could not optimise the index: %s", exc)
