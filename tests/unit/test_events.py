"""Event normalisation: one ChatEvent shape, validated before anything is stored."""

from __future__ import annotations

import pytest

from cairn.bot.emoji import emoji_name
from cairn.bot.events import ChatEvent, EventType, clean_text
from cairn.errors import InvalidInput


def _message(text: str) -> ChatEvent:
    return ChatEvent(platform="console", tenant="t", channel="c", thread="th", user="u", text=text)


def test_control_characters_are_removed_but_newlines_and_tabs_kept() -> None:
    assert clean_text("a\x00b\x07c\r\nd\te\x1b[31m") == "abc\nd\te[31m"


def test_text_is_nfc_normalised_and_trimmed() -> None:
    assert clean_text("  cafe\u0301  ") == "caf\u00e9"


def test_an_empty_message_is_rejected() -> None:
    with pytest.raises(InvalidInput, match="empty"):
        _message(" \x00 \n").validated(100)


def test_an_oversized_message_is_rejected_with_the_limit_and_the_variable() -> None:
    with pytest.raises(
        InvalidInput, match=r"101 characters.*limit is 100.*CAIRN_MAX_MESSAGE_CHARS"
    ):
        _message("x" * 101).validated(100)


def test_a_valid_message_comes_back_cleaned() -> None:
    assert _message(" hi\x00 ").validated(100).text == "hi"


@pytest.mark.parametrize("missing", ["platform", "tenant", "channel", "thread", "user"])
def test_an_event_without_its_ids_is_rejected(missing: str) -> None:
    fields = {"platform": "p", "tenant": "t", "channel": "c", "thread": "th", "user": "u"}
    fields[missing] = ""
    with pytest.raises(InvalidInput, match=missing):
        ChatEvent(text="hi", **fields).validated(100)


def test_a_reaction_needs_its_emoji_and_target() -> None:
    event = ChatEvent(
        platform="p",
        tenant="t",
        channel="c",
        thread="th",
        user="u",
        type=EventType.REACTION_ADDED,
        reaction="+1",
    )
    with pytest.raises(InvalidInput, match="reaction"):
        event.validated(100)


@pytest.mark.parametrize(
    ("given", "name"),
    [
        ("+1", "+1"),
        (":+1:", "+1"),
        ("👍", "+1"),
        ("👍\ufe0f", "+1"),
        ("+1::skin-tone-3", "+1"),
        ("✅", "white_check_mark"),
        ("❌", "x"),
        ("🗑️", "wastebasket"),
        ("tada", "tada"),
    ],
)
def test_emoji_names_are_normalised_across_platforms(given: str, name: str) -> None:
    assert emoji_name(given) == name
