"""Reading a Slack workspace export (the zip an admin downloads) one day file at a time.

An export holds ``users.json``, ``channels.json`` (public channels) and, where the export has
them, ``groups.json`` (private channels), ``dms.json`` and ``mpims.json`` (direct and group
direct messages), and one folder per conversation of daily files ``YYYY-MM-DD.json``, each a
JSON array of message objects. Slack publishes no schema for them; this reader follows the
public help pages and real exports' structure, and refuses what it cannot read (a malformed
file, a message that is not an object or has no ``ts``) with :class:`MalformedExport`, naming
the file inside the zip and the line.

The zip is never held whole: the listings are read once (they grow with the people and the
conversations, not with the messages), and the messages are read from one day file at a time.
A conversation counts as public only when ``channels.json`` lists it and nothing in its entry
says otherwise (fail closed, as :mod:`cairn.bot.slack.conversations` does for live messages):
a folder no listing names is private.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

from cairn.bot.slack.conversations import shared_outside
from cairn.bot.slack.people import Person
from cairn.core.errors import InvalidInput

__all__ = ["Conversation", "DayFile", "ExportMessage", "MalformedExport", "SlackExport"]

# The listing files, and the kind of conversation each lists ("channel" only is public).
_LISTINGS = {
    "channels.json": "channel",
    "groups.json": "group",
    "dms.json": "im",
    "mpims.json": "mpim",
}
_DAY = re.compile(r"^(?P<folder>[^/]+)/(?P<day>\d{4}-\d{2}-\d{2})\.json$")
# The subtypes of a message a person wrote (as the live frontend reads them, bots aside).
HUMAN_SUBTYPES = frozenset({None, "thread_broadcast", "file_share", "me_message"})
# Why a message that is no one's words is left out, by subtype (the rest: "other").
_NOISE = {
    "channel_join": "join",
    "channel_leave": "join",
    "group_join": "join",
    "group_leave": "join",
    "bot_message": "bot",
    "bot_add": "bot",
    "bot_remove": "bot",
    "message_deleted": "deleted",
    "tombstone": "deleted",
}
_EDIT = "message_changed"


class MalformedExport(InvalidInput):
    """A file of the export cannot be read: the message names the file in the zip and the line."""


@dataclass(frozen=True, slots=True)
class Conversation:
    """One conversation of the export: its Slack id, name, kind (channel, group, im, mpim),
    its folder in the zip, whether it is private and whether it is shared outside."""

    id: str
    name: str
    kind: str
    folder: str
    private: bool
    shared: bool = False


@dataclass(frozen=True, slots=True)
class DayFile:
    """One day of one conversation: the member of the zip that holds it."""

    conversation: Conversation
    day: date
    member: str


@dataclass(frozen=True, slots=True)
class ExportMessage:
    """A message of a day file, as the export has it after that day's edits.

    ``text`` is Slack's text (mrkdwn), with the names of any shared files after it;
    ``thread`` is the thread it belongs to (its own ``ts`` when it starts none); ``noise``
    says why it is no one's words (a join, a bot, a deletion...), None for a person's message.
    ``edit`` marks the last text of a message an earlier file holds (a ``message_changed``
    event whose message is not in this file): ``ts`` is that message's.
    """

    ts: str
    thread: str
    user: str
    text: str
    line: int
    noise: str | None = None
    edit: bool = False


class SlackExport:
    """An open Slack export: its people, its conversations, and its day files on demand.

    Raises MalformedExport when the zip or a listing cannot be read (naming which), and
    InvalidInput when the file is not a zip. Close it (or use it in a ``with``).
    """

    def __init__(self, path: Path) -> None:
        try:
            self._zip = zipfile.ZipFile(path)
        except (OSError, zipfile.BadZipFile) as exc:
            raise InvalidInput(f"{path} is not a readable zip file: {exc}") from exc
        self.path = path
        names = set(self._zip.namelist())
        self.people: dict[str, Person] = {}
        self.names: dict[str, str] = {}
        self.team = ""
        if "users.json" in names:
            self._read_users()
        self.conversations: dict[str, Conversation] = {}
        for listing, kind in _LISTINGS.items():
            if listing in names:
                for at, entry in self._entries(listing):
                    conversation = _conversation(listing, at, entry, kind)
                    self.conversations[conversation.folder] = conversation

    def __enter__(self) -> SlackExport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()

    def members(self) -> list[zipfile.ZipInfo]:
        """What the zip holds: each member's name, size and checksum (none of its bytes)."""
        return self._zip.infolist()

    def days(
        self,
        channels: Iterable[str] = (),
        since: date | None = None,
        until: date | None = None,
    ) -> list[DayFile]:
        """The day files to read, in order of conversation and day: only the conversations
        ``channels`` names (by name or id; all when empty), and days from ``since`` to
        ``until`` (both included). Raises InvalidInput for a channel the export does not have.
        """
        wanted = set(channels)
        found: list[DayFile] = []
        matched: set[str] = set()
        for member in self._zip.namelist():
            hit = _DAY.match(member)
            if hit is None:
                continue
            folder = hit["folder"]
            conversation = self.conversations.get(folder) or Conversation(
                id=folder, name=folder, kind="unlisted", folder=folder, private=True
            )
            if wanted:
                names = {conversation.name, conversation.id, conversation.folder}
                if not names & wanted:
                    continue
                matched |= names & wanted
            try:
                day = date.fromisoformat(hit["day"])
            except ValueError as exc:
                raise MalformedExport(f"{member}: the file name is not a date ({exc})") from exc
            if (since and day < since) or (until and day > until):
                continue
            found.append(DayFile(conversation, day, member))
        known = {n for c in self.conversations.values() for n in (c.name, c.id, c.folder)}
        missing = sorted(wanted - matched - known)
        if missing:
            raise InvalidInput(f"the export has no channel {', '.join(missing)}")
        return sorted(found, key=lambda d: (d.conversation.folder, d.day))

    def messages(self, day: DayFile) -> list[ExportMessage]:
        """The messages of ``day``, edits applied (a message keeps its last text), in the
        file's order; then, marked ``edit``, the last text of each message of an earlier file
        that ``day`` edits. Raises MalformedExport naming the file and line of what is
        malformed."""
        edits: dict[str, ExportMessage] = {}
        messages: list[ExportMessage] = []
        for line, item in self._entries(day.member):
            if item.get("subtype") == _EDIT and isinstance(item.get("message"), dict):
                edited = _message(day.member, line, item["message"])
                edits[edited.ts] = replace(edited, edit=True)
                continue
            messages.append(_message(day.member, line, item))
        if not edits:
            return messages
        here = {m.ts for m in messages}
        earlier = [e for ts, e in edits.items() if ts not in here]
        return [
            m if m.ts not in edits or m.noise else replace(m, text=edits[m.ts].text)
            for m in messages
        ] + earlier

    def _read_users(self) -> None:
        teams: dict[str, int] = {}
        for _, user in self._entries("users.json"):
            uid = str(user.get("id") or "")
            if not uid:
                continue
            team = str(user.get("team_id") or "")
            teams[team] = teams.get(team, 0) + 1
            profile = user.get("profile") if isinstance(user.get("profile"), dict) else {}
            self.names[uid] = str(
                (profile or {}).get("display_name")
                or (profile or {}).get("real_name")
                or user.get("real_name")
                or user.get("name")
                or uid
            )
        # The workspace is the team most of its people belong to (guests of others aside).
        self.team = max(teams, key=lambda t: teams[t]) if teams else ""
        for _, user in self._entries("users.json"):
            uid = str(user.get("id") or "")
            if uid:
                self.people[uid] = Person.from_user(user, self.team)

    def _entries(self, member: str) -> Iterator[tuple[int, dict[str, Any]]]:
        """The objects of the JSON array in ``member``, each with the line it starts on."""
        try:
            raw = self._zip.read(member)
        except (OSError, zipfile.BadZipFile, KeyError) as exc:
            raise MalformedExport(f"{member}: cannot be read from the zip ({exc})") from exc
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            raise MalformedExport(f"{member}, line {line}: not UTF-8 text") from exc
        yield from _array(member, text)


