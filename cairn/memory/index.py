"""The vector index behind memory search: a small port, and its Qdrant adapter.

The database is the source of truth; the index only proposes candidate ids, which the store
re-reads through its scope filter. Qdrant runs in local mode (a folder) by default and as a
server when CAIRN_QDRANT_URL is set.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from cairn.core.redact import mask_url
from cairn.core.settings import Settings
from cairn.memory.periods import Period
from cairn.memory.terms import sparse_vector

__all__ = [
    "EdgeIndex",
    "IndexUnavailable",
    "IndexedMemory",
    "QdrantIndex",
    "VectorIndex",
    "embedded_index",
]

log = logging.getLogger(__name__)

COLLECTION = "cairn_memory"
# The layout of points (payload fields and their indexes). A new layout is a new collection or
# folder, which the store's reconciler fills from the database on first use: an upgrade
# re-indexes by itself. 2: points carry ``created``, range-indexed, for dated recall.
LAYOUT = 2


def _layout_name(base: str, dense_dim: int | None) -> str:
    """The collection or folder name of this layout and vector size (``cairn_memory_v2_d384``)."""
    return f"{base}_v{LAYOUT}" + ("" if dense_dim is None else f"_d{dense_dim}")


SPARSE = "terms"
DENSE = "dense"


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


def _created(item: IndexedMemory) -> dict[str, float]:
    # Stored as epoch seconds: a float range filter is cheap in every Qdrant flavour.
    if item.created_at is None:
        return {}
    when = item.created_at
    return {"created": when.timestamp()}


class VectorIndex(Protocol):
    """Candidate search over memories. Every method may raise IndexUnavailable."""

    def upsert(self, items: list[IndexedMemory]) -> None:
        """Add or replace the given memories."""
        ...

    def delete(self, memory_ids: list[int]) -> None:
        """Remove the given memories (missing ids are ignored)."""
        ...

    def search(
        self, query: str, tenant: str, agent: str, k: int, *, periods: Sequence[Period] = ()
    ) -> list[tuple[int, float]]:
        """Lexical: up to ``k`` (memory id, score) pairs of ``tenant`` visible to ``agent``,
        only of memories written within one of ``periods`` when any are given."""
        ...

    def search_dense(
        self,
        vector: list[float],
        tenant: str,
        agent: str,
        k: int,
        *,
        periods: Sequence[Period] = (),
    ) -> list[tuple[int, float]]:
        """Dense: up to ``k`` (memory id, cosine) pairs; empty when the index has no vectors."""
        ...

    def count(self) -> int:
        """How many memories the index holds (all tenants), for reconciliation."""
        ...

    def optimize(self) -> None:
        """Build search structures after bulk writes (a no-op where the engine does it)."""
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


class _Searches:
    """The two searches of an index, over its ``_query`` and its engine's sparse vector type."""

    dense_dim: int | None

    def _sparse(self, indices: list[int], values: list[float]) -> Any:
        raise NotImplementedError

    def _query(
        self, query: Any, using: str, tenant: str, agent: str, k: int, periods: Sequence[Period]
    ) -> list[tuple[int, float]]:
        raise NotImplementedError

    def search(
        self, query: str, tenant: str, agent: str, k: int, *, periods: Sequence[Period] = ()
    ) -> list[tuple[int, float]]:
        """Lexical candidates of ``tenant`` that ``agent`` may see, best first."""
        indices, values = sparse_vector(query)
        if not indices:
            return []
        return self._query(self._sparse(indices, values), SPARSE, tenant, agent, k, periods)

    def search_dense(
        self,
        vector: list[float],
        tenant: str,
        agent: str,
        k: int,
        *,
        periods: Sequence[Period] = (),
    ) -> list[tuple[int, float]]:
        """Nearest memories of ``tenant`` visible to ``agent`` by cosine, best first."""
        if self.dense_dim is None:
            return []
        return self._query(list(vector), DENSE, tenant, agent, k, periods)


class QdrantIndex(_Searches):
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
        self.collection = _layout_name(COLLECTION, dense_dim)
        self._client: Any = None
        self._lock = threading.RLock()
        self._ready = False

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
        for field in ("tenant", "agent", "visibility"):
            try:
                client.create_payload_index(name, field, models.PayloadSchemaType.KEYWORD)
            except Exception as exc:
                log.warning("could not index payload field %s: %s", field, exc)
        try:
            client.create_payload_index(name, "created", models.PayloadSchemaType.FLOAT)
        except Exception as exc:
            log.warning("could not index payload field created: %s", exc)

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
            vector: dict[str, Any] = {SPARSE: models.SparseVector(indices=indices, values=values)}
            if self.dense_dim is not None:
                if item.vector is None or len(item.vector) != self.dense_dim:
                    raise ValueError(f"memory #{item.memory_id} needs a {self.dense_dim}-d vector")
                vector[DENSE] = item.vector
            points.append(
                models.PointStruct(
                    id=item.memory_id,
                    vector=vector,
                    payload={
                        "tenant": item.tenant,
                        "agent": item.agent or "*",
                        "visibility": item.visibility,
                        **_created(item),
                    },
                )
            )
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

    def _query(
        self, query: Any, using: str, tenant: str, agent: str, k: int, periods: Sequence[Period]
    ) -> list[tuple[int, float]]:
        from qdrant_client import models

        must: list[Any] = [
            models.FieldCondition(key="tenant", match=models.MatchValue(value=tenant))
        ]
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

    def close(self) -> None:
        """Close a server connection; local clients stay open for the process's lifetime."""
        with self._lock:
            if self._client is not None and self._url is not None:
                self._client.close()
            self._client = None


