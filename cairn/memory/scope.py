"""Who a memory belongs to and who may read it: scopes are hard partitions in every read path."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from cairn.core.errors import InvalidInput

__all__ = ["Scope", "Source", "Visibility"]


class Visibility(StrEnum):
    """``private``: the agent's own; ``team``: every agent of the tenant; ``public``: set by
    people or code only, never by the model."""

    PRIVATE = "private"
    TEAM = "team"
    PUBLIC = "public"


@dataclass(frozen=True, slots=True)
class Scope:
    """Where a read or write happens. ``tenant`` is always required and never crossed."""

    tenant: str
    agent: str
    channel: str | None = None
    user: str | None = None
    thread: str | None = None

    def __post_init__(self) -> None:
        if not self.tenant:
            raise InvalidInput("a memory scope needs a tenant")
        if not self.agent:
            raise InvalidInput("a memory scope needs an agent")

    def key(self, visibility: Visibility) -> str:
        """The dedupe partition of a memory written in this scope with ``visibility``."""
        owner = self.agent if visibility is Visibility.PRIVATE else "*"
        return f"{self.tenant}|{owner}"


@dataclass(frozen=True, slots=True)
class Source:
    """Where a memory came from, kept for audit and for "who may retract".

    ``untrusted`` marks an author whose word counts for less until a person confirms it
    (a guest, another bot, a configured user): such memories start unconfirmed and rank lower.
    """

    platform: str = ""
    channel: str = ""
    thread: str = ""
    message: str = ""
    author: str = ""
    untrusted: bool = False
