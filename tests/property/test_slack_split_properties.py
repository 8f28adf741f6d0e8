"""Splitting a long answer for Slack never loses or reorders a word and never exceeds the limit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.bot.markdown import FENCE
from cairn.bot.slack.mrkdwn import split_message

_pieces = st.lists(
    st.one_of(
        st.text(alphabet="abc xyz", min_size=1, max_size=40),
        st.sampled_from(["\n", "\n\n", " ", FENCE, "\n" + FENCE + "\n"]),
        st.text(alphabet="q", min_size=50, max_size=300),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(pieces=_pieces, limit=st.integers(min_value=26, max_value=400))
def test_parts_fit_and_keep_every_word_in_order(pieces: list[str], limit: int) -> None:
    text = "".join(pieces)
    parts = split_message(text, limit)
    assert all(0 < len(part) <= limit for part in parts)
    # Words may be cut where no space is near; the characters still come back in order.
    joined = "".join("".join(part.replace(FENCE, "").split()) for part in parts)
    assert joined == "".join(text.replace(FENCE, "").split())
