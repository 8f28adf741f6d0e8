"""Who a Matrix user is, as far as memory cares: from a trusted homeserver, a room admin.

Both answers come from what the bot already holds, at no cost: the server part of the user id,
and the room's ``m.room.power_levels`` state that the sync keeps current (see docs/adr/0011).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from nio import MatrixRoom

__all__ = [
    "ADMIN_LEVEL",
    "creators_are_privileged",
    "creators_in",
    "is_room_admin",
    "is_untrusted",
]

# Matrix's customary moderator level; a room may let lower levels redact, never demand more.
ADMIN_LEVEL = 50
# Room versions before 12, where the creator is an ordinary entry of the power levels; from 12
# on, the creators outrank everyone and are left out of them.
_LEGACY_ROOM_VERSIONS = frozenset(str(v) for v in range(1, 12))


def is_untrusted(user_id: str, trusted_servers: Collection[str]) -> bool:
    """Whether ``user_id`` comes from a homeserver outside ``trusted_servers`` (``*``: any)."""
    if "*" in trusted_servers:
        return False
    server = user_id.partition(":")[2]
    return not server or server not in trusted_servers


def creators_are_privileged(room: MatrixRoom) -> bool:
    """Whether ``room``'s creators outrank its power levels (room version 12 and later)."""
    return bool(room.room_version) and room.room_version not in _LEGACY_ROOM_VERSIONS


def creators_in(state: Iterable[dict[str, Any]]) -> frozenset[str]:
    """The creators named by a room's state events: the create event's sender and any
    ``additional_creators`` it lists."""
    for event in state:
        if event.get("type") == "m.room.create" and event.get("state_key", "") == "":
            extra = (event.get("content") or {}).get("additional_creators") or []
            names = [event.get("sender"), *(extra if isinstance(extra, list) else [])]
            return frozenset(str(n) for n in names if isinstance(n, str) and n)
    return frozenset()


def is_room_admin(room: MatrixRoom, user_id: str, creators: Collection[str] = ()) -> bool:
    """Whether ``user_id`` may remove others' messages in ``room``: power level at least 50,
    or at least the level the room requires to redact others' events, or a creator of a room
    whose version puts its creators above the power levels."""
    if user_id in creators and creators_are_privileged(room):
        return True
    levels = room.power_levels
    level: int = levels.get_user_level(user_id)
    return level >= min(ADMIN_LEVEL, int(levels.defaults.redact))
