"""The one normalised event every frontend produces, and the one reply every frontend posts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Any

from cairn.core.bounded import bounded_int
from cairn.core.errors import InvalidInput
from cairn.core.gate import gate
from cairn.core.reactions import emoji_name
from cairn.core.text import CONTROL, LONE_SURROGATE, clean_text, printable
from cairn.db.models import (
    AGENT_CHARS,
    CHANNEL_CHARS,
    CONVERSATION_CHARS,
    EMOJI_CHARS,
    PLATFORM_CHARS,
    REF_CHARS,
    TENANT_CHARS,
    THREAD_CHARS,
    USER_CHARS,
)

__all__ = [
    "ATTACHED_CHARS",
    "DECISIONS",
    "NAME_LIMITS",
    "Attachment",
    "ChatEvent",
    "ChatReply",
    "EventType",
    "checked_name",
    "conversation_name",
]

# The longest value each name of a ChatEvent may have: the width of the column that keeps it.
NAME_LIMITS: Mapping[str, int] = {
    "platform": PLATFORM_CHARS,
    "tenant": TENANT_CHARS,
    "channel": CHANNEL_CHARS,
    "thread": THREAD_CHARS,
    "user": USER_CHARS,
    "agent": AGENT_CHARS,
    "event_id": REF_CHARS,
    "reaction": EMOJI_CHARS,
    "target_id": REF_CHARS,
}

_LABELS = {
    "platform": "platform name",
    "tenant": "tenant id",
    "channel": "channel id",
    "thread": "thread name",
    "user": "user name",
    "agent": "agent name",
    "event_id": "event id",
    "reaction": "emoji name",
    "target_id": "id of the message reacted to",
}

# A lone surrogate is what an undecodable byte becomes (surrogateescape), or what a broken
# "\ud83d" escape in JSON decodes to; no database and no UTF-8 stream can take one.


# What a person may say of a tool call held for approval.
DECISIONS = ("approve", "deny")


# What one artifact card (of a long paste or an attached file) may add to a message's text,
# beyond CAIRN_MAX_MESSAGE_CHARS: the card, not the file, is what the message carries.
ATTACHED_CHARS = 8000


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file sent with a message, as its frontend fetched it.

    ``data`` holds the file's bytes, or None when the frontend did not fetch them; then
    ``refused`` says why (too large to fetch, the download failed), in words for the thread.
    ``size`` is the size the platform announced (bytes).
    """

    name: str
    media_type: str = ""
    size: int = 0
    data: bytes | None = field(default=None, repr=False)
    refused: str = ""


class EventType(StrEnum):
    """What happened in the chat."""

    MESSAGE = "message"
    REACTION_ADDED = "reaction_added"
    REACTION_REMOVED = "reaction_removed"
    DECISION = "decision"  # a person approves or denies a tool call held for approval


