"""Which words name a memory's author, so that a question naming a person finds their words."""

from __future__ import annotations

import pytest

from cairn.memory.speakers import named_speaker, speaker_terms
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