_EDGE_SHARDS: dict[Path, Any] = {}
_EDGE_CLAIMS: dict[Path, int] = {}  # shard folder -> descriptor of its lock file, held

# Seconds before opening a shard is tried again after it failed (held by another process):
# when the holder exits, or is killed, another process takes the index over within this.
_EDGE_RETRY_AFTER = 5.0


@atexit.register
def _close_edge_shards() -> None:
    with _LOCAL_LOCK:
        for shard in _EDGE_SHARDS.values():
            with contextlib.suppress(Exception):  # best effort at exit
                shard.flush()
                shard.close()
        _EDGE_SHARDS.clear()
        for path in list(_EDGE_CLAIMS):
            _release(path)


def _claim(path: Path) -> None:
    """Take the shard folder ``path`` for this process, or raise naming the process that has it.

    qdrant-edge locks a shard's WAL only once the shard is open. Two processes that start
    together (two ``cairn worker`` on the embedded folder) both found no shard and both created
    one: the loser's attempt broke the winner's files ("Gridstore IO error: No such file"), and
    neither had an index for the next 30 s. An exclusive lock on a file beside the folder, taken
    before the shard is touched, lets exactly one in and leaves its files alone. The OS drops the
    lock when the process ends, SIGKILL included. The caller holds _LOCAL_LOCK.
    """
    if path in _EDGE_CLAIMS:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = _holder(fd)
        os.close(fd)
        raise RuntimeError(
            f"held by another process{f' (pid {holder})' if holder else ''}; "
            "one process at a time can use the embedded index, the others recall lexically "
            "(set CAIRN_QDRANT_URL to share a Qdrant server)"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    _EDGE_CLAIMS[path] = fd


def _holder(fd: int) -> int | None:
    """The live process named in the lock file ``fd``, or None if none is named within 0.5 s.

    The holder writes its pid just after it takes the lock, so a process that loses the race
    by microseconds can read an empty file, or the pid of a holder that has since exited.
    """
    deadline = time.monotonic() + 0.5
    while True:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if text.isdigit() and _alive(int(text)):
            return int(text)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        pass
    return True


def _release(path: Path) -> None:
    fd = _EDGE_CLAIMS.pop(path, None)
    if fd is not None:
        os.close(fd)  # closing the descriptor drops the lock


def index_for(settings: Settings, dense_dim: int | None) -> VectorIndex:
    """The index the settings describe: a Qdrant server, or the embedded engine in CAIRN_HOME."""
    if settings.qdrant_url:
        key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        return QdrantIndex(url=settings.qdrant_url, api_key=key, dense_dim=dense_dim)
    return embedded_index(settings.qdrant_path, dense_dim)


def embedded_index(path: Path, dense_dim: int | None) -> VectorIndex:
    """The embedded default's index in ``path``: Qdrant edge, else qdrant-client's local mode."""
    try:
        import qdrant_edge  # noqa: F401
    except ImportError:
        return QdrantIndex(path=path, dense_dim=dense_dim)
    return EdgeIndex(path, dense_dim=dense_dim)


class EdgeIndex(_Searches):
    """Qdrant's in-process engine (qdrant-edge) in a folder: the embedded default.

    Same points, vectors and payload as :class:`QdrantIndex`, with keyword payload indexes, so
    a tenant-filtered query does not scan other tenants' points.
    """

    def __init__(self, path: Path, *, dense_dim: int | None = None) -> None:
        self.dense_dim = dense_dim
        self._path = path / _layout_name("edge", dense_dim)
        self._lock = threading.RLock()
        self._shard: Any = None
        self._failure: tuple[float, str] | None = None  # (when, why) the last open failed

    @property
    def where(self) -> str:
        """The shard's folder, for logs and ``cairn memory doctor``."""
        return str(self._path)

    def _connect(self) -> Any:
        if self._shard is not None:
            return self._shard
        if self._failure is not None and time.monotonic() - self._failure[0] < _EDGE_RETRY_AFTER:
            # Not on every query: the holder rarely goes that soon, and a shard that fails to
            # load (damaged) can take a while to say so; recall stays lexical meanwhile.
            raise IndexUnavailable(self._failure[1])
        try:
            import qdrant_edge as qe

            with _LOCAL_LOCK:
                shard = _EDGE_SHARDS.get(self._path)
                if shard is None:
                    _claim(self._path)
                    try:
                        if (self._path / "edge_config.json").exists():
                            shard = qe.EdgeShard.load(str(self._path), self._config(qe))
                        else:
                            shard = self._create(qe)
                    except Exception:
                        _release(self._path)
                        raise
                    _EDGE_SHARDS[self._path] = shard
        except Exception as exc:
            message = f"Qdrant edge shard at {self.where} is unavailable: {exc}"
            self._failure = (time.monotonic(), message)
            raise IndexUnavailable(message) from exc
        self._shard = shard
        self._failure = None
        return shard

    def _config(self, qe: Any) -> Any:
        vectors = (
            {DENSE: qe.EdgeVectorParams(size=self.dense_dim, distance=qe.Distance.Cosine)}
            if self.dense_dim is not None
            else {}
        )
        return qe.EdgeConfig(
            vectors=vectors,
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            # Searched on the calling thread's behalf by one pool thread: a worker runs turns
            # in parallel already, and handing one small query to a pool of threads cost more
            # CPU than it saved time (ADR 0016: 0.30 -> 0.08 ms CPU for both searches).
            max_search_threads=1,
        )

    def _create(self, qe: Any) -> Any:
        self._path.mkdir(parents=True, exist_ok=True)
        shard = qe.EdgeShard.create(str(self._path), self._config(qe))
        for field in ("tenant", "agent", "visibility"):
            shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword))
        shard.update(qe.UpdateOperation.create_field_index("created", qe.PayloadSchemaType.Float))
        return shard

    def _call(self, what: str, fn: Any) -> Any:
        with self._lock:
            shard = self._connect()
            try:
                return fn(shard)
            except Exception as exc:
                raise IndexUnavailable(f"Qdrant edge {what} failed at {self.where}: {exc}") from exc

    def upsert(self, items: list[IndexedMemory]) -> None:
        """Add or replace ``items``."""
        import qdrant_edge as qe

        if not items:
            return
        points = []
        for item in items:
            indices, values = sparse_vector(item.text)
            vector: dict[str, Any] = {SPARSE: qe.SparseVector(indices, values)}
            if self.dense_dim is not None:
                if item.vector is None or len(item.vector) != self.dense_dim:
                    raise ValueError(f"memory #{item.memory_id} needs a {self.dense_dim}-d vector")
                vector[DENSE] = list(item.vector)
            payload = {
                "tenant": item.tenant,
                "agent": item.agent or "*",
                "visibility": item.visibility,
                **_created(item),
            }
            points.append(qe.Point(item.memory_id, vector, payload))
        self._call("upsert", lambda s: s.update(qe.UpdateOperation.upsert_points(points)))

    def delete(self, memory_ids: list[int]) -> None:
        """Remove ``memory_ids``."""
        import qdrant_edge as qe

        if memory_ids:
            ids: list[Any] = list(memory_ids)
            self._call("delete", lambda s: s.update(qe.UpdateOperation.delete_points(ids)))

    def _sparse(self, indices: list[int], values: list[float]) -> Any:
        import qdrant_edge as qe

        return qe.SparseVector(indices, values)

    def _query(
        self, query: Any, using: str, tenant: str, agent: str, k: int, periods: Sequence[Period]
    ) -> list[tuple[int, float]]:
        import qdrant_edge as qe

        must: list[Any] = [qe.FieldCondition("tenant", match=qe.MatchValue(tenant))]
        if periods:
            spans: list[Any] = [
                qe.FieldCondition(
                    "created", range=qe.RangeFloat(gte=p.start.timestamp(), lt=p.end.timestamp())
                )
                for p in periods
            ]
            must.append(qe.Filter(should=spans))
        visible = qe.Filter(
            must=must,
            should=[
                qe.FieldCondition("agent", match=qe.MatchValue(agent)),
                qe.FieldCondition("visibility", match=qe.MatchAny(["team", "public"])),
            ],
        )
        # Only ids and scores: the database holds everything else, and payloads cost time.
        request = qe.QueryRequest(
            limit=k,
            query=qe.Query.Nearest(query, using=using),
            filter=visible,
            with_payload=False,
            with_vector=False,
        )
        points = self._call("search", lambda s: s.query(request))
        return [(int(p.id), float(p.score)) for p in points]

    def count(self) -> int:
        """Points in the shard."""
        import qdrant_edge as qe

        return int(self._call("count", lambda s: s.count(qe.CountRequest(exact=True))))

    def optimize(self) -> None:
        """Build the shard's HNSW and payload indexes now; the edge engine has no background
        optimiser, and an unoptimised shard searches dense vectors by brute force."""
        self._call("optimize", lambda s: s.optimize())

    def close(self) -> None:
        """Flush to disk; the shard stays open for the process's lifetime (like local mode)."""
        with self._lock:
            if self._shard is not None:
                with contextlib.suppress(Exception):
                    self._shard.flush()
            self._shard = None
