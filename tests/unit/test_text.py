"""The text helpers every message goes through (cairn.core.text)."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from cairn.core.text import CONTROL, clean_text


def test_control_is_exactly_unicodes_category_cc() -> None:
    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue  # lone surrogates: LONE_SURROGATE's business
        char = chr(code)
        assert bool(CONTROL.search(char)) == (unicodedata.category(char) == "Cc"), hex(code)


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_clean_text_drops_every_control_character_but_tab_and_newline(text: str) -> None:
    cleaned = clean_text(text)
    assert not any(unicodedata.category(ch) == "Cc" and ch not in "\n\t" for ch in cleaned)
    kept = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    assert (
        cleaned
        == "".join(ch for ch in kept if ch in "\n\t" or unicodedata.category(ch) != "Cc").strip()
    )
