"""Properties of private conversations (issue 16): whatever is said where, and whatever is asked
from where, no read path returns a memory learned in a DM or a private room outside it.

Each property runs on SQLite and on PostgreSQL, on real storage (the Qdrant edge engine,
qdrant-client's local mode, and the packaged embedding model in a smaller case), and checks
what comes back against the database's rows with an oracle written here (:func:`_may_see`),
apart from :func:`~cairn.memory.records.visible_to`:

1. A random world of tenants, agents, users and conversations (public channels, DMs, private
   channels, private rooms; the same conversation ids in every tenant), thousands of memories
   written through ``remember`` with retractions, widenings and narrowings along the way, then
   thousands of reads through every read path: none returns a memory the reader may not see.
2. The index alone, filtered by the rooms of a scope, returns exactly what the scope may see
   (compared with the database, lexical and dense).
3. Widening a memory to the workspace, by its author or an admin, shows it everywhere; narrowing
   hides it again; anyone else is refused and nothing changes (nor when the workspace, or the
   room, holds the text already).
4. The same text said in a DM and in a public channel is two memories; "already known" in the
   public channel never points at the DM's, whatever the DM's id (one that reads as no room or
   as the workspace, "" or "*", is refused).
5. A retraction sticks in every scope that can see the memory, rewordings included; only the
   retractor or an admin restores it, and the restore is audited.

The worlds come from seeded generators and hypothesis runs derandomised: every run makes the
same writes and reads. Its figures (memories, queries, conversations, checks, seconds) are
printed in pytest's terminal summary and recorded as junit properties.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql
from sqlmodel import col, select

from cairn.core.errors import Forbidden, InvalidInput, NotFound
from cairn.db import Database
from cairn.db.models import MemoryAudit, MemoryRow
from cairn.memory import Memory, MemoryStore, Scope, Source, Visibility, private_to, sharing
from cairn.memory.embed import Embedder, build_embedder
from cairn.memory.index import EdgeIndex, IndexedMemory, QdrantIndex, VectorIndex
from cairn.memory.periods import mentioned_periods
from cairn.memory.records import content_hash
from cairn.memory.terms import sparse_vector

TENANTS = ("acme", "globex", "initech")
AGENTS = ("ops", "review", "cairn")
USERS = ("ann", "bob", "cid", "dee", "eve")
# (channel id, private?): the same ids in every tenant, so that a leak across tenants shows.
CONVERSATIONS = (
    ("C-general", False),  # public Slack channels
    ("C-deploys", False),
    ("!lobby:example.org", False),  # a public Matrix room
    ("D-ann", True),  # DMs
    ("D-bob", True),
    ("G-oncall", True),  # a private channel
    ("!vault:example.org", True),  # a private and an encrypted Matrix room
    ("!e2e:example.org", True),
)
PRIVATE_ROOMS = tuple(c for c, private in CONVERSATIONS if private)
PUBLIC_CHANNELS = tuple(c for c, private in CONVERSATIONS if not private)
# Few words, so that texts and queries collide across conversations all the time.
VOCABULARY = (
    "deploy", "freeze", "vpn", "password", "monday", "runner",
    "backup", "cache", "pager", "rollback", "canary", "vault",
)  # fmt: skip
THREADS = ("t1", "t2", "t3")  # in every conversation: episodes of one neighbour another's
KINDS = ("fact", "fact", "fact", "decision", "episode")
ALL = 100_000  # "every one", as a limit

# Sized for a 2-core machine: the file runs in under a minute and a half on both databases.
WORLD_WRITES = 2500
QUERIES_PER_READER = 12
INDEX_QUERIES_PER_READER = 3
LOCAL_MODE_POINTS = 600
EMBEDDED_WRITES = 240
EMBEDDED_QUERIES = 240

DATABASES = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]

# Derandomised: the same examples on every run, so that a figure in a report can be reproduced.
HYPOTHESIS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# --- the oracle -----------------------------------------------------------------------------


def _may_see(scope: Scope, memory: MemoryRow | Memory) -> bool:
    """Whether ``scope`` may see ``memory``, written apart from ``visible_to``: its tenant; a
    shared memory or the agent's own; a memory of the workspace or of the scope's own private
    conversation (every conversation for an operator's view)."""
    tenant = memory.tenant_id if isinstance(memory, MemoryRow) else memory.tenant
    if tenant != scope.tenant:
        return False
    if memory.visibility == Visibility.PRIVATE.value and memory.agent != scope.agent:
        return False
    return scope.every_conversation or memory.private_to in (None, scope.private_to)


def _truth(db: Database) -> dict[int, MemoryRow]:
    """Every memory row, as the database holds it now, by id (the same order everywhere)."""
    with db.session() as s:
        rows = s.exec(select(MemoryRow).order_by(col(MemoryRow.id))).all()
        return {row.id or 0: row for row in rows}


def _scope(tenant: str, agent: str, channel: str | None, private: bool, user: str = "") -> Scope:
    """A scope in ``channel`` as the workers build it: private unless the frontend said public."""
    room = private_to(channel, [{"private": private}]) if channel else None
    return Scope(tenant, agent, channel, user or None, None, private_to=room)


def _readers() -> list[Scope]:
    """Every place a read can come from: each conversation of each tenant, for each agent, and
    a scope with no channel at all (a public one)."""
    scopes = []
    for tenant, agent in itertools.product(TENANTS, AGENTS):
        scopes.append(Scope(tenant, agent))
        scopes += [_scope(tenant, agent, c, private) for c, private in CONVERSATIONS]
    return scopes


def _operators() -> list[Scope]:
    return [Scope(t, a, every_conversation=True) for t, a in itertools.product(TENANTS, AGENTS)]


# --- the figures the lead reads -------------------------------------------------------------

Figures = dict[str, dict[str, Any]]


class _FiguresPlugin:
    """Prints each property's figures where pytest prints its summary."""

    def __init__(self, figures: Figures) -> None:
        self.figures = figures

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.figures:
            return
        terminalreporter.write_sep("-", "memory privacy properties")
        for name, counts in self.figures.items():
            terminalreporter.write_line(
                f"{name}: " + ", ".join(f"{v} {k}" for k, v in counts.items())
            )


@pytest.fixture(scope="module")
def figures(request: pytest.FixtureRequest) -> Figures:
    """Each property's figures by name and database; printed at the end of the run."""
    found: Figures = {}
    request.config.pluginmanager.register(_FiguresPlugin(found), "cairn-privacy-figures")
    return found


@dataclass
class Tally:
    """What one property did: ``memories`` written (calls of ``remember``), ``queries`` made
    (calls of a read path: recall, candidates, newest, get, an index search) and ``checks``
    passed (verdicts on one memory each: returned and allowed, or rightly left out)."""

    memories: int = 0
    queries: int = 0
    checks: int = 0
    started: float = field(default_factory=time.monotonic)

    def report(
        self, figures: Figures, record_property: Callable[[str, object], None], name: str,
        db: Database, **extra: int,
    ) -> None:  # fmt: skip
        database = "postgres" if db.engine.dialect.name == "postgresql" else "sqlite"
        counts: dict[str, object] = {
            "memories": self.memories,
            "queries": self.queries,
            "conversations": len(TENANTS) * len(CONVERSATIONS),
            "checks": self.checks,
            **extra,
            "seconds": round(time.monotonic() - self.started, 1),
        }
        figures[f"{name} [{database}]"] = counts
        for key, value in counts.items():
            record_property(key, value)


# --- storage --------------------------------------------------------------------------------


@contextlib.contextmanager
def _migrated(kind: str, folder: Path, request: pytest.FixtureRequest) -> Iterator[Database]:
    """A migrated, empty database: an SQLite file in ``folder``, or a fresh PostgreSQL one."""
    if kind == "sqlite":
        db = Database(f"sqlite:///{folder / 'cairn.db'}")
        db.migrate()
        try:
            yield db
        finally:
            db.dispose()
        return
    server: str = request.getfixturevalue("postgres_server_url")
    name = f"cairn_test_{secrets.token_hex(6)}"
    with psycopg.connect(server, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    db = Database(urlunsplit(urlsplit(server)._replace(path=f"/{name}")))
    try:
        db.migrate()
        yield db
    finally:
        db.dispose()
        with psycopg.connect(server, autocommit=True, connect_timeout=10) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _unavailable_index(folder: Path) -> EdgeIndex:
    """An edge index that cannot open: its folder would have to be inside a regular file."""
    blocker = folder / "not-a-folder"
    blocker.write_text("")
    return EdgeIndex(blocker / "index", dense_dim=None)


@pytest.fixture(params=DATABASES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    """A store on a fresh database with the edge index (lexical vectors only)."""
    with _migrated(request.param, tmp_path, request) as db:
        yield MemoryStore(db, EdgeIndex(tmp_path / "index", dense_dim=None))


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    """The packaged embedding model (all-MiniLM-L6-v2), loaded once."""
    found = build_embedder("packaged")
    assert found is not None
    return found


# --- a random world -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Said:
    """A memory the world created, where it was said and by whom."""

    memory_id: int
    scope: Scope
    author: str
    text: str
    conversation: tuple[str, bool]


@dataclass
class World:
    """A database full of memories said everywhere, and what was done to write it."""

    db: Database
    store: MemoryStore
    folder: Path
    tally: Tally
    acts: dict[str, int]
    wrong_answers: list[str]


def _text(rnd: random.Random, words: list[str] | None = None) -> str:
    """A text of vocabulary words, in any order, case and final punctuation."""
    words = words or rnd.sample(VOCABULARY, rnd.randint(1, 4))
    text = " ".join(w.upper() if rnd.random() < 0.1 else w for w in words)
    return text[0].upper() + text[1:] + rnd.choice(("", ".", "!", "?"))


def _query(rnd: random.Random, aimed_at: list[str]) -> str:
    """A query: mostly the text (or some words) of a memory private to some conversation."""
    roll = rnd.random()
    if roll < 0.35 and aimed_at:
        return rnd.choice(aimed_at)
    if roll < 0.5 and aimed_at:
        words = rnd.choice(aimed_at).split()
        return " ".join(rnd.sample(words, max(1, len(words) - 1)))
    words = " ".join(rnd.sample(VOCABULARY, rnd.randint(1, 3)))
    if roll < 0.6:
        return f"what did we say about {words} in {rnd.choice(('March', 'June', 'October'))} 2025"
    return words


def _assert_sees(scope: Scope, memory: Memory) -> None:
    assert _may_see(scope, memory), f"{scope} was given memory #{memory.id}: {memory}"
    if scope.private_to is None and not scope.every_conversation:
        assert memory.private_to is None, (scope, memory)


def _remember(
    store: MemoryStore,
    rnd: random.Random,
    tally: Tally,
    *,
    text: str | None = None,
    tenant: str | None = None,
    conversation: tuple[str, bool] | None = None,
    flush: bool = True,
) -> Said | None:
    """Someone says something somewhere (``text``, in ``tenant`` and ``conversation`` when
    given); what ``remember`` answers is checked. Returns the memory when it is new."""
    channel, private = conversation or rnd.choice(CONVERSATIONS)
    tenant, agent, user = tenant or rnd.choice(TENANTS), rnd.choice(AGENTS), rnd.choice(USERS)
    thread = rnd.choice(THREADS)
    room = private_to(channel, [{"private": private}])
    scope = Scope(tenant, agent, channel, user, thread, private_to=room)
    when = None
    if rnd.random() < 0.3:  # an imported conversation, dated
        when = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(days=rnd.randrange(365))
    done = store.remember(
        text or _text(rnd),
        scope,
        kind=rnd.choice(KINDS),
        visibility=rnd.choice((Visibility.PRIVATE, Visibility.TEAM, Visibility.TEAM)),
        source=Source(platform="slack", channel=channel, thread=thread, author=user),
        created_at=when,
        flush=flush,
    )
    tally.memories += 1
    tally.checks += 1
    # New, known or merged into, what a write answers is something its scope may see.
    _assert_sees(scope, done.memory)
    if done.merged:  # folded only into a memory of the same conversation
        assert done.memory.private_to == room
    if not done.created:
        return None
    assert done.memory.private_to == room
    return Said(done.memory.id, scope, user, done.memory.text, (channel, private))


def _build_world(
    store: MemoryStore, rnd: random.Random, writes: int, tally: Tally, wrong: list[str]
) -> dict[str, int]:
    """``writes`` acts: mostly ``remember``, with retractions, widenings and narrowings (across
    conversations), and shares and unshares (across agents), interleaved.

    A write that answers with a memory its scope may not see is added to ``wrong``: property 1
    fails on it after its reads (so that a broken read path shows in the reads first).
    """
    said: list[Said] = []
    private: list[Said] = []
    widened: list[Said] = []
    shared: list[Said] = []
    acts = {"retracted": 0, "widened": 0, "narrowed": 0, "shared": 0, "unshared": 0}
    for _ in range(writes):
        roll = rnd.random()
        if said and roll < 0.04:
            act = rnd.choice(said)
            store.retract(act.memory_id, act.scope, by=act.author)
            acts["retracted"] += 1
        elif private and roll < 0.08:
            act = rnd.choice(private)
            with contextlib.suppress(InvalidInput):  # retracted, widened already, or a twin
                sharing.widen(store, act.memory_id, act.scope, by=act.author)
                acts["widened"] += 1
                widened.append(act)
        elif widened and roll < 0.10:
            act = widened.pop(rnd.randrange(len(widened)))
            with contextlib.suppress(InvalidInput):  # the room has the same text again
                sharing.narrow(store, act.memory_id, act.scope, by=act.author)
                acts["narrowed"] += 1
        elif said and roll < 0.14:
            act = rnd.choice(said)
            # Not the agent's private memory (any more), retracted, or the team has it.
            with contextlib.suppress(InvalidInput, NotFound):
                sharing.share(store, act.memory_id, act.scope, by=act.author)
                acts["shared"] += 1
                shared.append(act)
        elif shared and roll < 0.16:
            act = shared.pop(rnd.randrange(len(shared)))
            with contextlib.suppress(InvalidInput):  # widened or narrowed since
                sharing.unshare(store, act.memory_id, act.scope, by=act.author)
                acts["unshared"] += 1
        else:
            # Most writes leave the index to the next flush, as a bulk load does; every act
            # but ``remember`` flushes, and so does one write in ten.
            try:
                new = _remember(store, rnd, tally, flush=rnd.random() < 0.1)
            except AssertionError as exc:
                wrong.append(str(exc))
                continue
            if new is not None:
                said.append(new)
                if new.scope.private_to is not None:
                    private.append(new)
    store.flush_outbox()
    return acts


@pytest.fixture(scope="module", params=DATABASES)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    """One random world per database, read by properties 1 and 2."""
    folder = tmp_path_factory.mktemp(f"world-{request.param}")
    with _migrated(request.param, folder, request) as db:
        store = MemoryStore(db, EdgeIndex(folder / "index", dense_dim=None))
        tally, wrong = Tally(), []
        acts = _build_world(store, random.Random(16), WORLD_WRITES, tally, wrong)
        assert store.pending_outbox() == 0
        yield World(db, store, folder, tally, acts, wrong)


# --- property 1: no read path leaks ---------------------------------------------------------


def _check_reads(
    store: MemoryStore,
    scope: Scope,
    query: str,
    truth: dict[int, MemoryRow],
    tally: Tally,
    seen: dict[str, int],
    *,
    degraded: bool = False,
) -> None:
    """Recall, and the raw candidates it starts from, for ``query`` in ``scope``, checked."""
    tally.queries += 2
    for found in store.recall(query, scope, 10):
        memory = found.memory
        _assert_sees(scope, memory)
        assert not memory.retracted
        seen["own room" if memory.private_to else "workspace"] += 1
        tally.checks += 1
    proposed = store.candidates(query, scope, 50)
    assert proposed.degraded is degraded
    for memory_id, _ in [*proposed.lexical, *proposed.dense]:
        row = truth[memory_id]
        assert _may_see(scope, row), f"{scope} was proposed {row}"
        assert not row.retracted
        tally.checks += 1


def test_no_read_from_a_conversation_returns_a_memory_private_to_another(
    world: World, figures: Figures, record_property: Callable[[str, object], None]
) -> None:
    truth = _truth(world.db)
    rows = sorted(truth)
    private_ids = [i for i in rows if truth[i].private_to is not None]
    aimed_at = [truth[i].text for i in private_ids if not truth[i].retracted]
    assert private_ids  # memories of both kinds: the property can fail
    assert len(private_ids) < len(rows)
    tally = Tally()
    # The lexical scan of the database: with no index, and with one that does not open.
    fallbacks = [
        MemoryStore(world.db, None),
        MemoryStore(world.db, _unavailable_index(world.folder)),
    ]
    seen = {"own room": 0, "workspace": 0}
    from_public = 0
    rnd = random.Random(1616)
    for scope in [*_readers(), *_operators()]:
        asked = tally.queries
        expected = {i for i, row in truth.items() if _may_see(scope, row)}
        newest = world.store.newest(scope, limit=ALL, include_retracted=True)
        assert {m.id for m in newest} == expected, scope
        tally.queries += 1
        tally.checks += len(truth)
        for n in range(0 if scope.every_conversation else QUERIES_PER_READER):
            query = _query(rnd, aimed_at)
            _check_reads(world.store, scope, query, truth, tally, seen)
            if n % 3 == 0:
                for fallback in fallbacks:
                    _check_reads(fallback, scope, query, truth, tally, seen, degraded=True)
            for memory_id in [*rnd.sample(private_ids, 3), *rnd.sample(rows, 2)]:
                assert (world.store.get(memory_id, scope) is not None) == (memory_id in expected)
                tally.queries += 1
                tally.checks += 1
        if scope.private_to is None and not scope.every_conversation:
            from_public += tally.queries - asked
    # Reads found memories of both kinds: the filters did not pass by hiding everything.
    assert seen["own room"] > 0, seen
    assert seen["workspace"] > 0, seen
    # And no write answered with a memory its scope may not see ("already known").
    assert world.wrong_answers == [], world.wrong_answers[:3]
    tally.memories = world.tally.memories
    tally.report(
        figures, record_property, "1. reads from every conversation", world.db,
        queries_from_public_scopes=from_public, rows=len(truth), private_rows=len(private_ids),
        **world.acts,
    )  # fmt: skip


@pytest.mark.parametrize("kind", DATABASES)
def test_recall_with_embeddings_stays_in_its_conversation(
    kind: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    embedder: Embedder,
    figures: Figures,
    record_property: Callable[[str, object], None],
) -> None:
    """Property 1 in a smaller world with the real embedder: dense candidates, near-duplicate
    merges and the neighbours of episodes stay within what the scope may see."""
    with _migrated(kind, tmp_path, request) as db:
        index = EdgeIndex(tmp_path / "index", dense_dim=embedder.dim)
        store = MemoryStore(db, index, embedder=embedder)
        tally = Tally()
        rnd = random.Random(61)
        said: list[Said] = []
        for _ in range(EMBEDDED_WRITES):
            if said and rnd.random() < 0.4:
                # The same words again, in the same tenant, in the same or another
                # conversation: near-duplicates to merge, but only within a conversation.
                before = rnd.choice(said)
                new = _remember(
                    store, rnd, tally,
                    text=" ".join(reversed(before.text.split())),
                    tenant=before.scope.tenant,
                    conversation=rnd.choice((before.conversation, rnd.choice(CONVERSATIONS))),
                )  # fmt: skip
            else:
                new = _remember(store, rnd, tally)
            said += [new] if new is not None else []
        truth = _truth(db)
        aimed_at = [r.text for r in truth.values() if r.private_to and not r.retracted]
        readers = _readers()
        seen = {"own room": 0, "workspace": 0}
        dense = 0
        for _ in range(EMBEDDED_QUERIES):
            scope, query = rnd.choice(readers), _query(rnd, aimed_at)
            _check_reads(store, scope, query, truth, tally, seen)
            dense += len(store.candidates(query, scope, 20).dense)
            tally.queries += 1
        assert dense > 0  # the dense path was taken
        assert seen["own room"] > 0, seen
        assert seen["workspace"] > 0, seen
        merges = sum(row.merges for row in truth.values())
        assert merges > 0
        tally.report(
            figures, record_property, "1b. reads with the embedder", db,
            rows=len(truth), merges=merges, dense_candidates=dense,
        )  # fmt: skip


# --- property 2: the index's room filter ----------------------------------------------------


def _indexed(rows: list[MemoryRow], dim: int, rng: np.random.Generator) -> list[IndexedMemory]:
    """The index entries of ``rows``, with random dense vectors of ``dim``."""
    vectors = rng.normal(size=(len(rows), dim))
    return [
        IndexedMemory(
            row.id or 0,
            row.text,
            row.tenant_id,
            row.agent,
            row.visibility,
            vector=[float(x) for x in vector],
            created_at=row.created_at,
            private_to=row.private_to,
        )
        for row, vector in zip(rows, vectors, strict=True)
    ]


def test_the_index_filtered_by_rooms_returns_exactly_what_the_scope_may_see(
    world: World,
    tmp_path: Path,
    figures: Figures,
    record_property: Callable[[str, object], None],
) -> None:
    truth = _truth(world.db)
    live = [row for row in truth.values() if not row.retracted]
    rng = np.random.default_rng(16)
    dim = 8
    edge = EdgeIndex(tmp_path / "edge", dense_dim=dim)
    edge.upsert(_indexed(live, dim, rng))
    # Local mode searches in Python, point by point: a sample of the world keeps it quick.
    sample = random.Random(3).sample(live, min(len(live), LOCAL_MODE_POINTS))
    local = QdrantIndex(path=tmp_path / "local", dense_dim=dim)
    local.upsert(_indexed(sample, dim, rng))
    assert world.store.index is not None
    # (the index, the memories it holds, whether it has dense vectors, queries per reader)
    indexes: list[tuple[VectorIndex, list[MemoryRow], bool, int]] = [
        (world.store.index, live, False, 2),  # the edge index the outbox wrote, lexical only
        (edge, live, True, 1),
        (local, sample, True, 1),
    ]
    terms_of = {row.id: set(sparse_vector(row.text)[0]) for row in live}
    created = {row.id: row.created_at for row in live}
    aimed_at = [row.text for row in live if row.private_to]
    tally = Tally()
    rnd = random.Random(2)
    for index, rows, dense, rounds in indexes:
        k = len(rows)
        for scope in [*_readers(), *_operators()]:
            visible = {row.id for row in rows if _may_see(scope, row)}
            for _ in range(rounds * INDEX_QUERIES_PER_READER):
                query = _query(rnd, aimed_at)
                wanted = set(sparse_vector(query)[0])
                expected = {i for i in visible if terms_of[i] & wanted}
                hits = index.search(query, scope.tenant, scope.agent, k, rooms=scope.rooms)
                assert {mid for mid, _ in hits} == expected, scope
                tally.queries += 1
                tally.checks += k
                periods = mentioned_periods(query)
                if periods:
                    within = index.search(
                        query, scope.tenant, scope.agent, k, rooms=scope.rooms, periods=periods
                    )
                    dated = {i for i in expected if any(created[i] in p for p in periods)}
                    assert {mid for mid, _ in within} == dated, scope
                    tally.queries += 1
                    tally.checks += k
                if dense:
                    vector = [float(x) for x in rng.normal(size=dim)]
                    near = index.search_dense(
                        vector, scope.tenant, scope.agent, k, rooms=scope.rooms
                    )
                    assert {mid for mid, _ in near} == visible, scope
                    tally.queries += 1
                    tally.checks += k
    tally.memories = len(live)
    tally.report(figures, record_property, "2. the index alone", world.db, indexes=len(indexes))


# --- property 3: widening and narrowing ------------------------------------------------------


def _state(store: MemoryStore, memory_id: int) -> tuple[object, ...]:
    """All that says who sees a memory, and the number of acts recorded on it."""
    with store.db.session() as s:
        row = s.get(MemoryRow, memory_id)
        assert row is not None
        acts = s.exec(select(MemoryAudit).where(MemoryAudit.memory_id == memory_id)).all()
        return (
            row.private_to, row.scope_key, row.visibility, row.agent, row.retracted,
            row.updated_at, len(acts),
        )  # fmt: skip


def _in_workspace(
    store: MemoryStore, tenant: str, agent: str, visibility: Visibility, text: str
) -> bool:
    """Whether the workspace holds ``text`` in the partition a write of ``agent`` with
    ``visibility`` goes to."""
    owner = agent if visibility is Visibility.PRIVATE else None
    with store.db.session() as s:
        found = s.exec(
            select(MemoryRow.id).where(
                MemoryRow.tenant_id == tenant,
                MemoryRow.content_hash == content_hash(text),
                col(MemoryRow.private_to).is_(None),
                MemoryRow.visibility == visibility.value,
                MemoryRow.agent == owner if owner else col(MemoryRow.agent).is_(None),
            )
        ).first()
    return found is not None


def _found_anywhere(store: MemoryStore, memory_id: int, text: str, scope: Scope) -> list[str]:
    """The read paths on which ``scope`` finds ``memory_id``."""
    paths = []
    if store.get(memory_id, scope) is not None:
        paths.append("get")
    if memory_id in {m.id for m in store.newest(scope, limit=ALL)}:
        paths.append("newest")
    if memory_id in {r.memory.id for r in store.recall(text, scope, 10, touch=False)}:
        paths.append("recall")
    assert store.index is not None
    hits = store.index.search(text, scope.tenant, scope.agent, 1000, rooms=scope.rooms)
    if memory_id in {mid for mid, _ in hits}:
        paths.append("index")
    return paths


@dataclass(frozen=True, slots=True)
class Widening:
    """A memory said in a private room, and who tries to widen it, from where it is read."""

    tenant: str
    agent: str
    room: str
    author: str
    other: str
    visibility: Visibility
    words: list[str]
    unique: bool
    by_admin: bool
    reader_agent: str
    public: str | None
    also_public: bool
    again_in_room: bool


WIDENINGS = st.builds(
    Widening,
    tenant=st.sampled_from(TENANTS),
    agent=st.sampled_from(AGENTS),
    room=st.sampled_from(PRIVATE_ROOMS),
    author=st.sampled_from(USERS),
    other=st.sampled_from(USERS),
    visibility=st.sampled_from((Visibility.PRIVATE, Visibility.TEAM)),
    words=st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=3, unique=True),
    unique=st.booleans(),
    by_admin=st.booleans(),
    reader_agent=st.sampled_from(AGENTS),
    public=st.sampled_from((*PUBLIC_CHANNELS, None)),
    also_public=st.booleans(),
    again_in_room=st.booleans(),
)


def test_widening_shows_a_memory_everywhere_and_narrowing_hides_it_again(
    store: MemoryStore, figures: Figures, record_property: Callable[[str, object], None]
) -> None:
    tally = Tally()
    serial = itertools.count()
    outcomes = {
        "widened": 0,
        "widening refused: a twin in the workspace": 0,
        "narrowing refused: the room has it again": 0,
    }

    @settings(HYPOTHESIS, max_examples=80)
    @given(case=WIDENINGS)
    def check(case: Widening) -> None:
        text = " ".join(case.words) + (f" ticket{next(serial)}" if case.unique else "")
        home = Scope(case.tenant, case.agent, case.room, case.author, "t1", private_to=case.room)
        said = store.remember(
            text, home, visibility=case.visibility, source=Source(author=case.author)
        )
        memory = said.memory
        tally.memories += 1
        assert memory.private_to == case.room
        author = memory.author  # an earlier example may have said it first, someone else
        other = case.other if case.other != author else next(u for u in USERS if u != author)
        public = _scope(case.tenant, case.reader_agent, case.public, private=False)
        elsewhere_room = next(r for r in PRIVATE_ROOMS if r != case.room)
        elsewhere = _scope(case.tenant, case.agent, elsewhere_room, private=True)
        may_read = case.visibility is Visibility.TEAM or case.reader_agent == case.agent
        for scope in (public, elsewhere):
            assert _found_anywhere(store, memory.id, text, scope) == []
            tally.queries += 4

        before = _state(store, memory.id)
        with pytest.raises(Forbidden):
            sharing.widen(store, memory.id, home, by=other)
        with pytest.raises(NotFound):  # from a conversation that cannot see it
            sharing.widen(store, memory.id, elsewhere, by=author)
        assert _state(store, memory.id) == before
        tally.checks += 3 + 8

        if case.also_public:  # someone says it in a public channel too
            said_there = Scope(case.tenant, case.agent, PUBLIC_CHANNELS[0], "dee", "t2")
            store.remember(text, said_there, visibility=case.visibility)
            tally.memories += 1
            before = _state(store, memory.id)
        by, admin = (other, True) if case.by_admin else (author, False)
        if _in_workspace(store, case.tenant, case.agent, case.visibility, text):
            # The workspace has the text already: widening would make two of it. Refused.
            with pytest.raises(InvalidInput):
                sharing.widen(store, memory.id, home, by=by, admin=admin)
            assert _state(store, memory.id) == before
            outcomes["widening refused: a twin in the workspace"] += 1
            return
        widened = sharing.widen(store, memory.id, home, by=by, admin=admin)
        outcomes["widened"] += 1
        assert widened.private_to is None
        assert {"get", "newest", "index"} <= set(_found_anywhere(store, memory.id, text, elsewhere))
        if may_read:
            assert {"get", "newest", "index"} <= set(
                _found_anywhere(store, memory.id, text, public)
            )
        tally.queries += 8

        widened_state = _state(store, memory.id)
        if case.again_in_room:
            # Said in the room again: the room's partition is free, so the room gets a memory
            # of its own; narrowing would make two of it there. Refused, and nothing changes.
            again = store.remember(
                text, replace(home, user="eve"), visibility=case.visibility,
                source=Source(author="eve"),
            )  # fmt: skip
            tally.memories += 1
            assert again.created
            assert again.memory.private_to == case.room
            with pytest.raises(InvalidInput):
                sharing.narrow(store, memory.id, home, by=by, admin=admin)
            assert _state(store, memory.id) == widened_state
            outcomes["narrowing refused: the room has it again"] += 1
            return
        third = next(u for u in USERS if u != by)
        with pytest.raises(Forbidden):
            sharing.narrow(store, memory.id, home, by=third)
        assert _state(store, memory.id) == widened_state
        narrowed = sharing.narrow(store, memory.id, home, by=by, admin=admin)
        assert narrowed.private_to == case.room
        for scope in (public, elsewhere):
            assert _found_anywhere(store, memory.id, text, scope) == []
            tally.queries += 4
        acts = [(e.action, e.actor) for e in sharing.history(store, memory.id, home)]
        assert acts[-2:] == [("widen", by), ("narrow", by)]
        tally.checks += 20

    check()
    assert all(outcomes.values()), outcomes
    tally.report(figures, record_property, "3. widen and narrow", store.db, **outcomes)


# --- property 4: dedupe across conversations -------------------------------------------------


@dataclass(frozen=True, slots=True)
class SaidTwice:
    """The same text said in a private room and in a public channel, in either order."""

    tenant: str
    agent: str
    visibility: Visibility
    room: str
    public: str
    words: list[str]
    unique: bool
    room_first: bool


# Conversation ids as frontends could send them, the odd ones included.
ROOM_IDS = st.one_of(
    st.sampled_from(PRIVATE_ROOMS),
    st.sampled_from(("*", "", " ", "C-general", "acme|*")),
    st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=12),
)

SAID_TWICE = st.builds(
    SaidTwice,
    tenant=st.sampled_from(TENANTS),
    agent=st.sampled_from(AGENTS),
    visibility=st.sampled_from((Visibility.PRIVATE, Visibility.TEAM)),
    room=ROOM_IDS,
    public=st.sampled_from(PUBLIC_CHANNELS),
    words=st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=3, unique=True),
    unique=st.booleans(),
    room_first=st.booleans(),
)


