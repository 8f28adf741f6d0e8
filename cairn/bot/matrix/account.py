"""Who the bot is on Matrix: its homeserver, its user id, its tenant, the names it answers to."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PLATFORM", "BotAccount"]

PLATFORM = "matrix"


@dataclass
class BotAccount:
    """The bot's Matrix account. ``names`` starts as the localpart; the login puts the display
    name in front of it, since people mention the bot by either."""

    homeserver: str
    user_id: str
    names: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.names:
            self.names = (self.user_id.partition(":")[0].lstrip("@"),)

    @property
    def server_name(self) -> str:
        """The server part of the user id."""
        return self.user_id.partition(":")[2]

    @property
    def tenant(self) -> str:
        """Every room is part of one tenant, ``matrix:<the bot's homeserver>``."""
        return f"{PLATFORM}:{self.server_name}"
