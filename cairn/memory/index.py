"""The vector index behind memory search: a small port, and its Qdrant adapter.

The database is the source of truth; the index only proposes candidate ids, which the store
re-reads through its scope filter. Qdrant runs in local mode (a folder) by default and as a
server when CAIRN_QDRANT_URL is set.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cairn.memory.terms import sparse_vector

__all__ = ["IndexUnavailable", "IndexedMemory", "QdrantIndex", "VectorIndex"]

log = logging.getLogger(__name__)

COLLECTION = "cairn_memory"
SPARSE = "terms"


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


class VectorIndex(Protocol):
    """Candidate search over memories. Every method may raise IndexUnavailable."""

    def upsert(self, items: list[IndexedMemory]) -> None:
        """Add or replace the given memories."""
        ...

    def delete(self, memory_ids: list[int]) -> None:
        """Remove the given memories (missing ids are ignored)."""
        ...

    def search(self, query: str, tenant: str, agent: str, k: int) -> list[tuple[int, float]]:
        """Up to ``k`` (memory id, score) pairs of ``tenant`` visible to ``agent``, best first."""
        ...

    def close(self) -> None:
        """Release the index (files, connections)."""
        ...


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


class QdrantIndex:
    """Qdrant through qdrant-client: local mode in ``path``, or a server at ``url``."""

    def __init__(
        self,
        *,
        url: str | None = None,
        path: Path | None = None,
        api_key: str | None = None,
        timeout: int = 5,
    ) -> None:
        if (url is None) == (path is None):
            raise ValueError("QdrantIndex needs exactly one of url and path")
        self._url, self._path, self._api_key, self._timeout = url, path, api_key, timeout
        self._client: Any = None
        self._lock = threading.RLock()
        self._ready = False

    @property
    def where(self) -> str:
        """Human-readable location of the index, for logs and ``cairn doctor``."""
        return self._url or str(self._path)

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
            self._ensure_collection(client, server=self._url is not None)
        except Exception as exc:
            raise IndexUnavailable(f"Qdrant at {self.where} is unavailable: {exc}") from exc
        self._client = client
        return client

    @staticmethod
    def _ensure_collection(client: Any, *, server: bool) -> None:
        from qdrant_client import models

        if client.collection_exists(COLLECTION):
            return
        client.create_collection(
            COLLECTION,
            vectors_config={},
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        if not server:
            return  # local mode has no payload indexes
        for field in ("tenant", "agent", "visibility"):
            try:
                client.create_payload_index(COLLECTION, field, models.PayloadSchemaType.KEYWORD)
            except Exception as exc:
                log.warning("could not index payload field %s: %s", field, exc)

    def _call(self, what: str, fn: Any) -> Any:
        with self._lock:
            client = self._connect()
            try:
                return fn(client)
            except IndexUnavailable:
                raise
            except Exception as exc:
                raise IndexUnavailable(f"Qdrant {what} failed at {self.where}: {exc}") from exc

    def upsert(self, items: list[IndexedMemory]) -> None:
        """Add or replace ``items``; memories without searchable terms are indexed empty."""
        from qdrant_client import models

        if not items:
            return
        points = []
        for item in items:
            indices, values = sparse_vector(item.text)
            points.append(
                models.PointStruct(
                    id=item.memory_id,
                    vector={SPARSE: models.SparseVector(indices=indices, values=values)},
                    payload={
                        "tenant": item.tenant,
                        "agent": item.agent or "*",
                        "visibility": item.visibility,
                    },
                )
            )
        self._call("upsert", lambda c: c.upsert(COLLECTION, points=points, wait=True))

    def delete(self, memory_ids: list[int]) -> None:
        """Remove ``memory_ids`` from the index."""
        from qdrant_client import models

        if not memory_ids:
            return
        selector = models.PointIdsList(points=list(memory_ids))
        self._call("delete", lambda c: c.delete(COLLECTION, points_selector=selector, wait=True))

    def search(self, query: str, tenant: str, agent: str, k: int) -> list[tuple[int, float]]:
        """Candidates of ``tenant`` that ``agent`` may see, best first."""
        from qdrant_client import models

        indices, values = sparse_vector(query)
        if not indices:
            return []
        visible = models.Filter(
            must=[models.FieldCondition(key="tenant", match=models.MatchValue(value=tenant))],
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
                COLLECTION,
                query=models.SparseVector(indices=indices, values=values),
                using=SPARSE,
                query_filter=visible,
                limit=k,
            ),
        )
        return [(int(p.id), float(p.score)) for p in result.points]

    def close(self) -> None:
        """Close a server connection; local clients stay open for the process's lifetime."""
        with self._lock:
            if self._client is not None and self._url is not None:
                self._client.close()
            self._client = None