def test_the_same_text_in_a_dm_and_a_public_channel_is_two_memories(
    store: MemoryStore, figures: Figures, record_property: Callable[[str, object], None]
) -> None:
    tally = Tally()
    serial = itertools.count()
    outcomes = {"new in public": 0, "known in public": 0, "rooms refused": 0}

    @settings(HYPOTHESIS, max_examples=80)
    @given(case=SAID_TWICE)
    def check(case: SaidTwice) -> None:
        try:
            room = Scope(case.tenant, case.agent, case.room, "ann", "t1", private_to=case.room)
        except InvalidInput:
            # A room id that would read as no room, or as the workspace: refused (fail closed).
            assert case.room in ("", "*")
            outcomes["rooms refused"] += 1
            return
        public = Scope(case.tenant, case.agent, case.public, "bob", "t1")
        text = " ".join(case.words) + (f" ticket{next(serial)}" if case.unique else "")
        restated = text.upper() + "."
        known = _in_workspace(store, case.tenant, case.agent, case.visibility, text)
        order = [(room, text), (public, restated)]
        if not case.room_first:
            order.reverse()
        said = {
            scope.private_to: store.remember(t, scope, visibility=case.visibility)
            for scope, t in order
        }
        tally.memories += 2
        in_room, in_public = said[case.room], said[None]
        assert in_room.memory.private_to == case.room
        assert in_public.memory.private_to is None
        assert in_public.memory.id != in_room.memory.id
        assert in_public.created is not known
        outcomes["known in public" if known else "new in public"] += 1
        # The room's memory stays out of the public channel, on every path.
        assert _found_anywhere(store, in_room.memory.id, text, public) == []
        # Said again: each conversation finds its own.
        elsewhere = next(c for c in PUBLIC_CHANNELS if c != case.public)
        again = store.remember(
            restated, Scope(case.tenant, case.agent, elsewhere, "cid", "t2"),
            visibility=case.visibility,
        )  # fmt: skip
        assert (again.created, again.memory.id) == (False, in_public.memory.id)
        again = store.remember(text, room, visibility=case.visibility)
        assert (again.created, again.memory.id) == (False, in_room.memory.id)
        tally.memories += 2
        tally.queries += 4
        tally.checks += 10

    check()
    assert outcomes["new in public"] > 0, outcomes
    tally.report(figures, record_property, "4. dedupe across conversations", store.db, **outcomes)


