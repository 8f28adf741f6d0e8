"""A Matrix room's history into memory: every person's message an episode of the room.

``cairn import matrix ROOM`` reads the room from the homeserver as the bot, newest first, a page
of events at a time (``/messages``, backwards), with the bot's own device: in an encrypted room
nio decrypts each event with the room keys the bot holds, and one whose key it never got is
counted as ``undecryptable``, not imported. Each message passes what a live one passes
(:mod:`cairn.bot.imported`): the author's trust is the live one (a user of a homeserver outside
CAIRN_MATRIX_TRUSTED_SERVERS is untrusted; a blocked device is not heard), and a room that is
not public, or is encrypted, keeps what was said in it private to itself. A thread reply is
kept in its thread; an edit gives its message its last text (the episode an earlier run kept
from it too: :meth:`~cairn.bot.imported.Episodes.edit`); joins and leaves, notices (what bots
send), the bot's own messages, deletions and bare files are left out and counted.

Only the pages still to read are held, never the whole room. A checkpoint beside the data
(``CAIRN_HOME/imports/matrix-*.json``, named by the tenant, the room and the dates chosen) says
how far the run got: the page token to continue from, and the newest event of a finished run
(its ``floor``). A run killed part-way continues from its token, then reads what was said
since it began, down to where it began; a run after a finished one reads only what is new. It
holds event ids and tokens, never a message's text (docs/adr/0044).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from time import monotonic
from typing import Any

from nio import (
    AsyncClient,
    MegolmEvent,
    MessageDirection,
    RedactedEvent,
    RoomGetEventResponse,
    RoomGetStateResponse,
    RoomMemberEvent,
    RoomMessageEmote,
    RoomMessageNotice,
    RoomMessagesResponse,
    RoomMessageText,
)
from sqlmodel import select

from cairn.bot.imported import ChannelTally, Episodes, ImportReport
from cairn.bot.matrix.account import PLATFORM, BotAccount
from cairn.bot.matrix.crypto import DeviceTrust
from cairn.bot.matrix.files import MEDIA_EVENTS, caption
from cairn.bot.matrix.handover import Desk, ImportRequest, Status
from cairn.bot.matrix.mentions import strip_reply_fallback
from cairn.bot.matrix.privacy import private_room
from cairn.bot.matrix.retry import CONNECTION_ERRORS
from cairn.bot.matrix.trust import is_untrusted
from cairn.core.errors import CairnError, ConfigError, StorageError
from cairn.core.progress import ProgressCallback
from cairn.core.settings import Settings
from cairn.db.models import MemoryRow
from cairn.memory.store import MemoryStore
from cairn.sessions.events import ChatEvent

__all__ = [
    "PAGE_EVENTS",
    "Checkpoint",
    "MatrixImport",
    "RoomHistoryError",
    "RoomReader",
    "checkpoint_path",
    "import_room",
    "serve_requests",
]

log = logging.getLogger(__name__)

LOGIN_SECONDS = 60.0
"""How long the import waits for the homeserver to let the bot log in."""

PAGE_EVENTS = 200
"""Events asked for per page of ``/messages``."""

_TEXT_EVENTS = (RoomMessageText, RoomMessageEmote)


class RoomHistoryError(CairnError):
    """The homeserver would not give the room's state or history (the bot is not in the room,
    the room does not exist, the server is away): the message says which, and what was done."""


def checkpoint_path(
    home: Path, tenant: str, room_id: str, since: date | None, until: date | None
) -> Path:
    """The checkpoint of importing ``room_id`` into ``tenant`` between ``since`` and
    ``until``: another choice of dates is another import, with a checkpoint of its own."""
    key = "\0".join((tenant, room_id, str(since or ""), str(until or "")))
    return home / "imports" / f"matrix-{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


@dataclass
class Checkpoint:
    """Where an import of a room stands: ``floor``, the newest event of the last finished run (a
    later run stops there); ``top`` and ``resume``, the newest event of the run under way and
    the token of its next page; ``edits``, the edits read whose message is not yet (by id)."""

    floor: str | None = None
    top: str | None = None
    resume: str | None = None
    edits: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Checkpoint:
        if not path.exists():
            return cls()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(
                floor=data.get("floor"),
                top=data.get("top"),
                resume=data.get("resume"),
                edits=dict(data.get("edits") or {}),
            )
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise StorageError(
                f"the import checkpoint {path} cannot be read ({exc}); delete it to read the "
                "room from its newest message again (nothing is imported twice)"
            ) from exc

    def save(self, path: Path) -> None:
        """Write it whole or not at all (a kill mid-write leaves the previous one)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        data = {"floor": self.floor, "top": self.top, "resume": self.resume, "edits": self.edits}
        with partial.open("w", encoding="utf-8") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)


