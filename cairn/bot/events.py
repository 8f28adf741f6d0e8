"""The one normalised event every frontend produces, and the one reply every frontend posts."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from cairn.errors import InvalidInput

__all__ = ["ChatEvent", "ChatReply", "EventType", "clean_text"]


class EventType(StrEnum):
    """What happened in the chat."""

    MESSAGE = "message"
    REACTION_ADDED = "reaction_added"
    REACTION_REMOVED = "reaction_removed"


@dataclass(frozen=True, slots=True)
class ChatEvent:
    """A chat event, the same shape whatever platform it came from.

    ``tenant`` is the hard memory partition (Slack workspace, Matrix homeserver, ``console``);
    ``thread`` names the thread, and so the agent session, within ``channel``. ``event_id`` is
    the platform's id of this delivery (dedupe key); ``message_id`` is the id of the message
    itself (Slack ``ts``, Matrix event id), used to collapse double deliveries of one message.
    For reactions, ``reaction`` is the emoji name and ``target_id`` the message reacted to.

    What the platform says of the author, with defaults that grant nothing: ``untrusted`` is
    true for a guest or another bot (what they teach starts unconfirmed and ranks lower);
    ``admin`` is true for a workspace or room admin (who may retract anyone's memory).
    """

    platform: str
    tenant: str
    channel: str
    thread: str
    user: str
    type: EventType = EventType.MESSAGE
    text: str = ""
    event_id: str = ""
    message_id: str = ""
    mentions: tuple[str, ...] = ()
    agent: str | None = None
    reaction: str | None = None
    target_id: str | None = None
    addressed: bool = True
    untrusted: bool = False
    admin: bool = False
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def validated(self, max_chars: int) -> ChatEvent:
        """This event with its text cleaned; raises InvalidInput on a malformed event."""
        for name in ("platform", "tenant", "channel", "thread", "user"):
            if not getattr(self, name):
                raise InvalidInput(f"chat event has no {name}")
        if self.type is EventType.MESSAGE:
            text = clean_text(self.text)
            if not text:
                raise InvalidInput("the message is empty")
            if len(text) > max_chars:
                raise InvalidInput(
                    f"the message is {len(text)} characters long; the limit is {max_chars} "
                    "(CAIRN_MAX_MESSAGE_CHARS). Split it, or attach long logs as a file."
                )
            return _replace(self, text=text)
        if not self.reaction or not self.target_id:
            raise InvalidInput("a reaction event needs the emoji and the message it is on")
        return self


def _replace(event: ChatEvent, **changes: Any) -> ChatEvent:
    values = {name: getattr(event, name) for name in ChatEvent.__slots__}
    values.update(changes)
    return ChatEvent(**values)


def clean_text(text: str) -> str:
    """Text with control characters (but tab and newline) removed, NFC-normalised, trimmed."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    kept = (ch for ch in text if ch in "\n\t" or unicodedata.category(ch) != "Cc")
    return "".join(kept).strip()


@dataclass(frozen=True, slots=True)
class ChatReply:
    """Something the bot posts into a thread: a reply, or a notice such as "remembered: ..."."""

    platform: str
    tenant: str
    channel: str
    thread: str
    text: str
    kind: str = "reply"
    agent: str = ""
    outbound_id: int | None = None
    in_reply_to: str = ""
    data: dict[str, Any] = field(default_factory=dict, compare=False)