# --- property 5: a retraction sticks ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Retraction:
    """A memory said and retracted, said again elsewhere by someone else, then restored."""

    tenant: str
    agent: str
    visibility: Visibility
    room: str | None
    author: str
    retractor: str
    other: str
    again_agent: str
    again_room: str | None
    again_visibility: Visibility
    rewording: str
    words: list[str]
    by_admin: bool


_ROOMS_OR_NONE = st.sampled_from((None, *PRIVATE_ROOMS[:3]))

RETRACTIONS = st.builds(
    Retraction,
    tenant=st.sampled_from(TENANTS),
    agent=st.sampled_from(AGENTS),
    visibility=st.sampled_from((Visibility.PRIVATE, Visibility.TEAM)),
    room=_ROOMS_OR_NONE,
    author=st.sampled_from(USERS),
    retractor=st.sampled_from(USERS),
    other=st.sampled_from(USERS),
    again_agent=st.sampled_from(AGENTS),
    again_room=_ROOMS_OR_NONE,
    again_visibility=st.sampled_from((Visibility.PRIVATE, Visibility.TEAM)),
    rewording=st.sampled_from(("same", "re-cased", "reordered", "punctuated")),
    words=st.lists(st.sampled_from(VOCABULARY), min_size=2, max_size=4, unique=True),
    by_admin=st.booleans(),
)