@dataclass(frozen=True)
class _Room:
    """What the room's state says: its name, whether it is private, who is called what."""

    id: str
    name: str
    private: bool
    names: dict[str, str]


class MatrixImport:
    """One import of one room, read through ``client`` (logged in as ``account``) into
    ``memory`` for ``agent``. ``trusted_servers`` is CAIRN_MATRIX_TRUSTED_SERVERS and
    ``trust`` the device policy (None when encryption is off); ``since`` and ``until`` keep
    the days between them (inclusive)."""

    def __init__(
        self,
        memory: MemoryStore,
        client: AsyncClient,
        account: BotAccount,
        *,
        agent: str,
        max_chars: int,
        trusted_servers: tuple[str, ...],
        trust: DeviceTrust | None = None,
        since: date | None = None,
        until: date | None = None,
    ) -> None:
        self.memory = memory
        self.client = client
        self.account = account
        self.episodes = Episodes(memory, agent=agent, max_chars=max_chars)
        self.trusted_servers = trusted_servers
        self.trust = trust
        self.since_ms = _ms(since) if since else None
        self.until_ms = _ms(until + timedelta(days=1)) if until else None
        self._edits: dict[str, dict[str, Any]] = {}  # message id -> its last edit's content
        self._events = 0  # events read by this run, for progress

    async def room_id(self, room: str) -> str:
        """``room`` as a room id: an alias (``#ops:example.org``) is resolved."""
        if not room.startswith("#"):
            return room
        response = await self.client.room_resolve_alias(room)
        room_id = getattr(response, "room_id", None)
        if not isinstance(room_id, str):
            raise RoomHistoryError(
                f"the homeserver does not know the room alias {room}: {response}"
            )
        return room_id

    async def run(
        self,
        room_id: str,
        *,
        checkpoint: Path,
        progress: ProgressCallback | None = None,
        full: bool = False,
    ) -> ImportReport:
        """Import what the checkpoint says is still to read of ``room_id`` (all of it with
        ``full``, or when the database holds none of its episodes). Index work is left in the
        outbox for the caller's ``memory.flush_outbox``. Raises RoomHistoryError when the
        homeserver refuses, StorageError when the database fails; the pages before stay
        imported, and the next run continues after them."""
        room = await self._room(room_id)
        state = Checkpoint() if full else Checkpoint.load(checkpoint)
        if (state.floor or state.resume) and not self._imported_before(room.id):
            state = Checkpoint()  # the database was emptied or replaced: all of it again
        tally = ChannelTally(room.name, "room", room.private)
        self._events = 0
        if state.resume is not None:  # a run was stopped: its pages first, down to its floor
            await self._pages(room, state, checkpoint, tally, progress, start=state.resume)
        await self._pages(room, state, checkpoint, tally, progress, start=None)
        return ImportReport(self.account.tenant, {room.id: tally}, tally.days, 0, unit="pages")

    async def _room(self, room_id: str) -> _Room:
        response = await self.client.room_get_state(room_id)
        if not isinstance(response, RoomGetStateResponse):
            raise RoomHistoryError(
                f"the homeserver would not show {room_id} to {self.account.user_id} ({response}): "
                "is the bot in the room? Invite it, and run the import once it has joined"
            )
        join_rule: object = None
        encrypted = False
        name = alias = ""
        names: dict[str, str] = {}
        for event in response.events:
            kind, content = event.get("type"), event.get("content") or {}
            if kind == "m.room.join_rules":
                join_rule = content.get("join_rule")
            elif kind == "m.room.encryption":
                encrypted = True
            elif kind == "m.room.name":
                name = str(content.get("name") or "")
            elif kind == "m.room.canonical_alias":
                alias = str(content.get("alias") or "")
            elif kind == "m.room.member" and isinstance(content.get("displayname"), str):
                names[str(event.get("state_key"))] = str(content["displayname"])
        private = private_room(join_rule, encrypted)
        # The name a person sees first, as the live frontend shows it (nio's display name).
        return _Room(room_id, name or alias or room_id, private, names)

    def _imported_before(self, room_id: str) -> bool:
        """Whether the database holds an episode imported (or heard) from ``room_id``."""
        with self.memory.db.session() as s:
            found = s.exec(
                select(MemoryRow.id)
                .where(
                    MemoryRow.tenant_id == self.account.tenant,
                    MemoryRow.kind == "episode",
                    MemoryRow.source_platform == PLATFORM,
                    MemoryRow.source_channel == room_id,
                )
                .limit(1)
            ).first()
        return found is not None

    async def _pages(
        self,
        room: _Room,
        state: Checkpoint,
        checkpoint: Path,
        tally: ChannelTally,
        progress: ProgressCallback | None,
        *,
        start: str | None,
    ) -> None:
        """Read pages back from ``start`` (the newest event when None) down to the floor, the
        first event before ``since``, or the room's beginning; the checkpoint is saved after
        each page is written, and names the new floor once they are all read."""
        token = start
        floor = state.floor
        while True:
            response = await self.client.room_messages(
                room.id, start=token, direction=MessageDirection.back, limit=PAGE_EVENTS
            )
            if not isinstance(response, RoomMessagesResponse):
                raise RoomHistoryError(
                    f"the homeserver would not give {room.id}'s history ({response}); "
                    "what was read before is imported, and the next run continues after it"
                )
            if start is None and state.top is None and response.chunk:
                state.top = response.chunk[0].event_id
            reached = False
            for event in response.chunk:
                if event.event_id == floor or (
                    self.since_ms is not None and event.server_timestamp < self.since_ms
                ):
                    reached = True
                    break
                await self._take(room, event, state, tally)
            self._events += len(response.chunk)
            if progress is not None:  # events read; how many the room holds is not known
                progress(self._events, self._events)
            tally.days += 1
            token = response.end
            if reached or not response.chunk or not token:
                break
            state.resume = token
            state.save(checkpoint)
        await self._edits_of_earlier(room, state, tally)
        # Everything down to the floor is read: what this pass began at is the floor now.
        state.floor = state.top or floor
        state.top = state.resume = None
        state.edits.clear()
        self._edits.clear()
        state.save(checkpoint)

    async def _take(self, room: _Room, event: Any, state: Checkpoint, tally: ChannelTally) -> None:
        """One event of the room's history, newest first."""
        if self.until_ms is not None and event.server_timestamp >= self.until_ms:
            return
        if isinstance(event, RoomMemberEvent):
            tally.read += 1
            tally.skip("join")
            return
        if isinstance(event, MegolmEvent):
            tally.read += 1
            tally.skip("bot" if event.sender == self.account.user_id else "undecryptable")
            return
        if isinstance(event, RedactedEvent):
            if event.source.get("type") == "m.room.message":
                tally.read += 1
                tally.skip("deleted")
            return
        if not isinstance(event, (*_TEXT_EVENTS, RoomMessageNotice, *MEDIA_EVENTS)):
            return  # reactions, redactions, state: not messages
        content: dict[str, Any] = event.source.get("content") or {}
        relation: dict[str, Any] = content.get("m.relates_to") or {}
        if relation.get("rel_type") == "m.replace":
            self._edit(event, content, relation, state)
            return
        tally.read += 1
        if event.sender == self.account.user_id or isinstance(event, RoomMessageNotice):
            tally.skip("bot")
            return
        if getattr(event, "decrypted", False) and await self._blocked(event):
            tally.skip("blocked device")
            return
        text = await self._text(room, event, content, relation, state)
        if not text:
            tally.skip("file" if isinstance(event, MEDIA_EVENTS) else "empty")
            return
        root = relation.get("event_id")
        in_thread = relation.get("rel_type") == "m.thread" and isinstance(root, str)
        sender = str(event.sender)
        chat = ChatEvent(
            platform=PLATFORM,
            tenant=self.account.tenant,
            channel=room.id,
            thread=str(root) if in_thread else str(event.event_id),
            user=sender,
            text=text,
            message_id=str(event.event_id),
            untrusted=is_untrusted(sender, self.trusted_servers),
            private=room.private,
            conversation=room.name if room.name != room.id else "",
        )
        name = room.names.get(sender) or sender.partition(":")[0].lstrip("@")
        at = datetime.fromtimestamp(event.server_timestamp / 1000, UTC)
        self.episodes.keep(chat, name, at, tally)

    def _edit(
        self, event: Any, content: dict[str, Any], relation: dict[str, Any], state: Checkpoint
    ) -> None:
        """Keep the newest edit of each message (the first one read, going back in time)."""
        original, new = relation.get("event_id"), content.get("m.new_content")
        if not isinstance(original, str) or not isinstance(new, dict):
            return
        if original in state.edits:
            return
        state.edits[original] = str(event.event_id)
        self._edits[original] = {"sender": str(event.sender), "content": new}

    async def _edits_of_earlier(self, room: _Room, state: Checkpoint, tally: ChannelTally) -> None:
        """The edits read whose message was not: of one an earlier run imported (or said
        before ``since``). Each gives the episode kept from its message the last text, or is
        counted when memory holds none (:meth:`~cairn.bot.imported.Episodes.edit`)."""
        for original, edit_id in list(state.edits.items()):
            edit = self._edits.get(original) or await self._fetched_edit(room.id, edit_id)
            if edit is None:
                continue  # read by a stopped run, and unreadable now
            tally.read += 1
            text = str(edit["content"].get("body") or "").strip()
            if not text:
                tally.skip("empty")
                continue
            sender = edit["sender"]
            chat = ChatEvent(
                platform=PLATFORM,
                tenant=self.account.tenant,
                channel=room.id,
                thread=original,  # the message's own thread is the episode's
                user=sender,
                text=text,
                message_id=original,
                untrusted=is_untrusted(sender, self.trusted_servers),
                private=room.private,
                conversation=room.name if room.name != room.id else "",
            )
            name = room.names.get(sender) or sender.partition(":")[0].lstrip("@")
            self.episodes.edit(chat, name, tally)

    async def _text(
        self,
        room: _Room,
        event: Any,
        content: dict[str, Any],
        relation: dict[str, Any],
        state: Checkpoint,
    ) -> str:
        """The message's text as last edited by its sender (a file: its caption)."""
        edit_id = state.edits.pop(str(event.event_id), None)
        edit = self._edits.pop(str(event.event_id), None)
        if edit_id is not None and edit is None:  # read by a run that was stopped: fetch it
            edit = await self._fetched_edit(room.id, edit_id)
        if edit is not None and edit["sender"] == event.sender:
            content = edit["content"]
        text = (
            caption(content) if isinstance(event, MEDIA_EVENTS) else str(content.get("body") or "")
        )
        if "m.in_reply_to" in relation and not relation.get("is_falling_back"):
            text = strip_reply_fallback(text)
        return text.strip()

    async def _fetched_edit(self, room_id: str, edit_id: str) -> dict[str, Any] | None:
        response = await self.client.room_get_event(room_id, edit_id)
        if not isinstance(response, RoomGetEventResponse):
            return None
        event = response.event
        if isinstance(event, MegolmEvent):
            try:
                event = self.client.decrypt_event(event)
            except Exception:  # nio raises EncryptionError; the edit is then unread
                return None
        new = (event.source.get("content") or {}).get("m.new_content")
        return {"sender": str(event.sender), "content": new} if isinstance(new, dict) else None

    async def _blocked(self, event: Any) -> bool:
        if self.trust is None:
            return False
        return await self.trust.is_blocked_sender(
            self.client, str(event.sender), str(event.sender_key)
        )


