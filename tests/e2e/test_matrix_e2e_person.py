"""The encrypting test person (:mod:`tests.support.matrix_e2e`) against a real Synapse: two of
them in an encrypted room read each other's messages and reactions, which the server only ever
holds encrypted; a withheld message opens once its key is released, an undecryptable one never.

The homeserver comes from the fixture of :mod:`tests.e2e.test_matrix`.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from nio import Event, MegolmEvent, ReactionEvent, RedactionEvent

from tests.e2e.test_matrix import synapse  # noqa: F401 - the homeserver fixture
from tests.support.matrix_e2e import E2EPerson
from tests.support.synapse import Synapse, User

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _on_the_wire(server: Synapse, user: User, room: str, event_id: str) -> dict[str, Any]:
    """``event_id`` as the server hands it out through ``/messages``."""
    answer = httpx.get(
        f"{server.base_url}/_matrix/client/v3/rooms/{quote(room)}/messages",
        params={"dir": "b", "limit": 100},
        headers={"Authorization": f"Bearer {user.access_token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    found = [e for e in answer.json()["chunk"] if e["event_id"] == event_id]
    assert found, f"{event_id} is not in /messages"
    return dict(found[0])


def _is(event_id: str, *, decrypted: bool | None = None) -> Any:
    def matches(event: Event) -> bool:
        return event.event_id == event_id and (decrypted is None or event.decrypted == decrypted)

    return matches


def test_two_people_read_each_other_in_an_encrypted_room(
    synapse: Synapse,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    alice_account = synapse.register(f"alice-{secrets.token_hex(3)}")
    bob_account = synapse.register(f"bob-{secrets.token_hex(3)}")
    with (
        E2EPerson(synapse, alice_account, tmp_path / "alice") as alice,
        E2EPerson(synapse, bob_account, tmp_path / "bob") as bob,
    ):
        room = alice.create_room(invite=(bob.id,))
        bob.join(room)
        alice.wait_joined(room, bob.id)
        assert alice.room_encrypted(room)
        assert bob.room_encrypted(room)

        # A message: Bob reads it decrypted; the server holds it encrypted.
        hello = alice.send(room, "the deploy key rotates tonight", mention=bob.id)
        event_id, sender, body, content = bob.wait_for_text(room, contains="rotates tonight")
        assert (event_id, sender) == (hello, alice.id)
        assert body == f"{bob.id[1:].split(':')[0]}: the deploy key rotates tonight"
        assert content["m.mentions"] == {"user_ids": [bob.id]}
        assert bob.wait_for(_is(hello)).decrypted
        assert _on_the_wire(synapse, bob_account, room, hello)["type"] == "m.room.encrypted"

        # A reaction: encrypted too, its relation also in clear; Alice reads a ReactionEvent.
        like = bob.react(room, hello, "👍")
        reaction = alice.wait_for(_is(like), what="Bob's reaction")
        assert isinstance(reaction, ReactionEvent)
        assert reaction.decrypted
        assert (reaction.reacts_to, reaction.key) == (hello, "👍")
        wire = _on_the_wire(synapse, alice_account, room, like)
        assert wire["type"] == "m.room.encrypted"
        assert wire["content"]["m.relates_to"]["event_id"] == hello

        # A thread reply and an edit arrive decrypted with their relations.
        reply = alice.send(room, "in the thread", thread=hello)
        assert bob.wait_for_text(room, contains="in the thread")[3]["m.relates_to"] == {
            "rel_type": "m.thread",
            "event_id": hello,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": hello},
        }
        alice.edit(room, reply, "in the thread, edited")
        edited = bob.wait_for_text(room, contains="in the thread, edited")[3]
        assert edited["m.new_content"]["body"] == "in the thread, edited"
        assert edited["m.relates_to"] == {"rel_type": "m.replace", "event_id": reply}

        # A withheld message: unreadable for Bob, while later ones read fine, until released.
        held, release = alice.send_withheld(room, "held back for now")
        assert isinstance(bob.wait_for(_is(held)), MegolmEvent)
        alice.send(room, "sent after the held one")
        bob.wait_for_text(room, contains="sent after the held one")
        assert not bob.wait_for(_is(held)).decrypted
        release()
        bob.wait_for(_is(held, decrypted=True), what="the released message")
        assert bob.wait_for_text(room, contains="held back")[0] == held

        # An undecryptable message never opens.
        lost = alice.send_undecryptable(room, "nobody reads this")
        assert isinstance(bob.wait_for(_is(lost)), MegolmEvent)
        alice.send(room, "the last word")
        bob.wait_for_text(room, contains="the last word")
        assert isinstance(bob.wait_for(_is(lost)), MegolmEvent)
        assert all("nobody reads this" not in body for _, _, body, _ in bob.texts(room))

        # A redaction reaches Bob as one.
        gone = alice.redact(room, reply)
        redaction = bob.wait_for(_is(gone))
        assert isinstance(redaction, RedactionEvent)
        assert redaction.redacts == reply

        # A clear room: plain messages and reactions.
        clear = alice.create_room(invite=(bob.id,), encrypted=False)
        bob.join(clear)
        assert not bob.room_encrypted(clear)
        plain = bob.send(clear, "hello in clear")
        alice.wait_for_text(clear, contains="hello in clear", sender=bob.id)
        alice.react(clear, plain, "👀")
        assert not bob.wait_for(lambda e: isinstance(e, ReactionEvent), room=clear).decrypted
