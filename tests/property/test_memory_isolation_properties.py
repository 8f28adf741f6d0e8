"""Properties of memory scopes: whatever is stored and whatever is asked, no read path returns a
row of another tenant, nor another agent's private memory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.db import Database
from cairn.db.models import MemoryRow
from cairn.memory import MemoryStore, Scope, Visibility
from cairn.memory.embed import build_embedder
from cairn.memory.index import EdgeIndex
from cairn.memory.portable import export_memories

TENANTS = ["acme", "globex", "initech"]
AGENTS = ["ops", "review", "cairn"]
WORDS = ["deploy", "freeze", "vpn", "secret", "monday", "runner", "backup", "cache", "pager"]

_text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
_query = st.one_of(
    _text,
    st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=30),
)
_memory = st.tuples(
    st.sampled_from(TENANTS),
    st.sampled_from(AGENTS),
    st.sampled_from(list(Visibility)),
    _text,
)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryStore]:
    """One store for every example: memories pile up, which makes leaks more likely, not less."""
    folder: Path = tmp_path_factory.mktemp("isolation")
    db = Database(f"sqlite:///{folder / 'cairn.db'}")
    db.migrate()
    embedder = build_embedder("packaged")
    assert embedder is not None
    store = MemoryStore(db, EdgeIndex(folder / "index", dense_dim=embedder.dim), embedder=embedder)
    yield store
    db.dispose()


def _may_see(scope: Scope, tenant: str, agent: str | None, visibility: str) -> bool:
    return tenant == scope.tenant and (visibility != "private" or agent == scope.agent)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    memories=st.lists(_memory, min_size=1, max_size=6),
    reader=st.tuples(st.sampled_from(TENANTS), st.sampled_from(AGENTS)),
    query=_query,
)
def test_no_read_path_crosses_tenants_or_leaks_private_memories(
    shared: MemoryStore,
    memories: list[tuple[str, str, Visibility, str]],
    reader: tuple[str, str],
    query: str,
) -> None:
    for tenant, agent, visibility, text in memories:
        shared.remember(text, Scope(tenant, agent), visibility=visibility)
    scope = Scope(*reader)
    seen = [r.memory for r in shared.recall(query, scope, 20)]
    seen += shared.newest(scope, limit=500, include_retracted=True)
    seen += [m for i in range(1, 60) if (m := shared.get(i, scope)) is not None]
    for m in seen:
        assert _may_see(scope, m.tenant, m.agent, m.visibility), (scope, m)
    for line in export_memories(shared.db, scope.tenant, agent=scope.agent):
        assert f'"tenant_id": "{scope.tenant}"' in line
        assert '"visibility": "private"' not in line or f'"agent": "{scope.agent}"' in line
    found = shared.candidates(query, scope, 50)
    proposed = [mid for mid, _ in [*found.lexical, *found.dense]]
    with shared.db.session() as session:
        for mid in proposed:
            # Even the index's raw proposals stay inside the tenant and the agent's view.
            row = session.get(MemoryRow, mid)
            assert row is not None
            assert _may_see(scope, row.tenant_id, row.agent, row.visibility), (scope, row)
