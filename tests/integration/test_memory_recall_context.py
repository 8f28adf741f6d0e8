"""Recall beyond similarity: the date a question names, the turns around a matching turn, and
the person a question names."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import cairn.memory.recall as recall_module
from cairn.memory import MemoryStore, Scope, Source, Visibility
from cairn.runtime import Runtime

OPS = Scope("acme", "ops")
LATER = datetime(2024, 12, 1, tzinfo=UTC)


@pytest.fixture
def store(runtime: Runtime) -> MemoryStore:
    return runtime.memory


def _with(store: MemoryStore, **weights: Any) -> MemoryStore:
    """The same memories (database and index) ranked with other weights."""
    return MemoryStore(
        store.db,
        store.index,
        embedder=store.embedder,
        weights=store.weights.model_copy(update=weights),
    )


def _episode(store: MemoryStore, text: str, thread: str, when: datetime, author: str = "") -> int:
    written = store.remember(
        text,
        OPS,
        kind="episode",
        visibility=Visibility.TEAM,
        source=Source(platform="console", thread=thread, author=author),
        created_at=when,
        flush=False,
    )
    return written.memory.id


def test_a_question_naming_a_day_finds_what_was_said_that_day(store: MemoryStore) -> None:
    start = datetime(2024, 1, 1, 12, tzinfo=UTC)
    for day in range(0, 120, 2):  # sixty closer matches, on other days
        when = start + timedelta(days=day)
        if abs(when - datetime(2024, 3, 4, tzinfo=UTC)) > timedelta(days=3):
            text = f"ann: the deploy failed, node {day} ran out of disk"
            _episode(store, text, f"t{day}", when)
    text = "bob: the deploy failed, the cache filled up"
    that_day = _episode(store, text, "t", datetime(2024, 3, 4, 15, tzinfo=UTC))
    store.flush_outbox()
    question = "why did the deploy fail on 4 March, 2024?"
    found = store.recall(question, OPS, 5, now=LATER, touch=False)
    assert found[0].memory.id == that_day
    undated = _with(store, weight_period=0.0).recall(question, OPS, 5, now=LATER, touch=False)
    assert undated[0].memory.id != that_day  # "4 March" alone matches "node 4" better


def test_an_answer_a_few_turns_after_the_question_shares_its_relevance(
    store: MemoryStore,
) -> None:
    when = datetime(2024, 5, 1, 9, tzinfo=UTC)
    turns = [
        "ann: which database does billing run on these days?",
        "bob: hmm, good one",
        "bob: the same one as last year, nothing changed",
        "ann: thanks!",
    ]
    ids = [
        _episode(store, text, "billing", when + timedelta(seconds=30 * i))
        for i, text in enumerate(turns)
    ]
    for i in range(40):  # other threads about other services
        _episode(store, f"cy: the {i}th service runs on box {i} in rack {i % 7}", f"x{i}", when)
    store.flush_outbox()
    answer = ids[2]  # two turns after the question, sharing no word with it
    question = "which database does billing run on?"
    found = [r.memory.id for r in store.recall(question, OPS, 5, now=LATER, touch=False)]
    assert answer in found
    alone = _with(store, context_turns=0)
    assert answer not in [
        r.memory.id for r in alone.recall(question, OPS, 5, now=LATER, touch=False)
    ]


def test_turns_of_another_thread_lend_nothing(store: MemoryStore) -> None:
    when = datetime(2024, 5, 1, 9, tzinfo=UTC)
    asked = _episode(store, "ann: which database does billing run on these days?", "a", when)
    other = _episode(store, "cy: lunch at noon?", "b", when + timedelta(seconds=1))
    store.flush_outbox()
    question = "which database does billing run on?"
    found = {r.memory.id: r.score for r in store.recall(question, OPS, 5, now=LATER, touch=False)}
    alone = _with(store, context_turns=0).recall(question, OPS, 5, now=LATER, touch=False)
    assert next(iter(found)) == asked
    assert found.get(other) == {r.memory.id: r.score for r in alone}.get(other)


def test_a_question_naming_a_person_prefers_what_that_person_said(store: MemoryStore) -> None:
    when = datetime(2024, 5, 1, 9, tzinfo=UTC)
    said = {  # as near as three texts get: only the day differs
        "@caroline:example.org": "I painted a sunset by the lake on Sunday",
        "U024BE7LH": "I painted a sunset by the lake on Monday",
        "@melanie:example.org": "I painted a sunset by the lake on Tuesday",
    }
    ids = {}
    for n, (author, text) in enumerate(said.items()):
        written = store.remember(
            text,
            OPS,
            kind="episode",
            visibility=Visibility.TEAM,
            source=Source(platform="matrix", thread=f"t{n}", author=author),
            created_at=when + timedelta(minutes=n),
            flush=False,
        )
        ids[author] = written.memory.id
    # Other talk, so that fusion's min-max scaling spans what a real home's candidates span
    # rather than blowing up the few hundredths between three near-identical texts.
    for n, text in enumerate(
        [
            "The deploy window moved to Friday afternoon",
            "We walked around the lake after lunch",
            "Lunch was a sandwich by the water",
            "The sunset photos came out blurry",
        ]
    ):
        _episode(store, text, f"other{n}", when + timedelta(hours=1, minutes=n))
    store.flush_outbox()
    question = "What did Caroline paint by the lake?"
    named = _with(store, weight_speaker=1.0).recall(question, OPS, 3, now=LATER, touch=False)
    unnamed = _with(store, weight_speaker=0.0).recall(question, OPS, 3, now=LATER, touch=False)
    assert named[0].memory.id == ids["@caroline:example.org"]
    before = {r.memory.id: r.score for r in unnamed}
    after = {r.memory.id: r.score for r in named}
    assert after == pytest.approx(
        {mid: score * (2.0 if mid == ids["@caroline:example.org"] else 1.0)
         for mid, score in before.items()}
    )  # fmt: skip


def test_the_dense_search_looks_for_what_is_asked_not_for_who(store: MemoryStore) -> None:
    """A name in the question drew the dense search to everything that person said: asked
    "What foods does Nebraas like?", the embedding of the whole question ranked Nebraas's
    other turns above "I honestly like eggs in any form". The dense query now leaves the
    name out (ADR 0048); the named person is preferred by the author instead."""
    when = datetime(2024, 1, 3, 18, tzinfo=UTC)
    # Real chats are full of short turns; with the name in the query, every one of them
    # that the person wrote sat nearer the question than the answer did.
    fillers = ["ok", "nice", "really?", "yes", "cool", "idk", "hmm", "lol", "same", "me too"]
    said = [("Nebraas", f"Nebraas: {f}") for f in fillers[:5]]
    said += [("Nebraas", "Nebraas: I honestly like eggs in any form")]
    said += [("Nicolas", "Nicolas: what about you?")]
    said += [("Nebraas", f"Nebraas: {f}") for f in fillers[5:]]
    ids = [
        _episode(store, text, f"food{n}", when + timedelta(minutes=n), author)
        for n, (author, text) in enumerate(said)
    ]
    store.flush_outbox()
    question = "What foods does Nebraas like?"
    assert store.query_vector(question, OPS) == pytest.approx(
        store.embedder.embed(["What foods does like?"])[0].tolist()  # type: ignore[union-attr]
    )
    dense_only = _with(store, weight_lexical=0.0, weight_dense=1.0, weight_context=0.0)
    found = dense_only.recall(question, OPS, 3, now=LATER, touch=False)
    assert found[0].memory.id == ids[5]


def test_a_new_speakers_name_leaves_the_dense_query_once_the_authors_are_read_again(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process reads a tenant's authors once a minute (AUTHORS_TTL): until then a new
    speaker's name stays in the dense query; after, it is left out."""
    embed = store.embedder.embed  # type: ignore[union-attr]
    when = datetime(2024, 1, 3, 18, tzinfo=UTC)
    _episode(store, "Nebraas: hi", "t0", when, "Nebraas")
    question = "What does Zed cook?"
    assert store.query_vector(question, OPS) == pytest.approx(embed([question])[0].tolist())
    _episode(store, "Zed: I cook rice", "t1", when, "Zed")
    # Still within the minute: the authors read before are used.
    assert store.query_vector(question, OPS) == pytest.approx(embed([question])[0].tolist())
    now = time.monotonic()
    monkeypatch.setattr(time, "monotonic", lambda: now + recall_module.AUTHORS_TTL + 1)
    assert store.query_vector(question, OPS) == pytest.approx(
        embed(["What does cook?"])[0].tolist()
    )


def test_a_turn_that_shares_no_word_with_the_question_is_found_through_the_best_match(
    store: MemoryStore,
) -> None:
    # A second fact of a multi-hop question shares its topic with the first, not the question's
    # words: the feedback search asks again with the words of the best matches (ADR 0039). The
    # dense search is weighed out here, so that only the words can find it.
    when = datetime(2024, 5, 1, 9, tzinfo=UTC)
    _episode(
        store, "kate: I signed up for the pottery course at the Lindenhof community hall", "a", when
    )
    answer = _episode(
        store, "kate: Lindenhof community hall gave me a kiln slot on Thursdays", "b", when
    )
    for n in range(30):
        _episode(store, f"tom: build farm queue {n} is long, agent {n} restarted", f"f{n}", when)
    store.flush_outbox()
    question = "what happens at the pottery course?"

    def found(**weights: Any) -> list[int]:
        ranked = _with(store, weight_dense=0.0, **weights).recall(
            question, OPS, 5, now=LATER, touch=False
        )
        return [r.memory.id for r in ranked]

    assert answer not in found(weight_feedback=0.0)
    assert answer in found(weight_feedback=0.15, feedback_docs=2)
