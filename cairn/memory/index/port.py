"""The port of the vector index: what the store asks of it, and the types both sides share.

The database is the source of truth; the index only proposes candidate ids, which the store
re-reads through its scope filter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from cairn.memory.periods import Period
from cairn.memory.scope import WORKSPACE

__all__ = [
    "DENSE",
    "FIRST_INDEXABLE_ID",
    "LAYOUT",
    "SPARSE",
    "IndexUnavailable",
    "IndexedMemory",
    "VectorIndex",
    "layout_name",
    "merged",
]

# The layout of points (payload fields and their indexes). A new layout is a new collection or
# folder, which the store's reconciler fills from the database on first use: an upgrade
# re-indexes by itself. 2: points carry ``created``, range-indexed, for dated recall. 3: points
# carry ``room``, the private conversation of the memory or "*" (the workspace's).
LAYOUT = 3

SPARSE = "terms"
DENSE = "dense"

# The index keys points by memory id and Qdrant takes unsigned ids only; a row below this (an
# import let one in once) stays out of the index instead of failing every flush and every start.
FIRST_INDEXABLE_ID = 1


def layout_name(base: str, dense_dim: int | None) -> str:
    """The collection or folder name of this layout and vector size (``cairn_memory_v2_d384``)."""
    return f"{base}_v{LAYOUT}" + ("" if dense_dim is None else f"_d{dense_dim}")


def merged(*lists: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Candidate lists joined, each id at its best score, best first."""
    best: dict[int, float] = {}
    for pairs in lists:
        for mid, score in pairs:
            best[mid] = max(score, best.get(mid, score))
    return sorted(best.items(), key=lambda pair: -pair[1])


class IndexUnavailable(Exception):
    """The vector index cannot be reached; callers degrade to lexical search."""


@dataclass(frozen=True, slots=True)
class IndexedMemory:
    """What the index stores of a memory: its id, text, and the fields reads filter on."""

    memory_id: int
    text: str
    tenant: str
    agent: str | None
    visibility: str
    vector: list[float] | None = None  # the dense embedding, when the index has dense vectors
    created_at: datetime | None = None  # when it was written, for questions naming a date
    private_to: str | None = None  # the private conversation it stays in; None: the workspace's


class VectorIndex(Protocol):
    """Candidate search over memories. Every method may raise IndexUnavailable."""

    def upsert(self, items: list[IndexedMemory]) -> None:
        """Add or replace the given memories."""
        ...

    def delete(self, memory_ids: list[int]) -> None:
        """Remove the given memories (missing ids are ignored)."""
        ...

    def search(
        self,
        query: str,
        tenant: str,
        agent: str,
        k: int,
        *,
        rooms: Sequence[str] | None = (WORKSPACE,),
        periods: Sequence[Period] = (),
    ) -> list[tuple[int, float]]:
        """Lexical: up to ``k`` (memory id, score) pairs of ``tenant`` visible to ``agent`` in
        one of ``rooms`` (see :attr:`Scope.rooms`; None: any), only of memories written within
        one of ``periods`` when any are given."""
        ...

    def search_dense(
        self,
        vector: list[float],
        tenant: str,
        agent: str,
        k: int,
        *,
        rooms: Sequence[str] | None = (WORKSPACE,),
        periods: Sequence[Period] = (),
    ) -> list[tuple[int, float]]:
        """Dense: up to ``k`` (memory id, cosine) pairs; empty when the index has no vectors."""
        ...

    def candidates(
        self,
        query: str,
        vector: list[float] | None,
        tenant: str,
        agent: str,
        k: int,
        *,
        rooms: Sequence[str] | None = (WORKSPACE,),
        periods: Sequence[Period] = (),
    ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """Both searches of one recall at once: the lexical candidates of ``query`` and the
        dense ones of ``vector`` (none without it), each with up to ``k`` more of its kind
        written within ``periods`` merged in (:func:`merged`)."""
        ...

    def count(self) -> int:
        """How many memories the index holds (all tenants), for reconciliation."""
        ...

    def optimize(self) -> None:
        """Build search structures after bulk writes (a no-op where the engine does it)."""
        ...

    def compact(self) -> None:
        """Leave nothing of deleted points in the index's own files (erasure, ADR 0043): the
        embedded shard is rewritten with its live points; a no-op for a server."""
        ...

    def close(self) -> None:
        """Release the index (files, connections)."""
        ...
