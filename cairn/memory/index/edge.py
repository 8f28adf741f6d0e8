"""Qdrant's in-process engine (qdrant-edge) in a folder: the embedded default index."""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cairn.memory.index import owner
from cairn.memory.index.adapter import KEYWORD_FIELDS, QdrantAdapter
from cairn.memory.index.port import DENSE, SPARSE, IndexedMemory, IndexUnavailable, layout_name
from cairn.memory.index.shared import ShardClient, ShardServer
from cairn.memory.periods import Period
from cairn.memory.scope import WORKSPACE

__all__ = ["EdgeIndex"]

log = logging.getLogger(__name__)

_SHARDS: dict[Path, Any] = {}
_SERVERS: dict[Path, ShardServer] = {}  # the shards this process serves to the home's others
_SHARDS_LOCK = threading.Lock()  # around _SHARDS, _SERVERS and the owner claims of their folders

# Seconds before opening a shard is tried again after it failed (held by another process):
# when the holder exits, or is killed, another process takes the index over within this.
_RETRY_AFTER = 5.0


@atexit.register
def _close_shards() -> None:
    with _SHARDS_LOCK:
        for server in _SERVERS.values():
            with contextlib.suppress(Exception):  # best effort at exit
                server.stop()
        _SERVERS.clear()
        for shard in _SHARDS.values():
            with contextlib.suppress(Exception):  # best effort at exit
                shard.flush()
                shard.close()
        _SHARDS.clear()
        owner.release_all()


