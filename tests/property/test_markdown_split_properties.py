"""Cutting a long Markdown answer into parts: every part fits, renders on its own, and together
they give back the answer, word for word, apart from the fences added where code was cut."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.bot.markdown import MIN_PART, split_markdown

# Words of at most 12 characters, some of them several UTF-8 bytes long.
_word = st.text(alphabet="abcxyz*_`é日🙂", min_size=1, max_size=12).filter(
    lambda w: not w.startswith("```")
)
_words = st.lists(_word, min_size=1, max_size=30).map(" ".join)
_block = st.one_of(
    _words,
    st.builds(lambda heading: "## " + heading, _words),
    st.lists(_words, min_size=1, max_size=6).map(lambda items: "\n".join("- " + i for i in items)),
    st.builds(
        lambda language, lines: f"```{language}\n" + "\n".join(lines) + "\n```",
        st.sampled_from(["", "python", "sh"]),
        st.lists(_words, min_size=1, max_size=12),
    ),
)
_answer = st.lists(_block, min_size=1, max_size=12).map("\n\n".join)
_FENCE_LINE = re.compile(r"^\s*```\w*$")


def utf8(text: str) -> int:
    return len(text.encode())


def words(text: str) -> list[str]:
    """The words of ``text`` outside fence lines."""
    kept = (line for line in text.split("\n") if not _FENCE_LINE.match(line))
    return " ".join(kept).split()


def fence_lines(text: str) -> int:
    return sum(1 for line in text.split("\n") if _FENCE_LINE.match(line))


@settings(max_examples=150, deadline=None)
@given(answer=_answer, limit=st.integers(min_value=MIN_PART + 24, max_value=600))
def test_parts_fit_render_alone_and_keep_every_word(answer: str, limit: int) -> None:
    for measure in (len, utf8):
        parts = split_markdown(answer, limit, measure=measure)
        assert parts
        assert all(0 < measure(part) <= limit for part in parts)
        # Every word comes back, in order and whole: no word is longer than half a part.
        assert [w for part in parts for w in words(part)] == words(answer)
        # Each part closes every code block it opens.
        assert all(fence_lines(part) % 2 == 0 for part in parts)
        # The only fences added are a close and a reopen at a cut.
        added = sum(fence_lines(part) for part in parts) - fence_lines(answer)
        assert 0 <= added <= 2 * (len(parts) - 1)
        assert added % 2 == 0


@settings(max_examples=100, deadline=None)
@given(
    text=st.text(min_size=1, max_size=2000), limit=st.integers(min_value=MIN_PART, max_value=300)
)
def test_any_text_is_cut_within_the_limit_without_losing_a_character(text: str, limit: int) -> None:
    # Bare fences when reopening, so that an added fence is exactly three backticks.
    parts = split_markdown(text, limit, measure=utf8, keep_language=False)
    assert all(0 < utf8(part) <= limit for part in parts)
    joined = "".join("".join(part.replace("```", "").split()) for part in parts)
    assert joined == "".join(text.replace("```", "").split())
