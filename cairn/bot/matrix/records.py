"""What the Matrix frontend looks up in Cairn's database about events it saw before.

The session event log already holds everything needed: which threads have a session (so a
message there continues it), which bot message an event id is (so an old client's reply to it
joins its thread), and which reaction an event id was (so its redaction can undo it, whatever
happened to the process in between). No second store can drift from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cairn.db import Database
from cairn.db.models import EventKind, OutboundMessage
from cairn.sessions.log import EventLog
from cairn.sessions.outbox import message_at

__all__ = ["Cause", "EventRecords", "PastReaction"]


@dataclass(frozen=True, slots=True)
class PastReaction:
    """A reaction the bot took in: who put which emoji on which message."""

    user: str
    emoji: str
    target: str


@dataclass(frozen=True, slots=True)
class Cause:
    """The event a bot message answers: the event to reply to, and whom to notify."""

    reply_to: str | None
    user: str | None


class EventRecords:
    """Look-ups in the event log and the outbox of one Matrix tenant."""

    def __init__(self, db: Database, tenant: str) -> None:
        self.db = db
        self.tenant = tenant
        self.log = EventLog(db)

    def thread_agent(self, room_id: str, thread_root: str) -> str | None:
        """The agent of the session on ``thread_root`` in ``room_id``; None if there is none."""
        return self.log.thread_agent(self.tenant, room_id, thread_root)

    def thread_of_bot_message(self, event_id: str) -> str | None:
        """The thread root of the bot message posted as ``event_id``, if it is one."""
        message = message_at(self.db, self.tenant, event_id)
        return message.thread_ref if message is not None else None

    def approval_request(self, event_id: str) -> OutboundMessage | None:
        """The request for approval the bot posted as ``event_id``, if it is one."""
        message = message_at(self.db, self.tenant, event_id)
        return message if message is not None and message.kind == "approval" else None

    def message_taken(self, event_id: str) -> bool:
        """Whether the person's message ``event_id`` was taken in (a session has it)."""
        return self.log.event_at(self.tenant, event_id, EventKind.MESSAGE) is not None

    def reaction(self, event_id: str) -> PastReaction | None:
        """The reaction whose Matrix event id is ``event_id``, if it was taken in."""
        row = self.log.event_at(self.tenant, event_id, EventKind.REACTION)
        if row is None or row.data.get("removed"):
            return None
        emoji, target = row.data.get("emoji"), row.data.get("target")
        if not isinstance(emoji, str) or not isinstance(target, str):
            return None
        return PastReaction(row.user, emoji, target)

    def cause(self, message: OutboundMessage) -> Cause:
        """What the outbox ``message`` answers: a person's message, or the reacted-to message."""
        return self.cause_of(message.cause_event_id, message.channel)

    def cause_of(self, event_row: int, room_id: str) -> Cause:
        """What a bot message in ``room_id`` answering the event logged as ``event_row``
        replies to, and whom it notifies (a reply streamed before it reaches the outbox)."""
        event = self.log.event(event_row)
        if event is None:
            return Cause(None, None)
        if event.kind == EventKind.REACTION:
            target = event.data.get("target")
            return Cause(target if isinstance(target, str) else None, event.user or None)
        prefix = f"{room_id}:"
        ref = event.message_ref or ""
        reply_to = ref[len(prefix) :] if ref.startswith(prefix) else event.event_ref
        return Cause(reply_to or None, event.user or None)

    def pending_in(self, event_rows: list[int]) -> set[int]:
        """Which of ``event_rows`` are still waiting for a worker."""
        return self.log.still_pending(event_rows)
