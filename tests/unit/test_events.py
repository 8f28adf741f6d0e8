"""Event normalisation: one ChatEvent shape, validated before anything is stored."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlmodel import SQLModel

from cairn.core.errors import InvalidInput
from cairn.core.reactions import emoji_character, emoji_name
from cairn.core.text import clean_text
from cairn.db.models import (
    CONVERSATION_CHARS,
    AgentSession,
    OutboundMessage,
    Reaction,
    SessionEvent,
    Tenant,
)
from cairn.sessions.events import ChatEvent, EventType


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
    # A reaction event keeps the name, whichever form its frontend passed.
    event = _reaction(given, "console:1")
    assert event.reaction == event.validated(100).reaction == name


@pytest.mark.parametrize(
    ("setting", "typed"),
    [("white_check_mark", "✅"), (":x:", "❌"), ("✅", "✅"), ("🚀", "🚀"), ("shipit", ":shipit:")],
)
def test_a_reaction_setting_is_shown_as_people_type_it_and_reads_back_as_itself(
    setting: str, typed: str
) -> None:
    assert emoji_character(setting) == typed
    assert emoji_name(typed) == emoji_name(setting)


# --- names longer than the schema keeps ----------------------------------------------------

_IDS = {"platform": "p", "tenant": "t", "channel": "c", "thread": "th", "user": "u"}


def _width(table: type[SQLModel], column: str) -> int:
    """The width of ``table.column`` as the migrations create it (VARCHAR(n))."""
    length = SQLModel.metadata.tables[str(table.__tablename__)].c[column].type.length
    assert isinstance(length, int)
    return length


# Each name of an event, and a column it is kept in: the limit is that column's width.
_KEPT_IN = {
    "platform": (AgentSession, "platform"),
    "tenant": (Tenant, "id"),
    "channel": (AgentSession, "channel"),
    "thread": (AgentSession, "thread_ref"),
    "user": (SessionEvent, "user"),
    "agent": (SessionEvent, "agent"),
    "event_id": (SessionEvent, "event_ref"),
}


@pytest.mark.parametrize("field", sorted(_KEPT_IN))
def test_a_name_as_long_as_its_column_is_taken(field: str) -> None:
    limit = _width(*_KEPT_IN[field])
    event = ChatEvent(text="hi", **{**_IDS, field: "x" * limit})
    assert getattr(event.validated(100), field) == "x" * limit


@pytest.mark.parametrize("field", sorted(_KEPT_IN))
def test_a_name_longer_than_its_column_is_refused_naming_the_field_and_the_limit(
    field: str,
) -> None:
    limit = _width(*_KEPT_IN[field])
    event = ChatEvent(text="hi", **{**_IDS, field: "x" * (limit + 1)})
    label = field.replace("_", " ")
    with pytest.raises(InvalidInput, match=rf"{label}.* {limit + 1} characters.*limit is {limit}"):
        event.validated(100)


def _reaction(emoji: str, target: str) -> ChatEvent:
    return ChatEvent(
        **_IDS, type=EventType.REACTION_ADDED, event_id="e", reaction=emoji, target_id=target
    )


def test_a_reaction_with_an_emoji_name_longer_than_the_schema_keeps_is_refused() -> None:
    limit = _width(Reaction, "emoji")
    assert _reaction("x" * limit, "console:1").validated(100).reaction == "x" * limit
    with pytest.raises(InvalidInput, match=rf"emoji name is {limit + 1} .*limit is {limit}"):
        _reaction("x" * (limit + 1), "console:1").validated(100)


def test_a_reaction_on_an_over_long_message_id_is_refused() -> None:
    limit = _width(OutboundMessage, "message_ref")
    with pytest.raises(InvalidInput, match=rf"message reacted to is {limit + 1} "):
        _reaction("+1", "x" * (limit + 1)).validated(100)


def test_a_message_id_is_refused_when_the_ref_with_its_channel_is_too_long() -> None:
    limit = _width(SessionEvent, "message_ref")
    room = "!" + "r" * 98 + ":example.org"  # a Matrix room id of 111 characters
    fits = "$" + "e" * (limit - len(room) - 2)  # "room:event" is exactly the limit
    event = ChatEvent(**{**_IDS, "channel": room}, text="hi", message_id=fits)
    assert event.validated(100).message_id == fits
    with pytest.raises(InvalidInput, match=rf"message id .*limit is {limit - len(room) - 1}"):
        replace(event, message_id=fits + "e").validated(100)


def test_a_matrix_event_from_a_long_room_and_user_is_refused_not_stored() -> None:
    room = "!" + "r" * 240 + ":example.org"
    user = "@" + "u" * 240 + ":example.org"
    event = ChatEvent(
        platform="matrix", tenant="example.org", channel=room, thread="$t", user=user, text="hi"
    )
    with pytest.raises(InvalidInput, match=r"channel id is 253 characters long"):
        event.validated(100)
    with pytest.raises(InvalidInput, match=r"user name is 253 characters long"):
        replace(event, channel="!room:example.org").validated(100)


@pytest.mark.parametrize("field", ["thread", "user", "agent"])
def test_a_name_with_a_control_character_or_an_undecodable_byte_is_refused(field: str) -> None:
    for bad in ("a\x00b", "a\udcffb"):
        with pytest.raises(InvalidInput, match="control character or an undecodable byte"):
            ChatEvent(text="hi", **{**_IDS, field: bad}).validated(100)


def test_a_message_with_undecodable_bytes_is_refused_as_not_utf8() -> None:
    # What `cairn chat` reads from b"hello \xff\xfe there" (surrogateescape), or a broken
    # "\ud83d" escape in a JSON payload: no database can store it.
    for text in ("hello \udcff\udcfe there", "broken\ud83d emoji"):
        with pytest.raises(InvalidInput, match=r"not valid UTF-8 .*character 7"):
            _message(text).validated(100)


def test_a_conversations_name_is_made_fit_to_keep_and_never_refuses_the_message() -> None:
    token = "xoxb-123456789012-123456789012-abcdefghijklmnopqrstuvwx"
    named = replace(_message("hi"), conversation=f" ops\u200b \x00room\n{token} ")
    assert named.validated(100).conversation == "ops room [secret removed: Slack token]"
    long = replace(_message("hi"), conversation="r" * 500).validated(100).conversation
    assert long == "r" * (CONVERSATION_CHARS - 1) + "…"
    assert replace(_message("hi"), conversation="\ud800x").validated(100).conversation == "\ufffdx"
    assert _message("hi").validated(100).conversation == ""
