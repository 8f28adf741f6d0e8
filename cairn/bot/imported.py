"""Chat history into memory: what ``cairn import slack`` and ``cairn import matrix`` share.

An imported message passes what a live one passes. The importer makes it a
:class:`~cairn.sessions.events.ChatEvent` with its author's trust and its conversation's
privacy, as the live frontend would; :class:`Episodes` validates it (the gate: credentials
masked, invisible characters out, the length limit), flags what reads as an instruction to the
assistant, and writes it as an episode (``"Name: text"``, at its time, by its author, in its
thread) in the conversation's scope. A private conversation keeps it private to itself
(:func:`cairn.memory.scope.private_to`, as live memories are). The store keeps one episode per
text in a conversation, so importing twice adds nothing. An edit of a message kept before
(:meth:`Episodes.edit`) keeps the new text and retracts the old. :class:`ChannelTally` counts what
happened to each conversation's messages, for the closing table.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from cairn.core.errors import InvalidInput
from cairn.core.injection import instruction_reason
from cairn.memory.scope import Scope, Source, Visibility, private_to
from cairn.memory.store import MemoryStore, Remembered
from cairn.sessions.events import ChatEvent

__all__ = ["ChannelTally", "Episodes", "ImportReport"]


@dataclass(slots=True)
class ChannelTally:
    """What the import did with one conversation's messages.

    ``read`` messages were in what was imported; ``stored`` became new episodes; ``present``
    were there already (an earlier run, or the same text said before in that conversation);
    ``skipped`` counts the others by why (a join, a bot, a deletion, empty, refused by the
    checks); ``edited`` edits gave a message kept before its last text; ``secrets`` messages
    (and edits) had a credential masked; ``flagged`` read as instructions.
    Of its ``days`` parts (a Slack export's day files, a Matrix room's pages of history),
    ``resumed`` were done by an earlier run and not read again.
    """

    name: str
    kind: str
    private: bool
    read: int = 0
    stored: int = 0
    present: int = 0
    edited: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    secrets: int = 0
    flagged: int = 0
    days: int = 0
    resumed: int = 0

    def skip(self, why: str) -> None:
        """Count one message left out, by ``why``."""
        self.skipped[why] = self.skipped.get(why, 0) + 1


@dataclass(frozen=True, slots=True)
class ImportReport:
    """An import's outcome: the tenant, a tally per conversation, how many parts it read
    (``days``, counted in ``unit``) and how many of them an earlier run had done (``resumed``:
    not read again)."""

    tenant: str
    channels: dict[str, ChannelTally]
    days: int
    resumed: int
    unit: str = "day files"

    @property
    def stored(self) -> int:
        return sum(t.stored for t in self.channels.values())


class Episodes:
    """Writes checked chat events into ``memory`` as episodes of ``agent``, counting each in
    its conversation's tally. ``max_chars`` is CAIRN_MAX_MESSAGE_CHARS, as for live messages."""

    def __init__(self, memory: MemoryStore, *, agent: str, max_chars: int) -> None:
        self.memory = memory
        self.agent = agent
        self.max_chars = max_chars

    def keep(self, event: ChatEvent, name: str, at: datetime, tally: ChannelTally) -> None:
        """Check ``event`` and keep it as ``"name: text"`` said at ``at``; a message the
        checks refuse is counted as skipped ("refused"), never written."""
        try:
            event = event.validated(self.max_chars)
        except InvalidInput:
            tally.skip("refused")
            return
        if event.secrets:
            tally.secrets += 1
        flagged = instruction_reason(event.text) is not None
        tally.flagged += flagged
        try:
            written = self._write(event, name, at, flagged)
        except InvalidInput:
            tally.skip("refused")
            return
        if written.created:
            tally.stored += 1
        else:
            tally.present += 1

    def edit(self, event: ChatEvent, name: str, tally: ChannelTally) -> None:
        """Give the episode kept from the message ``event.message_id`` (by an earlier run, or
        earlier in this one) its edited text ``event.text``, checked as a message is.

        The new text is kept as :meth:`keep` keeps a message, at the message's time and in its
        thread, and the old episode is retracted by its author with the reason "edited" (kept
        for audit, never recalled): importing the message's first text again finds it, and
        adds nothing. ``tally.edited`` counts the edits applied; one applied before changes
        nothing (``present``). An edit back to a text its author had edited away makes that
        episode current again; one to a text someone else retracted leaves it retracted and
        changes nothing ("retracted"). An edit by someone other than the message's author is
        left out ("edit by another"), and so is one of a message memory does not hold (never
        imported, or before --since: "edit of a message not kept"); neither writes anything."""
        try:
            event = event.validated(self.max_chars)
        except InvalidInput:
            tally.skip("refused")
            return
        scope, source = self._where(event)
        earlier = self.memory.from_message(source, scope, kind="episode")
        if not earlier:
            tally.skip("edit of a message not kept")
            return
        if any(m.author != event.user for m in earlier):
            tally.skip("edit by another")
            return
        said = earlier[0]
        event = replace(event, thread=said.source_thread or event.thread)
        flagged = instruction_reason(event.text) is not None
        try:
            written = self._write(event, name, said.created_at, flagged)
        except InvalidInput:
            tally.skip("refused")
            return
        parts = written.parts or (written.memory,)
        if any(m.retracted and m.retracted_by != event.user for m in parts):
            tally.skip("retracted")  # someone else took that text back: it stays so
            return
        kept = {m.id for m in parts}
        stale = [m for m in earlier if m.id not in kept]
        if not stale and not written.created:
            tally.present += 1  # applied by an earlier run
            return
        for memory in parts:
            if memory.retracted:  # edited back to a text its author had edited away
                self.memory.restore(memory.id, scope, by=event.user, flush=False)
        for memory in stale:
            self.memory.retract(memory.id, scope, by=event.user, reason="edited", flush=False)
        tally.edited += 1
        tally.secrets += bool(event.secrets)
        tally.flagged += flagged

    def _write(self, event: ChatEvent, name: str, at: datetime, flagged: bool) -> Remembered:
        """Keep the checked ``event`` as an episode (raises InvalidInput as ``remember`` does)."""
        scope, source = self._where(event)
        return self.memory.remember(
            f"{name}: {event.text}",
            scope,
            kind="episode",
            visibility=Visibility.TEAM,
            source=source,
            created_at=at,
            flush=False,
            flagged=flagged,
        )

    def _where(self, event: ChatEvent) -> tuple[Scope, Source]:
        """The scope a checked ``event`` is kept in, and where it came from."""
        said = {"private": event.private}
        scope = Scope(
            event.tenant,
            self.agent,
            event.channel,
            event.user,
            event.thread,
            private_to=private_to(event.channel, [said]),
            isolated=event.isolated,
        )
        # Where it came from is what the checked event says (platform, channel, thread, id).
        source = Source(
            event.platform,
            event.channel,
            event.thread,
            event.message_id,
            event.user,
            event.untrusted,
            conversation=event.conversation,
        )
        return scope, source
