"""Who a memory belongs to and who may read it: scopes are hard partitions in every read path."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from cairn.core.errors import InvalidInput

__all__ = ["WORKSPACE", "Scope", "Source", "Visibility", "private_to", "said_in"]


class Visibility(StrEnum):
    """``private``: the agent's own; ``team``: every agent of the tenant; ``public``: set by
    people or code only, never by the model."""

    PRIVATE = "private"
    TEAM = "team"
    PUBLIC = "public"


# The index's ``room`` of a memory any conversation of its tenant may see (see Scope.rooms).
WORKSPACE = "*"


@dataclass(frozen=True, slots=True)
class Scope:
    """Where a read or write happens. ``tenant`` is always required and never crossed.

    ``private_to`` names the private conversation this happens in (a DM, a private channel, a
    non-public or encrypted Matrix room: its channel id), and is None in a public one. A memory
    written in a private conversation is visible only there; a read sees the workspace's
    memories and those of its own private conversation, never another's. ``every_conversation``
    lifts that for the administration commands (an operator's view of the whole tenant); no
    chat path sets it. Raises InvalidInput for a private conversation named "" or "*".
    """

    tenant: str
    agent: str
    channel: str | None = None
    user: str | None = None
    thread: str | None = None
    private_to: str | None = None
    every_conversation: bool = False
    # A conversation shared with another organisation: it sees only its own memories, never
    # the workspace's (they are the team's, not the partner's).
    isolated: bool = False

    def __post_init__(self) -> None:
        if not self.tenant:
            raise InvalidInput("a memory scope needs a tenant")
        if not self.agent:
            raise InvalidInput("a memory scope needs an agent")
        _checked_room(self.private_to)
        if self.isolated and not self.private_to:
            raise InvalidInput("a conversation shared with another organisation is private")

    def key(self, visibility: Visibility, private_to: str | None = None) -> str:
        """The dedupe partition of a memory with ``visibility``, private to the conversation
        ``private_to`` (None: the workspace's)."""
        owner = self.agent if visibility is Visibility.PRIVATE else "*"
        return f"{self.tenant}|{owner}|{_checked_room(private_to) or WORKSPACE}"

    @property
    def rooms(self) -> tuple[str, ...] | None:
        """The ``room`` values of the index this scope may read (None: every one)."""
        if self.every_conversation:
            return None
        if self.private_to:
            return (self.private_to,) if self.isolated else (WORKSPACE, self.private_to)
        return (WORKSPACE,)

    @property
    def reader(self) -> tuple[str, str, str | None, bool, bool]:
        """Everything :func:`~cairn.memory.records.visible_to` reads of this scope (a cache key)."""
        return (self.tenant, self.agent, self.private_to, self.every_conversation, self.isolated)


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
    admin: bool = False  # the author is an admin (CAIRN_ADMINS): may restore any retraction
    # The people whose words a learning was drawn from: none of them may confirm it.
    drawn_from: tuple[str, ...] = ()
    # What the turn that wrote it had read besides people ("tool:ops__status"): recorded, and
    # the memory is untrusted until confirmed.
    via: str = ""
    # The conversation's name as people know it ("#ops", a room's name), when the frontend
    # knew it: shown with the memory where it is recalled.
    conversation: str = ""


def _checked_room(private_to: str | None) -> str | None:
    """``private_to`` when it can name a private conversation; raises InvalidInput for "" and
    "*".

    Those would be read as no conversation ("" is falsy) and written into the workspace's room
    of the index and its dedupe partition (:meth:`Scope.key`): a memory said in a conversation
    so named came back as "already known" in public channels, text and all (issue 16, found by
    tests/property/test_memory_privacy_properties.py). Refused, to fail closed.
    """
    if private_to in ("", WORKSPACE):
        raise InvalidInput(
            f"a private conversation cannot be named {private_to!r}: that names no "
            "conversation, or the whole workspace"
        )
    return private_to


def private_to(channel: str, said: Iterable[Mapping[str, Any] | None]) -> str | None:
    """The private conversation a memory learned from ``said`` (the data of the chat events it
    comes from) belongs to: ``channel``, unless every one of them was marked public by its
    frontend (``"private": false``). Fail closed: nothing said, or an event that does not say,
    counts as private."""
    data = [d or {} for d in said]
    public = bool(data) and all(d.get("private") is False for d in data)
    return None if public else channel


def said_in(said: Sequence[Mapping[str, Any] | None]) -> str:
    """The name of the conversation ``said`` (chat events' data, oldest first) was said in, as
    the newest of them that names it says ("#ops"); "" when none does."""
    for data in reversed(said):
        name = (data or {}).get("conversation")
        if isinstance(name, str) and name:
            return name
    return ""


def isolated(said: Iterable[Mapping[str, Any] | None]) -> bool:
    """Whether any of ``said`` (chat events' data) came from a conversation shared with another
    organisation, where the workspace's memories are not recalled."""
    return any((d or {}).get("isolated") is True for d in said)
