"""Who may invite the Matrix bot into a room (CAIRN_MATRIX_ALLOWED_INVITERS)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["InvitePolicy"]


class InvitePolicy:
    """Allows invites from listed user ids and from every user of listed ``:server`` patterns."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.users = frozenset(p for p in patterns if p.startswith("@"))
        self.servers = frozenset(p[1:].lower() for p in patterns if p.startswith(":"))

    def allows(self, user_id: str) -> bool:
        """Whether an invite from ``user_id`` (``@name:server``) is to be accepted."""
        if user_id in self.users:
            return True
        _, _, server = user_id.partition(":")
        return bool(server) and server.lower() in self.servers
