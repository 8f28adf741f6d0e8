"""A Slack workspace export into memory: every person's message an episode of its conversation.

Each message passes what a live one passes (:mod:`cairn.bot.imported`): it becomes a
:class:`~cairn.sessions.events.ChatEvent` with the author's trust (a guest, a bot or an outsider
is untrusted, and so are CAIRN_UNTRUSTED_USERS) and the conversation's privacy (a private
channel, a DM or a group DM keeps what is said there private to itself), and is checked and
kept as an episode of its thread.

An edit in a later day file than its message (a ``message_changed`` event) gives the episode
kept from the message its last text (:meth:`~cairn.bot.imported.Episodes.edit`); one of a
message not kept (not in the days imported) is counted, not stored.

Running twice adds nothing: the store keeps one episode per text in a conversation, and a
checkpoint beside the data (``CAIRN_HOME/imports``) lists the day files done, so a run killed
part-way skips them when started again and redoes at most the day it was in (docs/adr/0042).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from sqlmodel import select

from cairn.bot.imported import ChannelTally, Episodes, ImportReport
from cairn.bot.slack.export import Conversation, DayFile, ExportMessage, SlackExport
from cairn.bot.slack.mrkdwn import from_slack
from cairn.bot.slack.workspaces import PLATFORM, tenant_of
from cairn.core.errors import InvalidInput
from cairn.core.progress import ProgressCallback
from cairn.db.models import MemoryRow
from cairn.memory.store import MemoryStore
from cairn.sessions.events import ChatEvent

__all__ = ["SlackImport", "SlackImportReport", "checkpoint_path"]

SlackImportReport = ImportReport
"""What ``cairn import slack`` did: a tally per conversation, in day files."""

# The kinds of conversation that have a name of their own ("#ops"): channels, public or not.
_NAMED = frozenset({"channel", "group"})


def checkpoint_path(home: Path, export: SlackExport, tenant: str) -> Path:
    """The checkpoint file of importing ``export`` into ``tenant``: named by what the zip
    holds (its members' names, sizes and checksums), not by where it lies."""
    digest = hashlib.sha256(tenant.encode())
    for info in sorted(export.members(), key=lambda i: i.filename):
        digest.update(f"{info.filename}\0{info.file_size}\0{info.CRC}\n".encode())
    return home / "imports" / f"slack-{digest.hexdigest()[:24]}.done"


class SlackImport:
    """One import of one export into ``memory`` (for ``agent``; the tenant is the export's
    workspace unless ``tenant`` is given). ``max_chars`` is CAIRN_MAX_MESSAGE_CHARS, and
    ``untrusted_users`` CAIRN_UNTRUSTED_USERS, as for live messages."""

    def __init__(
        self,
        memory: MemoryStore,
        export: SlackExport,
        *,
        agent: str,
        tenant: str | None = None,
        max_chars: int = 40000,
        untrusted_users: Iterable[str] = (),
    ) -> None:
        if tenant is None and not export.team:
            raise InvalidInput(
                "the export's users.json names no workspace (team_id): give --tenant"
            )
        self.memory = memory
        self.export = export
        self.agent = agent
        self.tenant = tenant or tenant_of(export.team)
        self.episodes = Episodes(memory, agent=agent, max_chars=max_chars)
        self.untrusted_users = frozenset(untrusted_users)

    def check(self, days: list[DayFile], progress: ProgressCallback | None = None) -> int:
        """Read every day file of ``days`` without writing: how many messages they hold.

        Raises MalformedExport (naming the file and line) at the first malformed one, so that
        an import refuses a broken export before it writes anything.
        """
        count = 0
        for done, day in enumerate(days, 1):
            count += len(self.export.messages(day))
            if progress is not None:
                progress(done, len(days))
        return count

    def run(
        self,
        days: list[DayFile],
        *,
        checkpoint: Path | None = None,
        progress: ProgressCallback | None = None,
        total: int = 0,
    ) -> SlackImportReport:
        """Import ``days`` in order, skipping those ``checkpoint`` lists as done and adding
        each day to it once its messages are written. ``progress`` hears (messages read,
        ``total``). The index work is left in the outbox for the caller's
        ``memory.flush_outbox`` (which can show its own progress). Raises MalformedExport as
        :meth:`check` does, StorageError when the database fails (the days before stay
        imported).

        The checkpoint is believed only while the database holds this tenant's imported
        episodes: a database emptied or replaced since (the same CAIRN_HOME) is imported whole
        again, not skipped."""
        done = _done(checkpoint)
        if done and not self._imported_before():
            done = set()
        tallies: dict[str, ChannelTally] = {}
        read = resumed = 0
        for day in days:
            conversation = day.conversation
            tally = tallies.setdefault(
                conversation.name,
                ChannelTally(conversation.name, conversation.kind, conversation.private),
            )
            tally.days += 1
            if day.member in done:
                resumed += 1
                tally.resumed += 1
                continue
            for message in self.export.messages(day):
                tally.read += 1
                self._one(conversation, message, tally)
                read += 1
                if progress is not None and read % 50 == 0:
                    progress(read, max(total, read))
            if checkpoint is not None:
                _mark(checkpoint, day.member)
        if progress is not None:
            progress(read, max(total, read))
        return ImportReport(self.tenant, tallies, len(days), resumed)

    def _imported_before(self) -> bool:
        """Whether the database holds an episode imported from Slack for this tenant."""
        with self.memory.db.session() as s:
            found = s.exec(
                select(MemoryRow.id)
                .where(
                    MemoryRow.tenant_id == self.tenant,
                    MemoryRow.kind == "episode",
                    MemoryRow.source_platform == PLATFORM,
                )
                .limit(1)
            ).first()
        return found is not None

    def _one(self, conversation: Conversation, message: ExportMessage, tally: ChannelTally) -> None:
        if message.noise is not None:
            tally.skip(message.noise)
            return
        text = from_slack(message.text)
        if not text:
            tally.skip("empty")
            return
        person = self.export.people.get(message.user)
        untrusted = (person is not None and person.outsider) or (
            message.user in self.untrusted_users
        )
        event = ChatEvent(
            platform=PLATFORM,
            tenant=self.tenant,
            channel=conversation.id,
            thread=message.thread,
            user=message.user,
            text=text,
            message_id=message.ts,
            untrusted=untrusted,
            private=conversation.private,
            isolated=conversation.shared,
            # A channel's name; a DM or a group DM has none of its own.
            conversation=f"#{conversation.name}" if conversation.kind in _NAMED else "",
        )
        name = self.export.names.get(message.user, message.user)
        if message.edit:  # the last text of a message an earlier day file (or run) kept
            self.episodes.edit(event, name, tally)
            return
        self.episodes.keep(event, name, datetime.fromtimestamp(float(message.ts), UTC), tally)


def _done(checkpoint: Path | None) -> set[str]:
    """The day files ``checkpoint`` lists (a last line cut by a kill is not one of them)."""
    if checkpoint is None or not checkpoint.exists():
        return set()
    text = checkpoint.read_text(encoding="utf-8")
    whole = text[: text.rfind("\n") + 1]
    if whole != text:  # a line cut by a kill: dropped, so that the next one starts clean
        checkpoint.write_text(whole, encoding="utf-8")
    return set(whole.split("\n")[:-1])


def _mark(checkpoint: Path, member: str) -> None:
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    with checkpoint.open("a", encoding="utf-8") as f:
        f.write(member + "\n")
        f.flush()
        os.fsync(f.fileno())
