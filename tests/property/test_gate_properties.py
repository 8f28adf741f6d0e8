"""The gate keeps what a person sees: invisible characters put anywhere change nothing stored."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.core.gate import gate

# Characters that show nothing and carry nothing between ordinary letters: tags, zero-width
# space and joiners, bidi controls and isolates, word joiner, BOM, soft hyphen, variation
# selectors, the combining grapheme joiner, Hangul fillers.
INVISIBLE = (
    [chr(c) for c in range(0xE0020, 0xE007F)]
    + list("\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e")
    + list("\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\ufeff\u00ad\u061c")
    + [chr(c) for c in range(0xFE00, 0xFE10)]
    + list("\u034f\u115f\u1160\u3164\uffa0\u180e")
)
# What people type: letters of several scripts, digits, punctuation, blanks, new lines, and
# the shapes of credentials, so that masking is tried too.
VISIBLE = st.text(
    alphabet=st.sampled_from(
        list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:;=/_-'\n")
        + list("éüñçßжлдπλ中文日本") * 3
    ),
    max_size=80,
)
SECRETISH = st.sampled_from(
    ["", "password: Tr0ub4dor&3x ", "token xoxb-1234-5678-QwErTyUiOp ", "pw Zx9!kq2Lm "]
)


@st.composite
def hidden_in(draw: st.DrawFn) -> tuple[str, str]:
    """A visible text, and the same text with invisible characters put at random places."""
    text = draw(SECRETISH) + draw(VISIBLE) + draw(SECRETISH)
    places = draw(st.lists(st.integers(0, len(text)), max_size=12))
    chars = draw(st.lists(st.sampled_from(INVISIBLE), min_size=len(places), max_size=len(places)))
    hidden = text
    for at, char in sorted(zip(places, chars, strict=True), reverse=True):
        hidden = hidden[:at] + char + hidden[at:]
    return text, hidden


@settings(max_examples=400, deadline=None)
@given(hidden_in())
def test_the_stored_text_is_the_visible_one(pair: tuple[str, str]) -> None:
    text, hidden = pair
    assert gate(hidden).text == gate(text).text
    assert gate(hidden).secrets == gate(text).secrets


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_the_gate_is_a_fixed_point(text: str) -> None:
    once = gate(text).text
    again = gate(once)
    assert again.text == once
    assert again.hidden == 0
    assert again.secrets == ()