def _ms(day: date) -> int:
    """Midnight UTC at the start of ``day``, in milliseconds since the epoch."""
    return int(datetime.combine(day, time.min, UTC).timestamp() * 1000)


LOCK_WAIT_SECONDS = 30.0
"""How long an import waits for a frontend that stopped part-way through its request to let the
device go, before it takes the device over and continues from the checkpoint itself."""

TAKE_SECONDS = 60.0
"""How long an import waits for the running frontend to take its request."""

POLL_SECONDS = 0.25
"""How often the import command and the frontend look at the request folder."""


async def import_room(
    settings: Settings,
    memory: MemoryStore,
    room: str,
    *,
    since: date | None = None,
    until: date | None = None,
    full: bool = False,
    progress: ProgressCallback | None = None,
    say: Callable[[str], None] | None = None,
) -> ImportReport:
    """Import ``room`` (an id or an alias) as the bot of ``settings``, with its saved device
    and crypto store. When a frontend runs (``cairn run``) it holds them: the import is then
    handed to it (:mod:`~cairn.bot.matrix.handover`), and taken over from its checkpoint if
    that frontend stops part-way; ``say`` hears a line on each of these turns.

    Raises ConfigError when Matrix is not configured, or when the device is held by a process
    that takes no requests (another import); RoomHistoryError when the homeserver refuses."""
    from cairn.bot.matrix.store import AccountHeld, AccountLock, CryptoStore

    if not (settings.matrix.homeserver and settings.matrix.user_id):
        raise ConfigError("cairn import matrix needs MATRIX_HOMESERVER and MATRIX_USER_ID")
    account = BotAccount(settings.matrix.homeserver.rstrip("/"), settings.matrix.user_id)
    store = CryptoStore(settings.matrix.store_dir(settings.home_dir), account.user_id)
    desk = Desk(store)
    let_go_by: float | None = None  # when a frontend that stopped part-way must have let go
    while True:
        try:
            with AccountLock(store):
                return await _import_here(
                    settings, memory, account, store, room, since, until, full, progress
                )
        except AccountHeld as held:
            if held.pid is not None and desk.server() == held.pid:
                if say is not None:
                    say(f"the running bot (process {held.pid}) holds the device: it reads {room}")
                report = await _handed_over(desk, held.pid, room, since, until, full, progress)
                if report is not None:
                    return report
                if say is not None:
                    say("the running bot stopped before it finished: continuing here")
                let_go_by = monotonic() + LOCK_WAIT_SECONDS  # stopped part-way: take over
            elif let_go_by is None or monotonic() > let_go_by:
                raise
            await asyncio.sleep(POLL_SECONDS)


