"""The embedded index's placements (issue 32, ADR 0046): original vectors, payloads and
payload indexes on disk, the dense search on 4-bit codes held in memory; and a
shard made before them moved to them, once, with its points."""

from __future__ import annotations

import json
import logging
import math
import random
import zlib
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe

from cairn.db import ensure_tenant
from cairn.db.models import MemoryOutbox, MemoryRow
from cairn.memory import index_outbox
from cairn.memory.index import EdgeIndex
from cairn.memory.index.adapter import KEYWORD_FIELDS
from cairn.memory.index.port import DENSE, SPARSE, IndexedMemory, layout_name
from cairn.memory.index_outbox import IndexOutbox
from cairn.memory.records import content_hash
from cairn.memory.terms import sparse_vector
from cairn.runtime import Runtime

DIM = 32
WORDS = "deploy runner canary database backup pager rotation freeze ticket".split()  # noqa: SIM905


def _unit(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


def _memories(count: int) -> list[IndexedMemory]:
    rng = random.Random(5)
    return [
        IndexedMemory(
            n + 1,
            f"{rng.choice(WORDS)} {rng.choice(WORDS)} note {n}",
            "acme",
            None,
            "team",
            vector=_unit(rng),
        )
        for n in range(count)
    ]


def _old_shard(folder: Path, memories: list[IndexedMemory]) -> None:
    """A shard as Cairn made them before the placements: every part in memory."""
    folder.mkdir(parents=True)
    config = qe.EdgeConfig(
        vectors={DENSE: qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine)},
        sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        max_search_threads=1,
    )
    shard = qe.EdgeShard.create(str(folder), config)
    for field in KEYWORD_FIELDS:
        shard.update(qe.UpdateOperation.create_field_index(field, qe.PayloadSchemaType.Keyword))
    points = [
        qe.Point(
            m.memory_id,
            {DENSE: m.vector, SPARSE: qe.SparseVector(*sparse_vector(m.text))},
            {"tenant": m.tenant, "agent": "*", "visibility": m.visibility, "room": "*"},
        )
        for m in memories
    ]
    shard.update(qe.UpdateOperation.upsert_points(points))
    shard.optimize()
    shard.flush()
    shard.close()


def _saved(folder: Path) -> dict[str, object]:
    return json.loads((folder / "edge_config.json").read_text(encoding="utf-8"))


def _quantized(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("quantized*") if p.is_file()]


def test_a_new_shard_searches_its_codes_and_keeps_the_originals_on_disk(tmp_path: Path) -> None:
    memories = _memories(600)
    index = EdgeIndex(tmp_path, dense_dim=DIM)
    index.upsert(memories)
    index.optimize()
    index.close()
    folder = tmp_path / layout_name("edge", DIM)
    saved = _saved(folder)
    dense = saved["vectors"][DENSE]  # type: ignore[index]
    assert dense["memory"] == "cold"
    assert dense["quantization_config"] == {"turbo": {"memory": "pinned", "bits": "bits4"}}
    # The sparse index stays in memory: every lexical search of the message path reads it.
    assert saved["sparse_vectors"][SPARSE]["memory"] == "pinned"  # type: ignore[index]
    assert saved["payload_memory"] == saved["id_tracker_memory"] == "cold"
    assert _quantized(folder), "optimising wrote no quantized codes"
    # Without rescoring, the codes alone rank: each stored vector still finds itself first.
    for m in memories[::60]:
        assert m.vector is not None
        assert index.search_dense(m.vector, "acme", "ops", 5)[0][0] == m.memory_id
    assert index.search_dense(memories[0].vector or [], "other", "ops", 5) == []
    assert {mid for mid, _ in index.search("note 17", "acme", "ops", 5)} >= {18}


