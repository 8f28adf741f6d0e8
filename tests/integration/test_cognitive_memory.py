"""Cognitive memory on real storage (SQLite and PostgreSQL, Qdrant edge) with the real
embedding model: hybrid recall, dedupe and near-duplicate merges, tombstones, tiers and
garbage collection, export/import round trips."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from cairn.core.errors import InvalidInput
from cairn.core.settings import MemorySettings
from cairn.db import Database
from cairn.db.models import MemoryRow
from cairn.memory import MemoryStore, Scope, Source, Visibility, tiers
from cairn.memory.embed import build_embedder
from cairn.memory.index import EdgeIndex, QdrantIndex, port
from cairn.memory.portable import export_memories, import_memories
from cairn.memory.tiers import collect_garbage, rotate_tiers

OPS = Scope("acme", "ops", "C1", "ann", "t1")
REVIEW = Scope("acme", "review", "C2", "bob", "t2")


def _store(db: Database, folder: Path) -> MemoryStore:
    embedder = build_embedder("packaged")
    assert embedder is not None
    return MemoryStore(db, EdgeIndex(folder, dense_dim=embedder.dim), embedder=embedder)


@pytest.fixture
def store(database: Database, tmp_path: Path) -> Iterator[MemoryStore]:
    s = _store(database, tmp_path / "index")
    yield s
    assert s.index is not None
    s.index.close()


def test_dense_recall_finds_a_memory_that_shares_no_word_with_the_question(
    store: MemoryStore,
) -> None:
    store.remember("The database backups run nightly at 2am", OPS)
    store.remember("Lunch for the team is ordered on Fridays", OPS)
    store.remember("Ann owns the VPN certificates", OPS)
    question = "when are postgres snapshots taken?"
    assert store.candidates(question, OPS, 10).lexical == []
    assert store.recall(question, OPS, 1)[0].memory.text.startswith("The database backups")


def test_hybrid_recall_ranks_the_memory_both_retrievers_agree_on_first(store: MemoryStore) -> None:
    for text in (
        "Deploys are frozen until Monday",
        "The deploy pipeline runs on runner-7",
        "Monday standup moved to 10am",
        "Frozen yoghurt is in the office fridge",
    ):
        store.remember(text, OPS)
    assert store.recall("are deploys frozen right now?", OPS, 1)[0].memory.text == (
        "Deploys are frozen until Monday"
    )


def test_retracted_memories_are_never_recalled_but_kept_for_audit(store: MemoryStore) -> None:
    memory = store.remember("The on-call phone is +1 555 0100", OPS).memory
    store.retract(memory.id, OPS, by="ann", reason="number changed")
    assert store.recall("on-call phone number", OPS) == []
    kept = store.get(memory.id, OPS)
    assert kept is not None
    assert kept.retracted
    assert [m.id for m in store.newest(OPS, include_retracted=True)] == [memory.id]


def test_a_restatement_merges_into_the_existing_memory(store: MemoryStore) -> None:
    first = store.remember("Staging database is db-stg-1", OPS)
    again = store.remember("The staging database is db-stg-1 !", OPS)
    assert again.merged
    assert again.memory.id == first.memory.id
    assert again.memory.merges == 1
    assert len(store.newest(OPS)) == 1


def test_a_similar_but_different_fact_is_not_merged(store: MemoryStore) -> None:
    store.remember("Deploys are frozen until Monday", OPS)
    other = store.remember("Deploys are frozen until Tuesday", OPS)
    assert other.created
    assert not other.merged
    assert len(store.newest(OPS)) == 2


def test_episodic_turns_are_never_merged(store: MemoryStore) -> None:
    store.remember("Ann: thanks a lot!", OPS, kind="episode")
    second = store.remember("Ann: thanks a lot!!!", OPS, kind="episode")
    assert second.created is False  # the same text: exact dedupe, not a merge
    third = store.remember("Ann: thanks so much!", OPS, kind="episode")
    assert third.created


@pytest.mark.parametrize(
    ("text", "error"),
    [("", "empty"), ("bell\x07 rings", "control characters"), ("y" * 200_001, "at most")],
)
def test_invalid_memories_are_refused_with_a_clear_error(
    store: MemoryStore, text: str, error: str
) -> None:
    with pytest.raises(InvalidInput, match=error):
        store.remember(text, OPS)


def test_a_dead_vector_store_degrades_to_lexical_recall_with_a_warning(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    embedder = build_embedder("packaged")
    dead = MemoryStore(
        database, QdrantIndex(url="http://127.0.0.1:9", timeout=1, dense_dim=384), embedder=embedder
    )
    dead.remember("The release train leaves on Thursdays", OPS)
    with caplog.at_level(logging.WARNING):
        found = dead.recall("release train", OPS)
    assert [r.memory.text for r in found] == ["The release train leaves on Thursdays"]
    assert "lexically" in caplog.text
    assert dead.pending_outbox() == 1  # the index work waits for the store to come back


class _WrittenToMeanwhile(EdgeIndex):
    """An index whose first count happens while another writer adds a memory, as a worker's
    does while another process reconciles the index they share."""

    writer: MemoryStore | None = None

    def count(self) -> int:
        if self.writer is not None:
            writer, self.writer = self.writer, None
            writer.remember("The on-call phone moved to Bea", OPS, flush=False)
        return super().count()


def test_reconcile_beside_a_writer_does_not_index_everything_again(
    database: Database, tmp_path: Path
) -> None:
    # A memory written between the replay and the count is in the database and not yet in the
    # index: it used to look like a wiped index, and every memory was queued and embedded
    # again, on every start of a process beside busy workers.
    embedder = build_embedder("packaged")
    assert embedder is not None
    index = _WrittenToMeanwhile(tmp_path / "index", dense_dim=embedder.dim)
    store = MemoryStore(database, index, embedder=embedder)
    for text in ("Deploys are frozen until Monday", "Ann owns the VPN certificates"):
        store.remember(text, OPS)
    index.writer = store
    assert store.reconcile() == (0, 0)
    assert store.pending_outbox() == 1  # the new memory's own entry, nothing more
    assert store.flush_outbox() == 1
    assert index.count() == 3


def test_reconcile_refills_a_new_index_from_the_database(
    database: Database, tmp_path: Path
) -> None:
    first = _store(database, tmp_path / "a")
    first.remember("The VPN endpoint is vpn.acme.test", OPS)
    fresh = _store(database, tmp_path / "b")  # e.g. a wiped folder or a new model
    assert fresh.recall("vpn endpoint", OPS) == []  # the new index is empty
    assert fresh.reconcile() == (0, 1)
    assert fresh.index is not None
    assert fresh.index.count() == 1
    assert (
        fresh.recall("vpn endpoint", OPS, 1)[0].memory.text == "The VPN endpoint is vpn.acme.test"
    )


def _age(db: Database, memory_id: int, days: float) -> None:
    with db.session() as s:
        row = s.get(MemoryRow, memory_id)
        assert row is not None
        row.created_at = datetime.now(UTC) - timedelta(days=days)
        s.add(row)


def test_tiers_move_by_decay_as_configured(store: MemoryStore) -> None:
    fresh = store.remember("fresh fact about queues", OPS).memory
    month = store.remember("month old fact about caches", OPS).memory
    year = store.remember("year old fact about shards", OPS).memory
    _age(store.db, month.id, 45)
    _age(store.db, year.id, 400)
    policy = MemorySettings(half_life_days=30, warm_below=0.5, cold_below=0.1)
    report = rotate_tiers(store.db, "acme", policy)
    tiers = {m.id: m.tier for m in store.newest(OPS)}
    assert tiers == {fresh.id: "hot", month.id: "warm", year.id: "cold"}
    assert report.counts == {"hot": 1, "warm": 1, "cold": 1}
    # A half-life of a year keeps the 45-day-old memory hot.
    rotate_tiers(
        store.db, "acme", MemorySettings(half_life_days=365, warm_below=0.5, cold_below=0.1)
    )
    assert {m.id: m.tier for m in store.newest(OPS)}[month.id] == "hot"


def test_the_hot_budget_demotes_the_lowest_scores(store: MemoryStore) -> None:
    ids = [
        store.remember(f"budget fact number {n} about topic {n}", OPS).memory.id for n in range(4)
    ]
    for n, memory_id in enumerate(ids):
        _age(store.db, memory_id, n)  # older ones score lower
    rotate_tiers(store.db, "acme", MemorySettings(hot_budget=2, warm_budget=10))
    tiers = {m.id: m.tier for m in store.newest(OPS)}
    assert [tiers[i] for i in ids] == ["hot", "hot", "warm", "warm"]


def test_gc_tombstones_stale_cold_memories_and_keeps_confirmed_ones(store: MemoryStore) -> None:
    stale = store.remember("an old guess about the proxy", OPS).memory
    confirmed = store.remember("an old confirmed proxy rule", OPS).memory
    recent = store.remember("a recent note about the proxy", OPS).memory
    store.adjust(confirmed.id, validity=1.0, confirmed=True)
    for memory_id in (stale.id, confirmed.id):
        _age(store.db, memory_id, 800)
    policy = MemorySettings(prune_after_days=365)
    assert collect_garbage(store.db, "acme", policy, dry_run=True).pruned == 1
    assert store.get(stale.id, OPS).retracted is False  # type: ignore[union-attr]
    report = collect_garbage(store.db, "acme", policy)
    store.flush_outbox()
    assert report.pruned == 1
    pruned = store.get(stale.id, OPS)
    assert pruned is not None
    assert pruned.retracted  # a tombstone, not a delete
    assert {m.id for m in store.newest(OPS)} == {confirmed.id, recent.id}
    assert [r.memory.id for r in store.recall("old guess proxy", OPS)] != [stale.id]


def test_rotation_and_collection_write_in_short_transactions(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A home of 100,000 memories held SQLite's one write lock for the whole rotation (over
    30 s) and messages failed with "database is locked": each transaction now changes a few."""
    monkeypatch.setattr(tiers, "WRITE_CHUNK", 4, raising=False)
    ids = [store.remember(f"rotated fact {n} about topic {n}", OPS).memory.id for n in range(11)]
    for memory_id in ids:
        _age(store.db, memory_id, 800)  # cold, and stale enough to collect
    changed: list[int] = []  # memory rows changed by each write transaction
    running = [0]

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE MEMORY "):
            running[0] += max(cursor.rowcount, 0)

    def commit(conn: Any) -> None:
        if running[0]:
            changed.append(running[0])
        running[0] = 0

    event.listen(store.db.engine, "after_cursor_execute", count)
    event.listen(store.db.engine, "commit", commit)
    try:
        report = rotate_tiers(store.db, "acme", MemorySettings(half_life_days=30))
        assert report.moved["cold"] == 11
        assert changed == [4, 4, 3]
        changed.clear()
        assert collect_garbage(store.db, "acme", MemorySettings(prune_after_days=365)).pruned == 11
        assert changed == [4, 4, 3]
    finally:
        event.remove(store.db.engine, "after_cursor_execute", count)
        event.remove(store.db.engine, "commit", commit)
    store.flush_outbox()
    assert store.newest(OPS) == []  # every one tombstoned, and out of the index
    assert store.recall("rotated fact topic", OPS) == []


