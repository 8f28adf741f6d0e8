"""Whether a Matrix room is public, as far as memory cares: what is learned in a room that is
not public stays there (see :class:`cairn.memory.Scope`).

A room is public only when anyone may join it (join rule ``public``) and it is not end-to-end
encrypted. Every other join rule (``invite``, which DMs use, ``knock``, ``restricted``,
``knock_restricted``, ``private``) makes it private, and so does a join rule the bot has not
seen: matrix-nio takes a room for ``invite`` until the room's ``m.room.join_rules`` state says
otherwise, and the first sync of each run asks for the full state, so that it does.
"""

from __future__ import annotations

from nio import MatrixRoom

__all__ = ["PUBLIC_JOIN_RULE", "is_private", "private_room"]

PUBLIC_JOIN_RULE = "public"


def private_room(join_rule: object, encrypted: object) -> bool:
    """Whether a room with ``join_rule`` that is ``encrypted`` (or not) is private; anything
    but a public join rule on a room known to be unencrypted is (fail closed)."""
    return not (join_rule == PUBLIC_JOIN_RULE and encrypted is False)


def is_private(room: MatrixRoom) -> bool:
    """Whether ``room``, in the state the sync has given it so far, is a private room."""
    return private_room(room.join_rule, room.encrypted)