def _reworded(text: str, how: str) -> str:
    if how == "re-cased":
        return text.swapcase()
    if how == "reordered":
        return " ".join(reversed(text.split()))
    if how == "punctuated":
        return f"  {text}!! "
    return text


def _restores(store: MemoryStore, memory_id: int) -> list[tuple[str, str]]:
    with store.db.session() as s:
        acts = s.exec(
            select(MemoryAudit)
            .where(MemoryAudit.memory_id == memory_id, MemoryAudit.action == "restore")
            .order_by(col(MemoryAudit.id))
        ).all()
        return [(a.action, a.actor) for a in acts]


def test_a_retraction_sticks_and_only_the_retractor_or_an_admin_restores(
    store: MemoryStore, figures: Figures, record_property: Callable[[str, object], None]
) -> None:
    tally = Tally()
    serial = itertools.count()
    outcomes = {"said again where seen": 0, "said again where unseen": 0}

    @settings(HYPOTHESIS, max_examples=80)
    @given(case=RETRACTIONS)
    def check(case: Retraction) -> None:
        # A word of its own, so that no other example's memory says the same words.
        text = " ".join([*case.words, f"case{next(serial)}"])
        home = Scope(
            case.tenant, case.agent, case.room or "C-general", case.author, "t1",
            private_to=case.room,
        )  # fmt: skip
        said = store.remember(
            text, home, visibility=case.visibility, source=Source(author=case.author)
        )
        assert said.created
        memory = store.retract(said.memory.id, home, by=case.retractor)
        other = case.other if case.other != case.retractor else (
            next(u for u in USERS if u != case.retractor)
        )  # fmt: skip
        again = Scope(
            case.tenant, case.again_agent, case.again_room or "C-deploys", other, "t2",
            private_to=case.again_room,
        )  # fmt: skip
        restated = store.remember(
            _reworded(text, case.rewording), again, visibility=case.again_visibility,
            source=Source(author=other),
        )  # fmt: skip
        tally.memories += 2
        if _may_see(again, memory):
            outcomes["said again where seen"] += 1
            assert not restated.created
            assert (restated.memory.id, restated.memory.retracted) == (memory.id, True)
        else:
            # Unseen there, so it cannot stick there: a memory of that conversation's own.
            outcomes["said again where unseen"] += 1
            assert restated.created
            assert restated.memory.id != memory.id
            _assert_sees(again, restated.memory)
        still = store.get(memory.id, home)
        assert still is not None
        assert still.retracted

        with pytest.raises(Forbidden):
            store.restore(memory.id, home, by=other)
        by, admin = (other, True) if case.by_admin else (case.retractor, False)
        blind = Scope(next(t for t in TENANTS if t != case.tenant), case.agent)
        with pytest.raises(NotFound):  # from another tenant, even an admin
            store.restore(memory.id, blind, by=by, admin=True)
        if case.room is not None:  # from another private conversation: not found either
            room = next(r for r in PRIVATE_ROOMS if r != case.room)
            elsewhere = replace(home, channel=room, private_to=room)
            with pytest.raises(NotFound):
                store.restore(memory.id, elsewhere, by=by, admin=True)
        still = store.get(memory.id, home)
        assert still is not None
        assert still.retracted
        assert _restores(store, memory.id) == []

        restored = store.restore(memory.id, home, by=by, admin=admin)
        assert not restored.retracted
        assert _restores(store, memory.id) == [("restore", by)]
        tally.queries += 4
        tally.checks += 12

    check()
    assert all(outcomes.values()), outcomes
    tally.report(figures, record_property, "5. retractions stick", store.db, **outcomes)