class EdgeIndex(QdrantAdapter):
    """Qdrant's in-process engine (qdrant-edge) in a folder: the embedded default.

    Same points, vectors and payload as :class:`~cairn.memory.index.server.QdrantIndex`, with
    keyword payload indexes, so a tenant-filtered query does not scan other tenants' points.
    The process that opens the shard serves it to the home's other processes, and an index
    whose shard another process holds searches and writes through that one (:mod:`.shared`).
    """

    _engine = "Qdrant edge"

    def __init__(self, path: Path, *, dense_dim: int | None = None) -> None:
        self.dense_dim = dense_dim
        self._path = path / layout_name("edge", dense_dim)
        self._lock = threading.RLock()
        self._shard: Any = None
        self._failure: tuple[float, str] | None = None  # (when, why) the last open failed
        self._client = ShardClient(self._path, on_gone=self._retry_now)

    @property
    def _moving(self) -> Path:
        """Beside the shard while :meth:`_place` has not finished moving it."""
        return self._path.with_name(self._path.name + ".moving")

    @property
    def where(self) -> str:
        """The shard's folder, for logs and ``cairn memory doctor``."""
        return str(self._path)

    def _connect(self) -> Any:
        if self._shard is not None and _SHARDS.get(self._path) is self._shard:
            return self._shard  # (a shard :meth:`compact` replaced is opened again)
        if self._failure is not None and time.monotonic() - self._failure[0] < _RETRY_AFTER:
            # Not on every query: the holder rarely goes that soon, and a shard that fails to
            # load (damaged) can take a while to say so; recall stays lexical meanwhile.
            raise IndexUnavailable(self._failure[1])
        try:
            import qdrant_edge as qe

            with _SHARDS_LOCK:
                shard = _SHARDS.get(self._path)
                if shard is None:
                    owner.claim(self._path)
                    try:
                        if (self._path / "edge_config.json").exists():
                            if not self._placed():  # (asked before the load saves it)
                                self._moving.touch()  # until moved: a kill part-way moves again
                            shard = qe.EdgeShard.load(str(self._path), self._config(qe))
                            if self._moving.exists():
                                try:
                                    self._place(qe, shard)
                                except Exception:
                                    # Closed, so that a later open in this process can load
                                    # it again; the mark stays, and that open moves it again.
                                    with contextlib.suppress(Exception):
                                        shard.close()
                                    raise
                                self._moving.unlink()
                        else:
                            shard = self._create(qe)
                    except Exception:
                        owner.release(self._path)
                        raise
                    _SHARDS[self._path] = shard
                    self._serve()
        except Exception as exc:
            message = f"Qdrant edge shard at {self.where} is unavailable: {exc}"
            self._failure = (time.monotonic(), message)
            raise IndexUnavailable(message) from exc
        self._shard = shard
        self._failure = None
        return shard

    def _serve(self) -> None:
        """Serve the shard just opened to the home's other processes; without a socket they
        recall lexically, as before, so a failure is logged and nothing more."""
        try:
            _SERVERS[self._path] = ShardServer(self, self._path).start()
        except OSError as exc:
            log.warning(
                "the embedded index at %s can't be served to other processes: %s", self.where, exc
            )

    def _retry_now(self) -> None:
        """The process that held the shard has gone: the next call tries to take it over
        without waiting for the retry pause."""
        self._failure = None

    def _remote(self) -> ShardClient | None:
        """None when this process holds the shard; the client of the process that holds it
        and serves it otherwise. Raises IndexUnavailable when neither can be had."""
        with self._lock:
            try:
                self._connect()
                return None
            except IndexUnavailable:
                if not self._client.serving():
                    raise
                return self._client

    def _config(self, qe: Any) -> Any:
        # What a process holds must not grow with the memories at rest (issue 32; ADR 0046):
        # the original vectors, payloads, their indexes and the id tracker stay on disk
        # (Cold: read as needed), and the dense search runs on 4-bit TurboQuant codes held in
        # memory (192 bytes a point, an eighth of the vector), without rescoring.
        cold = qe.Memory.Cold
        vectors = (
            {
                DENSE: qe.EdgeVectorParams(
                    size=self.dense_dim,
                    distance=qe.Distance.Cosine,
                    memory=cold,
                    quantization_config=qe.TurboQuantQuantizationConfig(
                        bits=qe.TurboQuantBitSize.Bits4, memory=qe.Memory.Pinned
                    ),
                )
            }
            if self.dense_dim is not None
            else {}
        )
        return qe.EdgeConfig(
            vectors=vectors,
            # The sparse index stays in memory: on disk, every lexical search of the message
            # path read it back, and the light turn cost 25% more CPU (ADR 0046).
            sparse_vectors={
                SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf, memory=qe.Memory.Pinned)
            },
            payload_memory=cold,
            id_tracker_memory=cold,
            # Searched on the calling thread's behalf by one pool thread: a worker runs turns
            # in parallel already, and handing one small query to a pool of threads cost more
            # CPU than it saved time (ADR 0016: 0.30 -> 0.08 ms CPU for both searches).
            max_search_threads=1,
        )

    def _placed(self) -> bool:
        """Whether the shard in the folder has today's placements (:meth:`_config`); one made
        before them holds its vectors and indexes in memory until :meth:`_place` moves them."""
        try:
            saved = json.loads((self._path / "edge_config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return True  # the engine loaded it, or said why not: nothing to move
        return bool(saved.get("id_tracker_memory") == "cold")

    def _place(self, qe: Any, shard: Any) -> None:
        """Move a shard made before today's placements to them, once: loaded with the new
        configuration already, its payload indexes are made again on disk and its segments
        rebuilt, which writes the quantized codes (3 s for 10,000 points here)."""
        points = shard.count(qe.CountRequest(exact=True))
        log.info(
            "moving the vector index at %s to its on-disk layout (%d points, once)",
            self.where,
            points,
        )
        started = time.monotonic()
        _index_fields(qe, shard)
        shard.optimize()
        shard.flush()
        log.info("vector index moved in %.1f s", time.monotonic() - started)

    def _create(self, qe: Any, path: Path | None = None) -> Any:
        path = path or self._path
        path.mkdir(parents=True, exist_ok=True)
        shard = qe.EdgeShard.create(str(path), self._config(qe))
        _index_fields(qe, shard)
        return shard

    def upsert(self, items: list[IndexedMemory]) -> None:
        """Add or replace ``items``."""
        import qdrant_edge as qe

        if not items:
            return
        if (remote := self._remote()) is not None:
            remote.upsert(items)
            return
        points = self._points(items)
        self._call("upsert", lambda s: s.update(qe.UpdateOperation.upsert_points(points)))

    def delete(self, memory_ids: list[int]) -> None:
        """Remove ``memory_ids``."""
        import qdrant_edge as qe

        if memory_ids and (remote := self._remote()) is not None:
            remote.delete(memory_ids)
        elif memory_ids:
            ids: list[Any] = list(memory_ids)
            self._call("delete", lambda s: s.update(qe.UpdateOperation.delete_points(ids)))

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
        """Lexical candidates (see :meth:`QdrantAdapter.search`), from the shard's owner when
        another process holds it."""
        if (remote := self._remote()) is not None:
            return remote.search(query, tenant, agent, k, rooms=rooms, periods=periods)
        return super().search(query, tenant, agent, k, rooms=rooms, periods=periods)

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
        """Dense candidates (see :meth:`QdrantAdapter.search_dense`), from the shard's owner
        when another process holds it."""
        if self.dense_dim is not None and (remote := self._remote()) is not None:
            return remote.search_dense(vector, tenant, agent, k, rooms=rooms, periods=periods)
        return super().search_dense(vector, tenant, agent, k, rooms=rooms, periods=periods)

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
        """Both searches of one recall (see :meth:`QdrantAdapter.candidates`), in one round
        trip to the shard's owner when another process holds it."""
        if self.dense_dim is None:
            vector = None
        if (remote := self._remote()) is not None:
            return remote.candidates(query, vector, tenant, agent, k, rooms=rooms, periods=periods)
        return super().candidates(query, vector, tenant, agent, k, rooms=rooms, periods=periods)

    def _sparse(self, indices: list[int], values: list[float]) -> Any:
        import qdrant_edge as qe

        return qe.SparseVector(indices, values)

    def _point(self, memory_id: int, vector: dict[str, Any], payload: dict[str, Any]) -> Any:
        import qdrant_edge as qe

        return qe.Point(memory_id, vector, payload)

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
        import qdrant_edge as qe

        must: list[Any] = [qe.FieldCondition("tenant", match=qe.MatchValue(tenant))]
        if rooms is not None:  # fail closed: a memory without a room matches none
            must.append(qe.FieldCondition("room", match=qe.MatchAny(list(rooms))))
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
            # The codes rank well enough (the top 10 agree 94-95% with an exact search); a
            # rescoring would read the on-disk originals back into memory on every query.
            params=_no_rescore() if using == DENSE else None,
        )
        points = self._call("search", lambda s: s.query(request))
        return [(int(p.id), float(p.score)) for p in points]

    def count(self) -> int:
        """Points in the shard."""
        import qdrant_edge as qe

        if (remote := self._remote()) is not None:
            return remote.count()

        return int(self._call("count", lambda s: s.count(qe.CountRequest(exact=True))))

    def optimize(self) -> None:
        """Build the shard's HNSW and payload indexes now, and write them out; the edge engine
        has no background optimiser, and an unoptimised shard searches dense vectors by brute
        force. The flush lets the write-ahead log drop what the segments now hold."""
        if (remote := self._remote()) is not None:
            remote.optimize()
            return

        def settle(shard: Any) -> None:
            shard.optimize()
            shard.flush()

        self._call("optimize", settle)

    def compact(self) -> None:
        """Rewrite the shard with its live points only, then put it in place of the old one.

        qdrant-edge keeps a deleted point's payload and vectors in its write-ahead log, and in
        its segments until an optimisation happens to rebuild them (docs/adr/0043 measured
        both): a copy of the live points into a new folder is what leaves none on disk.
        """
        import shutil

        import qdrant_edge as qe

        if (remote := self._remote()) is not None:
            remote.compact()
            return
        with self._lock:
            shard = self._connect()
            fresh_path = self._path.with_name(self._path.name + ".compacting")
            shutil.rmtree(fresh_path, ignore_errors=True)
            try:
                fresh = self._create(qe, fresh_path)
                offset: Any = None
                while True:
                    request = qe.ScrollRequest(
                        offset=offset, limit=1000, with_payload=True, with_vector=True
                    )
                    records, offset = shard.scroll(request)
                    points = [qe.Point(r.id, r.vector, r.payload) for r in records]
                    if points:
                        fresh.update(qe.UpdateOperation.upsert_points(points))
                    if offset is None:
                        break
                fresh.optimize()
                fresh.flush()
                fresh.close()
            except Exception as exc:
                shutil.rmtree(fresh_path, ignore_errors=True)
                raise IndexUnavailable(
                    f"Qdrant edge compact failed at {self.where}: {exc}"
                ) from exc
            with _SHARDS_LOCK:
                shard.close()
                stale = self._path.with_name(self._path.name + ".stale")
                self._path.rename(stale)
                fresh_path.rename(self._path)
                shutil.rmtree(stale)
                self._shard = _SHARDS[self._path] = qe.EdgeShard.load(
                    str(self._path), self._config(qe)
                )

    def close(self) -> None:
        """Flush to disk; the shard stays open for the process's lifetime (like local mode)."""
        with self._lock:
            if self._shard is not None:
                with contextlib.suppress(Exception):
                    self._shard.flush()
            self._shard = None


def _index_fields(qe: Any, shard: Any) -> None:
    """The payload indexes reads filter on, on disk (made again over older in-memory ones)."""
    cold = qe.Memory.Cold
    for field in KEYWORD_FIELDS:
        keyword = qe.KeywordIndexParams(memory=cold)
        shard.update(qe.UpdateOperation.create_field_index(field, keyword))
    created = qe.FloatIndexParams(memory=cold)
    shard.update(qe.UpdateOperation.create_field_index("created", created))


@functools.cache
def _no_rescore() -> Any:
    import qdrant_edge as qe

    return qe.SearchParams(quantization=qe.QuantizationSearchParams(rescore=False))
