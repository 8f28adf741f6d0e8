"""Long-term memory on real SQLite and real Qdrant local mode: scopes, dedupe, tombstones,
the index outbox, and lexical fallback when the vector store is down."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cairn.core.errors import InvalidInput, NotFound
from cairn.core.gate import gate
from cairn.db import Database
from cairn.memory import MemoryStore, Scope, Source, Visibility
from cairn.memory.index import QdrantIndex
from cairn.memory.records import MAX_WRITE_CHARS
from cairn.runtime import Runtime

OPS = Scope("acme", "ops", "C1", "ann", "t1")
REVIEW = Scope("acme", "review", "C2", "bob", "t2")
OTHER_TENANT = Scope("globex", "ops", "C1", "ann", "t1")


@pytest.fixture
def store(runtime: Runtime) -> MemoryStore:
    return runtime.memory


def test_a_memory_is_recalled_by_relevance_in_another_thread(store: MemoryStore) -> None:
    store.remember("Deploys are frozen until Monday", OPS, source=Source(author="ann"))
    store.remember("The VPN endpoint is vpn.acme.test", OPS)
    found = store.recall("are deploys frozen?", Scope("acme", "ops", "C9", "cy", "t9"))
    assert [r.memory.text for r in found][:1] == ["Deploys are frozen until Monday"]


def test_no_query_returns_another_tenants_memory(store: MemoryStore) -> None:
    store.remember(
        "globex secret project name is Falcon", OTHER_TENANT, visibility=Visibility.PUBLIC
    )
    assert store.recall("globex secret project Falcon", OPS) == []
    assert store.newest(OPS) == []
    assert store.get(1, OPS) is None


def test_private_memories_stay_with_their_agent_and_team_ones_are_shared(
    store: MemoryStore,
) -> None:
    store.remember("ops prefers blue-green deploys", OPS)
    store.remember("the team standup is at 9:30", OPS, visibility=Visibility.TEAM)
    seen_by_review = [r.memory.text for r in store.recall("deploys standup", REVIEW)]
    assert seen_by_review == ["the team standup is at 9:30"]
    assert len(store.recall("deploys standup", OPS)) == 2


def test_duplicates_merge_into_one_memory(store: MemoryStore) -> None:
    first = store.remember("Staging DB is db-stg-1", OPS)
    again = store.remember("  staging db is DB-STG-1. ", OPS)
    assert first.created
    assert not again.created
    assert again.memory.id == first.memory.id
    assert len(store.newest(OPS)) == 1


def test_a_retracted_memory_is_never_recalled_but_kept_for_audit(store: MemoryStore) -> None:
    memory = store.remember("the on-call phone is 555-0100", OPS).memory
    store.retract(memory.id, OPS, by="ann", reason="number changed")
    assert store.recall("on-call phone", OPS) == []
    [kept] = store.newest(OPS, include_retracted=True)
    assert kept.retracted
    assert kept.text == memory.text


def test_retracting_outside_the_scope_is_not_found(store: MemoryStore) -> None:
    memory = store.remember("ops-only fact about canaries", OPS).memory
    with pytest.raises(NotFound):
        store.retract(memory.id, OTHER_TENANT, by="mallory")
    with pytest.raises(NotFound):
        store.retract(memory.id, REVIEW, by="bob")
    assert store.recall("canaries", OPS)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "empty"),
        ("\x00\x01  ", "control characters"),
        ("x" * (MAX_WRITE_CHARS + 1), "at most"),
    ],
)
def test_bad_memories_are_refused_with_a_clear_error(
    store: MemoryStore, text: str, error: str
) -> None:
    with pytest.raises(InvalidInput, match=error):
        store.remember(text, OPS)
    assert store.newest(OPS) == []


def test_an_unknown_kind_is_refused(store: MemoryStore) -> None:
    with pytest.raises(InvalidInput, match="unknown memory kind"):
        store.remember("x", OPS, kind="gossip")


def test_a_dead_vector_store_degrades_to_lexical_recall_and_the_outbox_replays(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = Database(f"sqlite:///{tmp_path / 'm.db'}")
    db.migrate()
    dead = MemoryStore(db, QdrantIndex(url="http://127.0.0.1:9", timeout=1))
    dead.remember("the release train leaves on Thursdays", OPS)
    assert dead.pending_outbox() == 1
    with caplog.at_level("WARNING"):
        found = dead.recall("when does the release train leave?", OPS)
    assert [r.memory.text for r in found] == ["the release train leaves on Thursdays"]
    assert "lexical" in caplog.text

    alive = MemoryStore(db, QdrantIndex(path=tmp_path / "q"))
    assert alive.flush_outbox() == 1
    assert alive.pending_outbox() == 0
    assert alive.index is not None
    assert alive.index.search("release train", "acme", "ops", 5)


def test_lexical_recall_keeps_each_scope_to_what_it_may_see(tmp_path: Path) -> None:
    # One store serves every scope, and its lexical statements are built once per tenant and
    # agent: asked by several, each still sees only its own and the shared memories.
    db = Database(f"sqlite:///{tmp_path / 'm.db'}")
    db.migrate()
    dead = MemoryStore(db, QdrantIndex(url="http://127.0.0.1:9", timeout=1))
    written = [
        dead.remember("the ops runbook lives in the wiki", OPS),
        dead.remember("the team runbook lives in git", OPS, visibility=Visibility.TEAM),
        dead.remember(
            "the globex runbook lives on paper", OTHER_TENANT, visibility=Visibility.PUBLIC
        ),
    ]
    texts = {w.memory.id: w.memory.text for w in written}
    asked = {
        "ops": OPS,
        "ops in another thread": Scope("acme", "ops", "C9", "cy", "t9"),
        "review": REVIEW,
        "globex": OTHER_TENANT,
    }
    # The candidates themselves, not only recall (which re-reads them through visible_to).
    proposed = {
        name: sorted(
            texts[i] for i, _ in dead.candidates("where is the runbook", scope, 10).lexical
        )
        for name, scope in asked.items()
    }
    recalled = {
        name: sorted(r.memory.text for r in dead.recall("where is the runbook", scope))
        for name, scope in asked.items()
    }
    assert (
        proposed
        == recalled
        == {
            "ops": ["the ops runbook lives in the wiki", "the team runbook lives in git"],
            "ops in another thread": [
                "the ops runbook lives in the wiki",
                "the team runbook lives in git",
            ],
            "review": ["the team runbook lives in git"],
            "globex": ["the globex runbook lives on paper"],
        }
    )


def test_recall_counts_and_feedback_scores_are_kept(store: MemoryStore) -> None:
    memory = store.remember("builds run on runner-7", OPS).memory
    store.recall("runner builds", OPS)
    store.adjust(memory.id, validity=1.0, usefulness=2.0, confirmed=True)
    current = store.get(memory.id, OPS)
    assert current is not None
    assert (current.recall_count, current.validity, current.usefulness, current.confirmed) == (
        1,
        1.0,
        2.0,
        True,
    )


_names = st.text(alphabet="abcdefgh", min_size=1, max_size=4)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    tenant=_names,
    query=st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=40),
)
def test_property_no_query_crosses_tenants(store: MemoryStore, tenant: str, query: str) -> None:
    fact = f"fact of {tenant} about {query}"
    # Random text can read as a credential ("PW,0000"), which is refused, never stored: the
    # property is about what is stored.
    assume(not gate(fact).secrets)
    store.remember(fact, Scope(tenant, "ops"), visibility=Visibility.PUBLIC)
    outsider = Scope(f"x{tenant}", "ops")
    assert all(r.memory.tenant == outsider.tenant for r in store.recall(query, outsider))
    assert all(m.tenant == outsider.tenant for m in store.newest(outsider))


def test_a_recall_counts_only_the_best_it_was_asked_to_count(store: MemoryStore) -> None:
    for host in ("alpha", "bravo", "charlie", "delta"):
        store.remember(f"the staging {host} host runs the deploy queue", OPS)
    pool = store.recall("staging deploy queue host", OPS, 4, counted=1)
    assert len(pool) == 4
    counts = [store.get(r.memory.id, OPS).recall_count for r in pool]  # type: ignore[union-attr]
    assert counts == [1, 0, 0, 0]  # the pool's rest filled room: not counted as recalled
    store.recall("staging deploy queue host", OPS, 4)
    counts = [store.get(r.memory.id, OPS).recall_count for r in pool]  # type: ignore[union-attr]
    assert counts == [2, 1, 1, 1]