async def _import_here(
    settings: Settings,
    memory: MemoryStore,
    account: BotAccount,
    store: Any,
    room: str,
    since: date | None,
    until: date | None,
    full: bool,
    progress: ProgressCallback | None,
) -> ImportReport:
    """The import, read by this process with the device (whose lock the caller holds)."""
    from cairn.bot.matrix.client import bot_client
    from cairn.bot.matrix.login import Login
    from cairn.bot.matrix.sync_state import StateFile

    state_file = StateFile(settings.home_dir / "matrix", account.user_id)
    state = state_file.load(account.homeserver, account.user_id)
    client = bot_client(settings, account, state, store)
    try:
        login = Login(account, settings, state, state_file).log_in(client)
        try:
            await asyncio.wait_for(login, LOGIN_SECONDS)
        except TimeoutError:
            raise RoomHistoryError(
                f"could not log in to {account.homeserver} as {account.user_id} within "
                f"{LOGIN_SECONDS:g}s: is the homeserver up? Nothing was imported"
            ) from None
        trust = None
        if settings.matrix.encryption:
            trust = DeviceTrust(account, settings.matrix.trusted, settings.matrix.blocked)
        reader = RoomReader(settings, memory, client, account, trust)
        return await reader.read(ImportRequest("", room, since, until, full), progress)
    finally:
        await client.close()


