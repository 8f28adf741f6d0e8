"""Properties of the token estimator that budgets rely on."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cairn.core.tokens import count_tokens


@given(st.text())
def test_only_the_empty_text_is_free(text: str) -> None:
    assert (count_tokens(text) == 0) == (text == "")


@given(st.text(), st.text())
def test_joining_texts_never_costs_much_more_than_both(a: str, b: str) -> None:
    assert count_tokens(a + b) <= count_tokens(a) + count_tokens(b) + 1


@given(st.text(min_size=1))
def test_no_text_costs_more_than_one_token_per_character(text: str) -> None:
    assert count_tokens(text) <= len(text)
