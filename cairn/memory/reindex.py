"""Rebuilding the vector index from the database, the memories' source of truth."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import col, select

from cairn.core.errors import ConfigError
from cairn.core.progress import ProgressCallback
from cairn.db.models import MemoryOutbox, MemoryRow
from cairn.memory.store import MemoryStore

__all__ = ["ReindexReport", "reindex"]


@dataclass(frozen=True, slots=True)
class ReindexReport:
    """How many live memories were queued for the index, and how many entries it applied."""

    queued: int
    applied: int
    pending: int


def reindex(store: MemoryStore, *, progress: ProgressCallback | None = None) -> ReindexReport:
    """Queue every live memory for the vector index again, then apply the queue batch by batch.

    Goes through the index outbox like every write, so a reindex cut short by a crash is
    finished by the next reconcile. ``progress`` hears (entries applied, entries queued).
    Raises ConfigError when the store has no vector index.
    """
    if store.index is None:
        raise ConfigError(
            "there is no vector index to rebuild: memory search is lexical only "
            "(check CAIRN_EMBEDDINGS and CAIRN_QDRANT_URL with `cairn doctor`)"
        )
    with store.db.session() as s:
        ids = s.exec(select(MemoryRow.id).where(col(MemoryRow.retracted).is_(False))).all()
        for memory_id in ids:
            s.add(MemoryOutbox(memory_id=memory_id or 0, op="upsert"))
    applied = store.flush_outbox(progress=progress, bulk=True)
    return ReindexReport(queued=len(ids), applied=applied, pending=store.pending_outbox())
