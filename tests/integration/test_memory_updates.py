"""Facts that change, through the real store (SQLite and Qdrant local mode): a newer value ends
the older one, which is kept; recall ranks the current one first and answers "as of" a date;
what the model sees says when it changed; and ``cairn bench updates`` meets its targets."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from cairn.cli import main
from cairn.memory import MemoryStore, Scope, Source, Visibility
from cairn.memory.context.bands import render_memories
from cairn.runtime import Runtime
from cairn.workers.tools import Toolbox

OPS = Scope("acme", "ops", "C1", "ann", "t1")
DAY = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def store(runtime: Runtime) -> MemoryStore:
    return runtime.memory


def test_a_newer_value_ends_the_older_one_which_is_kept(store: MemoryStore) -> None:
    alice = store.remember("The on-call for payments is Alice", OPS, created_at=DAY)
    search = store.remember("The on-call for search is Carol", OPS, created_at=DAY)
    bob = store.remember("Bob is now the payments on-call", OPS, created_at=DAY + timedelta(days=7))
    assert [m.id for m in bob.superseded] == [alice.memory.id]
    old = store.get(alice.memory.id, OPS)
    assert old is not None
    assert not old.retracted
    assert old.valid_until == DAY + timedelta(days=7)
    assert old.superseded_by == bob.memory.id
    other = store.get(search.memory.id, OPS)
    assert other is not None
    assert other.valid_until is None


def test_recall_ranks_the_current_value_first_and_answers_as_of_a_date(
    store: MemoryStore,
) -> None:
    store.remember("The on-call for payments is Alice", OPS, created_at=DAY)
    store.remember("payments runs v2.3", OPS, created_at=DAY)
    store.remember("Bob is now the payments on-call", OPS, created_at=DAY + timedelta(days=7))
    store.remember("payments was bumped to v2.4", OPS, created_at=DAY + timedelta(days=9))
    now = DAY + timedelta(days=20)

    def top(query: str) -> str:
        return store.recall(query, OPS, 3, now=now, touch=False)[0].memory.text

    assert top("who is on call for payments?") == "Bob is now the payments on-call"
    assert top("who was the payments on-call on 3 November 2026?") == (
        "The on-call for payments is Alice"
    )
    assert top("what version is payments running?") == "payments was bumped to v2.4"
    assert top("which version was payments on 2026-11-09?") == "payments runs v2.3"


def test_what_the_model_sees_says_when_it_changed(store: MemoryStore) -> None:
    store.remember("The on-call for payments is Alice", OPS, created_at=DAY)
    store.remember("Bob is now the payments on-call", OPS, created_at=DAY + timedelta(days=7))
    found = store.recall("who is the payments on-call?", OPS, 2, touch=False)
    shown = render_memories(found)
    assert 'current since 2026-11-08, was #1: "The on-call for payments is Alice"' in shown
    assert 'superseded: valid until 2026-11-08, replaced by #2: "Bob is now the payments' in shown

    tools = Toolbox(store, OPS, Source(author="ann"))
    cards = json.loads(tools.run("recall", {"query": "payments on-call"}).content)["memories"]
    changes = {card["text"]: card.get("change", "") for card in cards}
    assert changes["The on-call for payments is Alice"].startswith("superseded: valid until")
    assert changes["Bob is now the payments on-call"].startswith("current since 2026-11-08")
    told = json.loads(tools.run("remember", {"text": "Carol is now the payments on-call"}).content)
    assert [r["text"] for r in told["replaces"]] == ["Bob is now the payments on-call"]


def test_supersession_stays_within_a_partition(store: MemoryStore) -> None:
    private = store.remember("The on-call for payments is Alice", OPS, created_at=DAY)
    team = store.remember(
        "The on-call for payments is Bob",
        OPS,
        visibility=Visibility.TEAM,
        created_at=DAY + timedelta(days=1),
    )
    assert team.superseded == ()
    kept = store.get(private.memory.id, OPS)
    assert kept is not None
    assert kept.valid_until is None


def test_retracting_the_newer_value_makes_the_older_current_again(store: MemoryStore) -> None:
    alice = store.remember("The on-call for payments is Alice", OPS, created_at=DAY)
    bob = store.remember("The on-call for payments is Bob", OPS, created_at=DAY + timedelta(1))
    store.retract(bob.memory.id, OPS, by="")
    back = store.get(alice.memory.id, OPS)
    assert back is not None
    assert back.valid_until is None
    assert back.superseded_by is None
    store.restore(bob.memory.id, OPS, by="", admin=True)
    again = store.get(alice.memory.id, OPS)
    assert again is not None
    assert again.superseded_by == bob.memory.id


def test_an_older_fact_written_later_is_ended_by_the_newer_one(store: MemoryStore) -> None:
    bob = store.remember("The on-call for payments is Bob", OPS, created_at=DAY + timedelta(7))
    alice = store.remember("The on-call for payments is Alice", OPS, created_at=DAY)
    assert alice.memory.superseded_by == bob.memory.id
    assert alice.memory.valid_until == DAY + timedelta(7)
    current = store.get(bob.memory.id, OPS)
    assert current is not None
    assert current.valid_until is None


def test_saying_a_replaced_value_again_makes_it_current(store: MemoryStore) -> None:
    alice = store.remember("The on-call for payments is Alice", OPS, created_at=DAY)
    bob = store.remember("The on-call for payments is Bob", OPS, created_at=DAY + timedelta(7))
    again = store.remember("the on-call for payments is alice", OPS, created_at=DAY + timedelta(14))
    assert again.memory.id == alice.memory.id
    assert again.memory.valid_until is None
    assert [m.id for m in again.superseded] == [bob.memory.id]


def test_episodes_never_supersede(store: MemoryStore) -> None:
    store.remember("The on-call for payments is Alice", OPS, kind="episode", created_at=DAY)
    later = store.remember(
        "The on-call for payments is Bob", OPS, kind="episode", created_at=DAY + timedelta(1)
    )
    assert later.superseded == ()
    assert all(m.valid_until is None and not m.subject for m in store.newest(OPS))


def test_the_updates_bench_meets_its_targets(clean_env: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["bench", "updates", "--facts", "120", "--seed", "3", "--json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output.strip().splitlines()[-1])
    assert list(figures)[:3] == ["current_top1", "stale_above_current", "as_of_correct"]
    assert figures["facts"] >= 120
    assert figures["current_questions"] >= 40
    assert figures["current_top1"] >= 0.95
    assert figures["stale_above_current"] <= 0.02
    assert figures["as_of_correct"] >= 0.9
    assert figures["superseded"] == figures["changes"]
    before = figures["baseline"]
    assert before["superseded"] == 0
    assert before["stale_above_current"] > figures["stale_above_current"]
    assert not (clean_env / "cairn.db").exists()  # a scratch store, never CAIRN_HOME's


def test_a_doubtful_value_replaces_nothing_until_a_person_confirms_it(
    store: MemoryStore,
) -> None:
    ann = store.remember("The release manager this week is Ann", OPS, created_at=DAY)
    guest = store.remember(
        "The release manager this week is now Mallory",
        OPS,
        source=Source(author="guest", untrusted=True),
        created_at=DAY + timedelta(days=1),
    )
    assert guest.memory.subject == ann.memory.subject
    assert guest.superseded == ()  # a guest cannot retire a true fact by stating another
    store.adjust(guest.memory.id, validity=1.0, confirmed=True)
    replaced = store.get(ann.memory.id, OPS)
    assert replaced is not None
    assert replaced.superseded_by == guest.memory.id
