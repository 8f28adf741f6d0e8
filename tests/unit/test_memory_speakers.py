"""Which words name a memory's author, so that a question naming a person finds their words."""

from __future__ import annotations

import pytest

from cairn.memory.speakers import named_speaker, speaker_terms, without_speakers
from cairn.memory.terms import terms


@pytest.mark.parametrize(
    ("author", "name"),
    [
        ("Caroline", {"caroline"}),
        ("@caroline:example.org", {"caroline"}),
        ("caroline@example.org", {"caroline"}),
        ("Mary Ann", {"mary", "ann"}),
        ("", set()),
    ],
)
def test_an_author_is_named_by_the_words_before_its_server(author: str, name: set[str]) -> None:
    assert speaker_terms(author) == name


def test_a_question_names_an_author_by_every_word_of_the_name() -> None:
    asked = frozenset(terms("What did Caroline paint last week?"))
    assert named_speaker("@caroline:example.org", asked)
    assert named_speaker("Caroline", asked)
    assert not named_speaker("Melanie", asked)
    assert not named_speaker("Caroline Smith", asked)  # only half the name


def test_an_opaque_id_or_a_server_names_no_one() -> None:
    assert not named_speaker("U024BE7LH", frozenset(terms("what did the example server say?")))
    assert not named_speaker("@bob:example.org", frozenset(terms("anything on example.org?")))
    assert not named_speaker("", frozenset(terms("what did anyone say?")))


@pytest.mark.parametrize(
    ("query", "authors", "asked"),
    [
        ("What foods does Nebraas like?", ["Nebraas", "Nicolas"], "What foods does like?"),
        ("What are Kate's hobbies?", ["Kate", "U024BE7LH"], "What are hobbies?"),
        ("Where did James' dog go?", ["James"], "Where did dog go?"),
        ("What are Kate\u2019s hobbies?", ["Kate"], "What are hobbies?"),  # a phone's apostrophe
        ("what did caroline paint", ["@caroline:example.org"], "what did paint"),
        (
            "What did Mary Ann tell Bob about the deploy?",
            ["Mary Ann", "Bob"],
            "What did tell about the deploy?",
        ),
        # Half a name names no one; an opaque id is never in a question.
        ("What did Mary say?", ["Mary Ann"], "What did Mary say?"),
        ("What changed in the deploy?", ["U024BE7LH"], "What changed in the deploy?"),
        # Nothing but a name: the query stays as it is rather than becoming empty.
        ("Nebraas?", ["Nebraas"], "Nebraas?"),
    ],
)
def test_the_dense_query_leaves_out_the_people_it_names(
    query: str, authors: list[str], asked: str
) -> None:
    assert without_speakers(query, authors) == asked
