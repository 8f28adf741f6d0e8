"""Which Slack conversations are public, as the frontend decides it: only a public channel;
DMs, group DMs, private channels, and anything Slack does not say, are private."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.bot.slack.conversations import (
    channel_type_of_command,
    private_by_info,
    private_by_type,
)

# conversations.info's ``channel`` objects, as Slack documents them (fields trimmed).
PUBLIC = {
    "id": "C123",
    "name": "general",
    "is_channel": True,
    "is_group": False,
    "is_im": False,
    "is_mpim": False,
    "is_private": False,
}
PRIVATE = {**PUBLIC, "id": "C456", "name": "secret", "is_private": True}
LEGACY_GROUP = {**PUBLIC, "id": "G789", "is_channel": False, "is_group": True, "is_private": True}
MPIM = {
    **PUBLIC,
    "id": "G0MPIM",
    "name": "mpdm-ann--bob--cairn-1",
    "is_channel": False,
    "is_mpim": True,
    "is_private": True,
}
IM = {"id": "D123", "created": 1, "is_im": True, "is_org_shared": False, "user": "UANN"}


@pytest.mark.parametrize(
    ("channel_type", "private"),
    [("channel", False), ("group", True), ("im", True), ("mpim", True), ("app_home", True)],
)
def test_a_message_events_channel_type_says_whether_it_is_private(
    channel_type: str, private: bool
) -> None:
    assert private_by_type(channel_type) is private


@pytest.mark.parametrize("channel_type", [None, "", "Channel", "public", 1])
def test_an_absent_or_unknown_channel_type_says_nothing(channel_type: object) -> None:
    assert private_by_type(channel_type) is None


def test_only_a_public_channel_is_public_by_conversations_info() -> None:
    assert private_by_info(PUBLIC) is False
    for private in (PRIVATE, LEGACY_GROUP, MPIM, IM):
        assert private_by_info(private) is True, private["id"]


@pytest.mark.parametrize("missing", ["is_channel", "is_private"])
def test_a_channel_object_that_does_not_say_counts_as_private(missing: str) -> None:
    partial = {k: v for k, v in PUBLIC.items() if k != missing}
    assert private_by_info(partial) is True
    assert private_by_info({}) is True


@pytest.mark.parametrize("flag", ["is_im", "is_mpim", "is_group"])
def test_any_private_kind_wins_over_a_public_looking_channel(flag: str) -> None:
    contradictory: dict[str, Any] = {**PUBLIC, flag: True}
    assert private_by_info(contradictory) is True


@pytest.mark.parametrize(
    ("name", "channel_type"),
    [
        ("directmessage", "im"),
        ("privategroup", "group"),
        ("mpdm-ann--bob--cairn-1", "mpim"),
        ("general", None),  # a channel's own name: public or private, the lookup decides
        ("", None),
        (None, None),
    ],
)
def test_a_slash_commands_channel_name_reveals_only_private_kinds(
    name: object, channel_type: str | None
) -> None:
    assert channel_type_of_command(name) == channel_type
