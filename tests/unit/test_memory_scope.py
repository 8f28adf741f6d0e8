"""Scopes: a private conversation cannot be named so that it reads as the workspace."""

from __future__ import annotations

import pytest

from cairn.core.errors import InvalidInput
from cairn.memory import Scope, Visibility


@pytest.mark.parametrize("room", ["", "*"])
def test_a_private_conversation_named_as_no_room_or_the_workspace_is_refused(room: str) -> None:
    with pytest.raises(InvalidInput, match="cannot be named"):
        Scope("acme", "ops", "C1", private_to=room)
    with pytest.raises(InvalidInput, match="cannot be named"):
        Scope("acme", "ops").key(Visibility.TEAM, room)


def test_each_private_conversation_has_its_own_dedupe_partition_and_rooms() -> None:
    public, dm = Scope("acme", "ops"), Scope("acme", "ops", "D1", private_to="D1")
    assert public.key(Visibility.TEAM) != dm.key(Visibility.TEAM, "D1")
    assert public.rooms == ("*",)
    assert dm.rooms == ("*", "D1")
    assert Scope("acme", "ops", private_to=" ").rooms == ("*", " ")  # odd, but its own room