def test_a_shard_made_before_the_placements_is_moved_once_with_its_points(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memories = _memories(400)
    folder = tmp_path / layout_name("edge", DIM)
    _old_shard(folder, memories)
    assert _saved(folder).get("id_tracker_memory") is None
    assert not _quantized(folder)

    with caplog.at_level(logging.INFO, logger="cairn.memory.index.edge"):
        index = EdgeIndex(tmp_path, dense_dim=DIM)
        assert index.count() == 400
    moved = [r.getMessage() for r in caplog.records if "on-disk layout" in r.getMessage()]
    assert moved == [
        f"moving the vector index at {folder} to its on-disk layout (400 points, once)"
    ]
    saved = _saved(folder)
    assert saved["id_tracker_memory"] == "cold"
    assert saved["vectors"][DENSE]["quantization_config"]["turbo"]["bits"] == "bits4"  # type: ignore[index]
    assert _quantized(folder)
    for m in memories[::50]:
        assert m.vector is not None
        assert index.search_dense(m.vector, "acme", "ops", 3)[0][0] == m.memory_id
    assert {mid for mid, _ in index.search("note 123", "acme", "ops", 5)} >= {124}
    # The tenant filter still holds over the payload indexes made again on disk.
    assert index.search("note 123", "other", "ops", 5) == []
    index.close()
    # A shard already moved is not moved again (what the next open decides on).
    assert EdgeIndex(tmp_path, dense_dim=DIM)._placed()


def test_a_move_cut_short_is_made_again_at_the_next_open(tmp_path: Path) -> None:
    """The engine saves the new configuration as it loads the shard: a process killed after
    that and before the move finished leaves a shard that says it is placed. The mark beside
    it, written before the load and removed after the move, makes the next open move it."""
    folder = tmp_path / layout_name("edge", DIM)
    _old_shard(folder, _memories(300))
    mark = folder.with_name(folder.name + ".moving")
    mark.touch()  # what the killed process wrote before it loaded the shard...
    shard = qe.EdgeShard.load(str(folder), EdgeIndex(tmp_path, dense_dim=DIM)._config(qe))
    shard.close()  # ...and the load it made, which saved the new configuration
    assert _saved(folder)["id_tracker_memory"] == "cold"
    assert not _quantized(folder)

    index = EdgeIndex(tmp_path, dense_dim=DIM)
    assert index.count() == 300
    assert _quantized(folder), "the move was not made again"
    assert not mark.exists()
    index.close()


class _Settling(EdgeIndex):
    """The embedded index, noting how many points it held at each optimisation."""

    def __init__(self, path: Path, *, dense_dim: int | None = None) -> None:
        super().__init__(path, dense_dim=dense_dim)
        self.optimised_at: list[int] = []

    def optimize(self) -> None:
        super().optimize()
        self.optimised_at.append(self.count())


class _Seeded:
    """Unit vectors of an API model's size, the same for the same text (a model is beside
    the point here, and slow)."""

    dim = 1536

    def embed(self, texts: list[str]) -> np.ndarray:
        seeds = [zlib.crc32(t.encode()) for t in texts]
        rows = np.stack([np.random.default_rng(n).normal(size=self.dim) for n in seeds])
        return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _queued(runtime: Runtime, tenant: str, count: int) -> None:
    """``count`` memories of ``tenant`` written as an import writes them: rows, and their
    index entries waiting in the outbox."""
    texts = [f"The billing service runs release {n} on host node-{n % 977}" for n in range(count)]
    with runtime.db.session() as s:
        ensure_tenant(s, tenant, "import")
        rows = [
            MemoryRow(tenant_id=tenant, scope_key=tenant, text=t, content_hash=content_hash(t))
            for t in texts
        ]
        s.add_all(rows)
        s.flush()
        s.add_all(MemoryOutbox(memory_id=r.id or 0, op="upsert") for r in rows)


def test_a_bulk_flush_settles_the_shard_on_the_way_and_leaves_it_optimised(
    runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An import used to leave every point it wrote in the shard's appendable segment: held in
    # memory by each process that opens the shard, its dense vectors searched by brute force
    # (ADR 0046, "Bulk writes"). The engine builds an HNSW graph for a segment past about
    # 10 MB of vectors: 2,500 of 1,536 dimensions.
    monkeypatch.setattr(index_outbox, "SETTLE_EVERY", 1_000)
    embedder = _Seeded()
    _queued(runtime, "acme", 2_500)
    live = _Settling(tmp_path / "live", dense_dim=embedder.dim)
    assert IndexOutbox(runtime.db, live, embedder).flush(limit=500) == 2_500
    # A live write's flush leaves the optimisation to the schedule: the dense vectors of the
    # appendable segment have no index, and are searched one by one.
    assert live.optimised_at == []
    assert live._connect().info().indexed_vectors_count == 2_500  # the sparse ones only

    _queued(runtime, "globex", 2_500)  # an import of the same texts by another tenant
    bulk = _Settling(tmp_path / "bulk", dense_dim=embedder.dim)
    assert IndexOutbox(runtime.db, bulk, embedder).flush(limit=500, bulk=True) == 2_500
    assert bulk.optimised_at == [1_000, 2_000, 2_500]  # every 1,000 entries, and at the end
    # Every point's sparse vector, and the dense vectors of the 2,000 settled on the way; the
    # last 500, too few for a graph, wait in the appendable segment as a live write's do.
    assert bulk._connect().info().indexed_vectors_count == 2_500 + 2_000