def _array(member: str, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """The objects of the JSON array ``text`` (of ``member``), each with its first line."""
    decoder = json.JSONDecoder()
    at = _skip_space(text, 0)
    if not text.startswith("[", at):
        raise MalformedExport(f"{member}, line {_line(text, at)}: not a JSON array")
    at = _skip_space(text, at + 1)
    if text.startswith("]", at):
        _expect_end(member, text, at + 1)
        return
    while True:
        try:
            item, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            raise MalformedExport(
                f"{member}, line {exc.lineno}, column {exc.colno}: {exc.msg}"
            ) from exc
        if not isinstance(item, dict):
            raise MalformedExport(f"{member}, line {_line(text, at)}: not a JSON object")
        yield _line(text, at), item
        at = _skip_space(text, end)
        if text.startswith("]", at):
            _expect_end(member, text, at + 1)
            return
        if not text.startswith(",", at):
            raise MalformedExport(
                f"{member}, line {_line(text, at)}: expected ',' or ']' between messages"
            )
        at = _skip_space(text, at + 1)


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _expect_end(member: str, text: str, at: int) -> None:
    at = _skip_space(text, at)
    if at != len(text):
        raise MalformedExport(f"{member}, line {_line(text, at)}: text after the JSON array")


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def _conversation(listing: str, line: int, entry: dict[str, Any], kind: str) -> Conversation:
    cid = entry.get("id")
    if not isinstance(cid, str) or not cid:
        raise MalformedExport(f"{listing}, line {line}: a conversation without an id")
    name = str(entry.get("name") or cid)
    # Direct messages are filed under their id, the others under their name.
    folder = cid if kind == "im" else name
    public = kind == "channel" and entry.get("is_private") is not True
    shared = shared_outside(entry)
    return Conversation(cid, name, kind, folder, private=not public or shared, shared=shared)


def _message(member: str, line: int, item: dict[str, Any]) -> ExportMessage:
    ts = item.get("ts")
    if not isinstance(ts, str) or not re.fullmatch(r"\d+(\.\d+)?", ts):
        raise MalformedExport(f"{member}, line {line}: a message without a valid ts")
    subtype = item.get("subtype")
    user = item.get("user")
    thread = item.get("thread_ts")
    thread = thread if isinstance(thread, str) and thread else ts
    noise: str | None = None
    if item.get("bot_id") or subtype == "bot_message":
        noise = "bot"
    elif subtype not in HUMAN_SUBTYPES:
        noise = _NOISE.get(str(subtype), "other")
    elif item.get("hidden"):
        noise = "other"
    elif not isinstance(user, str) or not user:
        noise = "no author"
    return ExportMessage(ts, thread, str(user or ""), _text(item), line, noise)


def _text(item: dict[str, Any]) -> str:
    """A message's text, with the names of the files it shared after it (their bytes are
    not in an export, only links that need a token)."""
    text = item.get("text")
    text = text if isinstance(text, str) else ""
    files = item.get("files")
    if isinstance(files, list):
        names = [
            str(f.get("title") or f.get("name"))
            for f in files
            if isinstance(f, dict) and (f.get("title") or f.get("name"))
        ]
        if names:
            text = f"{text}\n[shared: {', '.join(names)}]".strip()
    return text