def test_bulk_operations_need_an_explicit_tenant(store: MemoryStore) -> None:
    with pytest.raises(InvalidInput, match="tenant"):
        list(export_memories(store.db, ""))
    with pytest.raises(InvalidInput, match="tenant"):
        rotate_tiers(store.db, "", MemorySettings())


def test_export_and_import_round_trip_losslessly(
    store: MemoryStore, database: Database, tmp_path: Path
) -> None:
    store.remember(
        "Deploys are frozen until Monday", OPS, source=Source("slack", "C1", "t1", "m1", "ann")
    )
    team = store.remember("Standup is at 9:30", OPS, visibility=Visibility.TEAM).memory
    gone = store.remember("The wiki moved", OPS).memory
    store.adjust(team.id, validity=2.0, usefulness=1.5, confirmed=True)
    store.retract(gone.id, OPS, by="ann", reason="wrong")
    store.remember("globex secret", Scope("globex", "ops"))
    exported = list(export_memories(store.db, "acme"))
    assert len(exported) == 3
    assert all("globex" not in line for line in exported)

    target = Database(f"sqlite:///{tmp_path / 'copy.db'}")
    target.migrate()
    report = import_memories(target, exported)
    assert (report.imported, report.skipped) == (3, 0)
    assert list(export_memories(target, "acme")) == exported
    assert import_memories(target, exported).skipped == 3  # nothing piles up
    copy = _store(target, tmp_path / "copy-index")
    copy.flush_outbox()
    assert copy.recall("deploy freeze", OPS, 1)[0].memory.text == "Deploys are frozen until Monday"
    assert gone.id not in {r.memory.id for r in copy.recall("the wiki moved", OPS)}
    target.dispose()


def test_import_refuses_a_malformed_line_naming_it(store: MemoryStore) -> None:
    with pytest.raises(InvalidInput, match="line 2"):
        import_memories(store.db, ['{"format": "cairn.memory/1"}'[:0] or "", "not json"])


def test_a_new_index_layout_is_filled_from_the_database_on_first_reconcile(
    database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _store(database, tmp_path)
    old.remember("The VPN endpoint is vpn.acme.test", OPS)
    assert old.index is not None
    old_place = old.index.where
    monkeypatch.setattr(port, "LAYOUT", port.LAYOUT + 1)
    upgraded = _store(database, tmp_path)  # the same folder, after an upgrade of Cairn
    assert upgraded.index is not None
    assert upgraded.index.where != old_place
    assert upgraded.reconcile() == (0, 1)
    assert upgraded.index.count() == 1
    assert upgraded.recall("vpn endpoint", OPS, 1)[0].memory.text == (
        "The VPN endpoint is vpn.acme.test"
    )