@dataclass(frozen=True)
class RoomReader:
    """What reading a room's history takes: ``client``, logged in as ``account`` (this
    process's own, or a running frontend's), the device policy ``trust`` (None when encryption
    is off), and where the episodes go."""

    settings: Settings
    memory: MemoryStore
    client: AsyncClient
    account: BotAccount
    trust: DeviceTrust | None

    async def read(
        self, request: ImportRequest, progress: ProgressCallback | None = None
    ) -> ImportReport:
        """Import what ``request`` asks. Raises RoomHistoryError when the homeserver refuses or
        is lost (what was read before stays imported)."""
        settings, account = self.settings, self.account
        importer = MatrixImport(
            self.memory,
            self.client,
            account,
            agent=settings.agent,
            max_chars=settings.max_message_chars,
            trusted_servers=settings.matrix.trusted,
            trust=self.trust,
            since=request.since,
            until=request.until,
        )
        try:
            room_id = await importer.room_id(request.room)
            checkpoint = checkpoint_path(
                settings.home_dir, account.tenant, room_id, request.since, request.until
            )
            return await importer.run(
                room_id, checkpoint=checkpoint, progress=progress, full=request.full
            )
        except CONNECTION_ERRORS as exc:
            raise RoomHistoryError(
                f"lost {account.homeserver} ({exc or type(exc).__name__}); what was read "
                "before is imported, and the next run continues after it"
            ) from exc


