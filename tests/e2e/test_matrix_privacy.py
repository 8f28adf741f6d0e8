"""What is said to the bot in a Matrix room that is not public (invite-only, a direct chat, a
public room made invite-only) is never recalled in a public room; what is said in a public room
is recalled in every room. Against a real Synapse on 127.0.0.1.

The homeserver, people and bot come from the fixtures of :mod:`tests.e2e.test_matrix`; one bot
serves every room of a test, as one Cairn serves a homeserver.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

import pytest

from cairn.db.models import MemoryRow
from tests.e2e.test_matrix import (  # noqa: F401 - synapse is a fixture the others use
    Cairn,
    Person,
    answers_to,
    cairn,
    people,
    room_with_bot,
    synapse,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _ask(person: Person, room: str, bot: Cairn, text: str) -> str:
    """``person`` mentions the bot in ``room`` with ``text``; the bot's answers, once there."""
    mention = person.send(room, text, mention=bot.id)
    wait_for(f"the answer to {text!r}", lambda: bot.answered(mention))
    answers = answers_to(person, room, bot.id, mention)
    return "\n".join(str(e["content"]["body"]) for e in answers)


def _tell(person: Person, room: str, bot: Cairn, fact: str) -> MemoryRow:
    """``person`` has the bot remember ``fact`` in ``room``; the memory stored."""
    mention = person.send(room, f"remember {fact}", mention=bot.id)
    wait_for(
        f"the notice for {fact!r}",
        lambda: [
            e
            for e in answers_to(person, room, bot.id, mention)
            if e["content"]["body"] == f"remembered: {fact}"
        ],
    )
    (row,) = bot.db_rows(MemoryRow, MemoryRow.text == fact)
    return row


def _public_rooms(
    cairn: Cairn,  # noqa: F811
    people: Callable[[str], Person],  # noqa: F811
) -> tuple[Person, Person, str, str]:
    """The bot started; alice and bob, and a public room of each with the bot in it."""
    cairn.start()
    alice, bob = people("alice"), people("bob")
    return (
        alice,
        bob,
        room_with_bot(alice, cairn, public=True),
        room_with_bot(bob, cairn, public=True),
    )


def test_private_rooms_and_direct_chats_keep_their_memories_and_public_rooms_share(
    cairn: Cairn,  # noqa: F811 - the fixture imported above
    people: Callable[[str], Person],  # noqa: F811
) -> None:
    cairn.start()
    alice, bob = people("alice"), people("bob")
    invite_only = room_with_bot(alice, cairn)
    direct = room_with_bot(alice, cairn, direct=True)
    public = room_with_bot(alice, cairn, public=True)
    elsewhere = room_with_bot(bob, cairn, public=True)  # bob's public room

    assert _tell(alice, invite_only, cairn, "the payroll code is 777111").private_to == invite_only
    assert _tell(alice, direct, cairn, "my salary is 123456").private_to == direct
    assert _tell(alice, public, cairn, "the deploy window code is 909090").private_to is None

    # In another public room, only the public room's memory is recalled.
    assert "777111" not in _ask(bob, elsewhere, cairn, "what is the payroll code?")
    assert "123456" not in _ask(bob, elsewhere, cairn, "what is the salary?")
    assert "909090" in _ask(bob, elsewhere, cairn, "what is the deploy window code?")
    # Nor does the direct chat see the invite-only room's, or the other way round.
    assert "777111" not in _ask(alice, direct, cairn, "what is the payroll code?")
    assert "123456" not in _ask(alice, invite_only, cairn, "what is the salary?")
    # Where they were told, they are recalled; the public one is recalled there too.
    assert "777111" in _ask(alice, invite_only, cairn, "what is the payroll code?")
    assert "123456" in _ask(alice, direct, cairn, "what is the salary?")
    assert "909090" in _ask(alice, direct, cairn, "what is the deploy window code?")


def test_a_public_room_made_invite_only_is_private_from_then_on(
    cairn: Cairn,  # noqa: F811
    people: Callable[[str], Person],  # noqa: F811
) -> None:
    alice, bob, room, elsewhere = _public_rooms(cairn, people)
    assert _tell(alice, room, cairn, "the staging code is 313131").private_to is None

    path = f"/rooms/{quote(room)}/state/m.room.join_rules/"
    alice.call("PUT", path, {"join_rule": "invite"})
    assert _tell(alice, room, cairn, "the prod code is 424242").private_to == room

    assert "313131" in _ask(bob, elsewhere, cairn, "what is the staging code?")
    assert "424242" not in _ask(bob, elsewhere, cairn, "what is the prod code?")
    assert "424242" in _ask(alice, room, cairn, "what is the prod code?")


def test_a_memory_keeps_the_name_of_the_room_it_was_said_in(
    cairn: Cairn,  # noqa: F811
    people: Callable[[str], Person],  # noqa: F811
) -> None:
    alice, bob, room, elsewhere = _public_rooms(cairn, people)
    alice.call("PUT", f"/rooms/{quote(room)}/state/m.room.name/", {"name": "Ops room"})
    assert _tell(alice, room, cairn, "the deploy window code is 909090").source_conversation == (
        "Ops room"
    )
    assert "said in Ops room" in _ask(bob, elsewhere, cairn, "what is the deploy window code?")
