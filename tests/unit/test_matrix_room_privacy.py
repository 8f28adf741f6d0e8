"""Which Matrix rooms are public, as the frontend decides it: only a room anyone may join that is
not encrypted; invite-only rooms, DMs, knock and space-restricted rooms, encrypted rooms, and a
room whose join rule is not known yet, are private."""

from __future__ import annotations

from typing import Any

import pytest
from nio import MatrixRoom, RoomEncryptionEvent, RoomJoinRulesEvent

from cairn.bot.matrix.privacy import is_private, private_room


@pytest.mark.parametrize(
    ("join_rule", "encrypted", "private"),
    [
        ("public", False, False),
        ("public", True, True),  # an encrypted room is private, whoever may join
        ("invite", False, True),  # DMs and ordinary private rooms
        ("knock", False, True),
        ("restricted", False, True),  # members of a space
        ("knock_restricted", False, True),
        ("private", False, True),
        (None, False, True),
        ("Public", False, True),
        ("public", None, True),  # encryption unknown
    ],
)
def test_a_matrix_room_is_public_only_when_public_and_unencrypted(
    join_rule: object, encrypted: object, private: bool
) -> None:
    assert private_room(join_rule, encrypted) is private


def _state(kind: str, content: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": kind,
        "state_key": "",
        "sender": "@ann:example.org",
        "event_id": f"${kind}",
        "origin_server_ts": 1,
        "content": content,
    }


def test_a_room_whose_join_rule_nio_has_not_seen_is_private() -> None:
    room = MatrixRoom("!r:example.org", "@cairn:example.org")
    assert is_private(room)  # nio starts every room at join rule "invite"


def test_a_rooms_state_makes_it_public_and_encryption_private_again() -> None:
    room = MatrixRoom("!r:example.org", "@cairn:example.org")
    room.handle_event(
        RoomJoinRulesEvent.from_dict(_state("m.room.join_rules", {"join_rule": "public"}))
    )
    assert not is_private(room)
    encryption = {"algorithm": "m.megolm.v1.aes-sha2"}
    room.handle_event(RoomEncryptionEvent.from_dict(_state("m.room.encryption", encryption)))
    assert is_private(room)


def test_a_public_room_made_invite_only_is_private_from_then_on() -> None:
    room = MatrixRoom("!r:example.org", "@cairn:example.org")
    room.handle_event(
        RoomJoinRulesEvent.from_dict(_state("m.room.join_rules", {"join_rule": "public"}))
    )
    room.handle_event(
        RoomJoinRulesEvent.from_dict(_state("m.room.join_rules", {"join_rule": "invite"}))
    )
    assert is_private(room)
