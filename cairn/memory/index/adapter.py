"""What the two Qdrant adapters share: points, the two searches and failures as IndexUnavailable.

Each adapter (:mod:`.server` over qdrant-client, :mod:`.edge` over qdrant-edge) supplies its
engine's types through a few hooks; the vectors, payload and visibility rules are written once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from cairn.memory.index.port import DENSE, SPARSE, IndexedMemory, IndexUnavailable, merged
from cairn.memory.periods import Period
from cairn.memory.scope import WORKSPACE
from cairn.memory.terms import sparse_vector

__all__ = ["KEYWORD_FIELDS", "QdrantAdapter"]

# Payload fields every read filters on, indexed as keywords; ``created`` is range-indexed.
KEYWORD_FIELDS = ("tenant", "agent", "visibility", "room")


def _payload(item: IndexedMemory) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "tenant": item.tenant,
        "agent": item.agent or "*",
        "visibility": item.visibility,
        "room": item.private_to or WORKSPACE,
    }
    if item.created_at is not None:
        # Stored as epoch seconds: a float range filter is cheap in every Qdrant flavour.
        payload["created"] = item.created_at.timestamp()
    return payload


class QdrantAdapter:
    """The searches and writes of a Qdrant index over its engine's hooks (``_connect``,
    ``_sparse``, ``_point``, ``_query``); ``_engine`` names it in error messages."""

    _engine = "Qdrant"
    dense_dim: int | None
    _lock: threading.RLock

    @property
    def where(self) -> str:
        """Human-readable location of the index (no credentials), for logs and doctors."""
        raise NotImplementedError

    def _connect(self) -> Any:
        raise NotImplementedError

    def _sparse(self, indices: list[int], values: list[float]) -> Any:
        raise NotImplementedError

    def _point(self, memory_id: int, vector: dict[str, Any], payload: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _query(
        self,
        query: Any,
        using: str,
        tenant: str,
        agent: str,
        k: int,
        rooms: Sequence[str] | None,
        periods: Sequence[Period],
    ) -> list[tuple[int, float]]:
        raise NotImplementedError

    def _call(self, what: str, fn: Callable[[Any], Any]) -> Any:
        """``fn`` applied to the connected engine, under this index's lock; any failure of the
        engine is raised as IndexUnavailable."""
        with self._lock:
            engine = self._connect()
            try:
                return fn(engine)
            except IndexUnavailable:
                raise
            except Exception as exc:
                raise IndexUnavailable(
                    f"{self._engine} {what} failed at {self.where}: {exc}"
                ) from exc

    def _points(self, items: list[IndexedMemory]) -> list[Any]:
        """The engine's points for ``items``: sparse terms (empty when a text has none), the
        dense vector when the index has them, and the payload reads filter on.

        Raises ValueError for a memory without a vector of the index's size.
        """
        points = []
        for item in items:
            vector: dict[str, Any] = {SPARSE: self._sparse(*sparse_vector(item.text))}
            if self.dense_dim is not None:
                if item.vector is None or len(item.vector) != self.dense_dim:
                    raise ValueError(f"memory #{item.memory_id} needs a {self.dense_dim}-d vector")
                vector[DENSE] = list(item.vector)
            points.append(self._point(item.memory_id, vector, _payload(item)))
        return points

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
        """Lexical candidates of ``tenant`` that ``agent`` may see in ``rooms``, best first."""
        indices, values = sparse_vector(query)
        if not indices:
            return []
        sparse = self._sparse(indices, values)
        return self._query(sparse, SPARSE, tenant, agent, k, rooms, periods)

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
        """Nearest memories of ``tenant`` visible to ``agent`` in ``rooms`` by cosine, best
        first."""
        if self.dense_dim is None:
            return []
        return self._query(list(vector), DENSE, tenant, agent, k, rooms, periods)

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
        """Both searches of one recall (see :meth:`VectorIndex.candidates`)."""
        lexical = self.search(query, tenant, agent, k, rooms=rooms)
        if periods:
            within = self.search(query, tenant, agent, k, rooms=rooms, periods=periods)
            lexical = merged(lexical, within)
        dense: list[tuple[int, float]] = []
        if vector is not None:
            dense = self.search_dense(vector, tenant, agent, k, rooms=rooms)
            if periods:
                within = self.search_dense(vector, tenant, agent, k, rooms=rooms, periods=periods)
                dense = merged(dense, within)
        return lexical, dense
