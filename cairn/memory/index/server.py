"""Qdrant through qdrant-client: a server at CAIRN_QDRANT_URL, or local mode in a folder."""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cairn.core.redact import mask_url
from cairn.memory.index.adapter import KEYWORD_FIELDS, QdrantAdapter
from cairn.memory.index.port import DENSE, SPARSE, IndexedMemory, IndexUnavailable, layout_name
from cairn.memory.periods import Period

__all__ = ["COLLECTION", "QdrantIndex"]

log = logging.getLogger(__name__)

COLLECTION = "cairn_memory"

_LOCAL_CLIENTS: dict[Path, Any] = {}
_LOCAL_LOCK = threading.Lock()


@atexit.register
def _close_local_clients() -> None:
    # Closing at exit, before the interpreter tears modules down, keeps local mode's folder
    # lock and files clean for the next process.
    with _LOCAL_LOCK:
        for client in _LOCAL_CLIENTS.values():
            with contextlib.suppress(Exception):  # best effort at exit
                client.close()
        _LOCAL_CLIENTS.clear()


class QdrantIndex(QdrantAdapter):
    """Qdrant through qdrant-client: local mode in ``path``, or a server at ``url``."""

    def __init__(
        self,
        *,
        url: str | None = None,
        path: Path | None = None,
        api_key: str | None = None,
        timeout: int = 5,
        dense_dim: int | None = None,
    ) -> None:
        if (url is None) == (path is None):
            raise ValueError("QdrantIndex needs exactly one of url and path")
        self._url, self._path, self._api_key, self._timeout = url, path, api_key, timeout
        self.dense_dim = dense_dim
        # One collection per vector layout: switching models starts a fresh collection, which
        # the store's reconciler fills from the database.
        self.collection = layout_name(COLLECTION, dense_dim)
        self._client: Any = None
        self._lock = threading.RLock()

    @property
    def where(self) -> str:
        """Human-readable location of the index (no credentials), for logs and ``cairn doctor``."""
        return mask_url(self._url) if self._url else str(self._path)

    def _connect(self) -> Any:
        from qdrant_client import QdrantClient

        if self._client is not None:
            return self._client
        try:
            if self._path is not None:
                # Local mode locks its folder: one client per folder per process, shared.
                with _LOCAL_LOCK:
                    client = _LOCAL_CLIENTS.get(self._path)
                    if client is None:
                        self._path.mkdir(parents=True, exist_ok=True)
                        client = QdrantClient(path=str(self._path))
                        _LOCAL_CLIENTS[self._path] = client
            else:
                client = QdrantClient(url=self._url, api_key=self._api_key, timeout=self._timeout)
            self._ensure_collection(client, self.collection, self.dense_dim, self._url is not None)
        except Exception as exc:
            raise IndexUnavailable(f"Qdrant at {self.where} is unavailable: {exc}") from exc
        self._client = client
        return client

    @staticmethod
    def _ensure_collection(client: Any, name: str, dim: int | None, server: bool) -> None:
        from qdrant_client import models

        if client.collection_exists(name):
            return
        dense = {} if dim is None else {DENSE: models.VectorParams(size=dim, distance="Cosine")}
        client.create_collection(
            name,
            vectors_config=dense,
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        if not server:
            return  # local mode has no payload indexes
        fields = [(f, models.PayloadSchemaType.KEYWORD) for f in KEYWORD_FIELDS]
        for field, schema in [*fields, ("created", models.PayloadSchemaType.FLOAT)]:
            try:
                client.create_payload_index(name, field, schema)
            except Exception as exc:
                log.warning("could not index payload field %s: %s", field, exc)

    def upsert(self, items: list[IndexedMemory]) -> None:
        """Add or replace ``items``; memories without searchable terms are indexed empty."""
        if not items:
            return
        points = self._points(items)
        self._call("upsert", lambda c: c.upsert(self.collection, points=points, wait=True))

    def delete(self, memory_ids: list[int]) -> None:
        """Remove ``memory_ids`` from the index."""
        from qdrant_client import models

        if not memory_ids:
            return
        selector = models.PointIdsList(points=list(memory_ids))
        self._call(
            "delete", lambda c: c.delete(self.collection, points_selector=selector, wait=True)
        )

    def _sparse(self, indices: list[int], values: list[float]) -> Any:
        from qdrant_client import models

        return models.SparseVector(indices=indices, values=values)

    def _point(self, memory_id: int, vector: dict[str, Any], payload: dict[str, Any]) -> Any:
        from qdrant_client import models

        return models.PointStruct(id=memory_id, vector=vector, payload=payload)

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
        from qdrant_client import models

        must: list[Any] = [
            models.FieldCondition(key="tenant", match=models.MatchValue(value=tenant))
        ]
        if rooms is not None:  # fail closed: a memory without a room matches none
            must.append(models.FieldCondition(key="room", match=models.MatchAny(any=list(rooms))))
        if periods:
            spans = [
                models.FieldCondition(
                    key="created",
                    range=models.Range(gte=p.start.timestamp(), lt=p.end.timestamp()),
                )
                for p in periods
            ]
            must.append(models.Filter(should=spans))
        visible = models.Filter(
            must=must,
            should=[
                models.FieldCondition(key="agent", match=models.MatchValue(value=agent)),
                models.FieldCondition(
                    key="visibility", match=models.MatchAny(any=["team", "public"])
                ),
            ],
        )
        result = self._call(
            "search",
            lambda c: c.query_points(
                self.collection, query=query, using=using, query_filter=visible, limit=k
            ),
        )
        return [(int(p.id), float(p.score)) for p in result.points]

    def count(self) -> int:
        """Points in the collection."""
        result = self._call("count", lambda c: c.count(self.collection, exact=True))
        return int(result.count)

    def optimize(self) -> None:
        """Nothing to do: Qdrant's server and local mode optimise on their own."""

    def compact(self) -> None:
        """Nothing to do here: the server's files are its own, and its optimiser vacuums
        segments with deleted points (docs/adr/0043)."""

    def close(self) -> None:
        """Close a server connection; local clients stay open for the process's lifetime."""
        with self._lock:
            if self._client is not None and self._url is not None:
                self._client.close()
            self._client = None