@dataclass(frozen=True, slots=True)
class ChatEvent:
    """A chat event, the same shape whatever platform it came from.

    ``tenant`` is the hard memory partition (Slack workspace, Matrix homeserver, ``console``);
    ``thread`` names the thread, and so the agent session, within ``channel``. ``event_id`` is
    the platform's id of this delivery (dedupe key); ``message_id`` is the id of the message
    itself (Slack ``ts``, Matrix event id), used to collapse double deliveries of one message.
    For a decision on a held tool call (a button, ``/approve``), ``decision`` is ``approve`` or
    ``deny`` and ``target_id`` the approval's id (a reaction on the request message decides too).
    For reactions, ``reaction`` is the emoji name and ``target_id`` the message reacted to;
    whatever form of the emoji a frontend passes (``:+1:``, ``+1::skin-tone-2``, ``👍``), the
    event keeps its short name (``+1``), the one form the rest of Cairn sees.

    What the platform says of the author, with defaults that grant nothing: ``untrusted`` is
    true for a guest or another bot (what they teach starts unconfirmed and ranks lower);
    ``admin`` is true for a workspace or room admin (who may retract anyone's memory);
    ``steward`` for a member of a group CAIRN_STEWARDS names (a Slack user group), whose
    confirmation alone makes a doubtful memory count.
    ``private`` is true unless the frontend knows the conversation is public (a public Slack
    channel, a public unencrypted Matrix room): what is learned in a private one stays there.
    ``isolated`` is true for a conversation shared with another organisation (Slack Connect):
    private to itself, and the workspace's memories are not recalled there either.
    ``conversation`` is the conversation's name as people know it ("#ops", a Matrix room's
    name), when the frontend knows it: a memory learned from the message shows it.
    ``secrets`` names the kinds of credential :meth:`validated` removed from the text (it never
    reaches the session log, the model, memory or a log line), and ``hidden`` counts the
    invisible characters it took out (what is kept is what a person sees: cairn.core.gate).

    ``attachments`` are the files sent with a message, before they are read; once read
    (:mod:`cairn.memory.context.intake`), the message's text ends with their artifact cards
    and notes, ``attached_chars`` long (not counted against the message limit), and
    ``artifacts`` describes the cards (kept in the log's data, for the context engine).
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
    decision: str | None = None
    addressed: bool = True
    untrusted: bool = False
    admin: bool = False
    steward: bool = False
    private: bool = True
    isolated: bool = False
    conversation: str = ""
    secrets: tuple[str, ...] = ()
    hidden: int = 0
    attachments: tuple[Attachment, ...] = ()
    artifacts: tuple[dict[str, Any], ...] = field(default=(), compare=False, repr=False)
    attached_chars: int = 0
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.reaction:
            object.__setattr__(self, "reaction", emoji_name(self.reaction))

    def validated(self, max_chars: int) -> ChatEvent:
        """This event with its text through the gate (:func:`cairn.core.gate.gate`): what a
        person sees, trimmed, and any credential in it replaced by a marker (``[secret removed:
        Slack token]``; the kinds removed are in ``secrets``, the invisible characters taken
        out counted in ``hidden``).

        Raises InvalidInput, naming the field, when a name is missing, longer than the schema
        keeps (see NAME_LIMITS) or not printable, or when the text is empty, too long or not
        valid UTF-8. The conversation's name is made fit to keep (:func:`conversation_name`).
        """
        for name in ("platform", "tenant", "channel", "thread", "user"):
            if not getattr(self, name):
                raise InvalidInput(f"chat event has no {name}")
        for name in NAME_LIMITS:
            value = getattr(self, name)
            if value:
                checked_name(name, value)
        if self.message_id and len(self.channel) + 1 + len(self.message_id) > REF_CHARS:
            raise InvalidInput(
                f"the message id is {len(self.message_id)} characters long; in channel "
                f"{self.channel[:40]!r} the limit is {REF_CHARS - len(self.channel) - 1}"
            )
        if self.type is EventType.MESSAGE:
            bad = LONE_SURROGATE.search(self.text)
            if bad is not None:
                raise InvalidInput(
                    f"the message is not valid UTF-8 text (character {bad.start() + 1} is an "
                    "undecodable byte or a broken escape); it was not sent. Send it as UTF-8."
                )
            gated = gate(self.text)
            text = gated.text.strip()
            if not text:
                raise InvalidInput("the message is empty")
            if len(text) - self.attached_chars > max_chars:
                raise InvalidInput(
                    f"the message is {len(text)} characters long; the limit is {max_chars} "
                    "(CAIRN_MAX_MESSAGE_CHARS). Split it, or attach long logs as a file."
                )
            secrets = tuple(dict.fromkeys(self.secrets + gated.secrets))
            return _replace(
                self,
                text=text,
                secrets=secrets,
                hidden=self.hidden + gated.hidden,
                conversation=conversation_name(self.conversation),
            )
        if self.type is EventType.DECISION:
            if self.decision not in DECISIONS:
                raise InvalidInput(
                    f"a decision is approve or deny, not {printable(str(self.decision))[:40]!r}"
                )
            try:
                number = bounded_int(self.target_id or "", "a request number")
            except InvalidInput as exc:
                raise InvalidInput(
                    f"a decision needs the number of the request it answers; {exc}"
                ) from None
            return _replace(self, target_id=str(number))
        if not self.reaction or not self.target_id:
            raise InvalidInput("a reaction event needs the emoji and the message it is on")
        return self


def _replace(event: ChatEvent, **changes: Any) -> ChatEvent:
    values = {name: getattr(event, name) for name in ChatEvent.__slots__}
    values.update(changes)
    return ChatEvent(**values)


@lru_cache(maxsize=1024)
def conversation_name(name: str) -> str:
    """``name``, a conversation's name as a platform gives it, as Cairn keeps and shows it: what
    a person sees (the gate: credentials masked, invisible characters out), on one line, at
    most CONVERSATION_CHARS characters (a longer one is cut, and ends with "…"). Never raises.

    A name is only a label: a long or odd one is made fit, never a reason to refuse a message.
    (Cached: every message and memory of a conversation carries the same name.)
    """
    if not name:
        return ""
    shown = " ".join(clean_text(gate(printable(name)).text).split())
    if len(shown) > CONVERSATION_CHARS:
        shown = shown[: CONVERSATION_CHARS - 1] + "…"
    return shown


def checked_name(field: str, value: str) -> str:
    """``value`` when it fits as the ChatEvent field ``field`` (a key of NAME_LIMITS).

    Raises InvalidInput naming the field and its limit when ``value`` is longer than the
    schema keeps, or has a control character or an undecodable byte.
    """
    label, limit = _LABELS[field], NAME_LIMITS[field]
    if len(value) > limit:
        raise InvalidInput(
            f"the {label} is {len(value)} characters long; the limit is {limit} characters"
        )
    if LONE_SURROGATE.search(value) or CONTROL.search(value):
        raise InvalidInput(
            f"the {label} {printable(value)!r} has a control character or an undecodable byte"
        )
    return value


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