async def _handed_over(
    desk: Desk,
    pid: int,
    room: str,
    since: date | None,
    until: date | None,
    full: bool,
    progress: ProgressCallback | None,
) -> ImportReport | None:
    """Ask the running frontend (process ``pid``) to import ``room``, and follow it: its
    tally once it is done, None when it stopped or died part-way (the caller then takes the
    device over and continues from the checkpoint). Raises RoomHistoryError with the
    frontend's reason when its import failed, or when it does not take the request."""
    request_id = desk.ask(room, since, until, full)
    asked = monotonic()
    taken = False
    try:
        while True:
            status = desk.status(request_id)
            taken = taken or status is not None or not desk.waiting(request_id)
            if status is not None and progress is not None and status.events:
                progress(status.events, status.events)
            if status is not None and status.state == "done" and status.report is not None:
                return _report(status.report)
            if status is not None and status.state == "failed":
                raise RoomHistoryError(f"the running frontend (process {pid}): {status.error}")
            if status is not None and status.state == "stopped":
                return None
            if desk.server() != pid:  # stopped, or killed: no status will come
                if taken or desk.withdraw(request_id):
                    return None
                taken = True  # taken just now, by the frontend on its way out
            elif not taken and monotonic() - asked > TAKE_SECONDS and desk.withdraw(request_id):
                raise RoomHistoryError(
                    f"the running frontend (process {pid}) did not take the import within "
                    f"{TAKE_SECONDS:g}s; nothing was imported. Is it stuck? Its log says why"
                )
            await asyncio.sleep(POLL_SECONDS)
    finally:
        desk.forget(request_id)


def _report(data: dict[str, Any]) -> ImportReport:
    """An import's tally from its JSON form (``dataclasses.asdict``)."""
    channels = {key: ChannelTally(**tally) for key, tally in data["channels"].items()}
    return ImportReport(
        data["tenant"], channels, data["days"], data["resumed"], data.get("unit", "pages")
    )


async def serve_requests(reader: RoomReader, desk: Desk) -> None:
    """A running frontend's side: take the import requests of ``desk`` one at a time and read
    each with ``reader`` (the frontend's client), until cancelled. The caller holds the device
    and has opened the desk (:meth:`~cairn.bot.matrix.handover.Desk.open`)."""
    while True:
        request = desk.take()
        if request is None:
            await asyncio.sleep(POLL_SECONDS)
            continue
        await _serve(reader, desk, request)


async def _serve(reader: RoomReader, desk: Desk, request: ImportRequest) -> None:
    def progress(done: int, total: int) -> None:
        desk.tell(request.id, Status("running", done))

    log.info("importing the history of %s, asked by `cairn import matrix`", request.room)
    desk.tell(request.id, Status("running"))
    try:
        report = await reader.read(request, progress)
    except asyncio.CancelledError:
        desk.tell(request.id, Status("stopped"))  # the command takes over from the checkpoint
        raise
    except CairnError as exc:
        desk.tell(request.id, Status("failed", error=str(exc)))
    except Exception as exc:  # the command must hear of any failure, and the frontend go on
        log.exception("the import of %s failed", request.room)
        desk.tell(request.id, Status("failed", error=f"{type(exc).__name__}: {exc}"))
    else:
        desk.tell(request.id, Status("done", report=asdict(report)))
        log.info("imported %d episodes of %s", report.stored, request.room)
    finally:
        desk.done(request.id)
