"""A person with an end-to-end-encrypting Matrix client, for tests against a real Synapse.

:class:`E2EPerson` is matrix-nio's ``AsyncClient`` with encryption on, run on its own asyncio
loop in a daemon thread and driven from synchronous test code. It logs in with the account's
password (a new device, its crypto store in a folder the test gives), uploads its keys and syncs
continuously, doing between syncs what nio's ``sync_forever`` does (to-device messages, key
upload, query and claim). It trusts every device it sees (``ignore_unverified_devices``), so it
shares its room keys with everyone in its rooms, as a person who never verifies does.

It sends what Element sends: mentions, thread replies, edits, and reactions that are encrypted in
an encrypted room (nio itself sends reactions in clear). For the bot's key-waiting paths it can
also send a message whose key it shares only later (:meth:`E2EPerson.send_withheld`) or never
(:meth:`E2EPerson.send_undecryptable`). Every timeline event it receives is kept, per room and in
order, decrypted where possible; events whose key arrives later are decrypted then and replace the
undecrypted ones in place. Each method waits for its result and raises AssertionError on a Matrix
error or when it does not finish in time.

nio's crypto stores are not safe for clients on several threads of one process (people, and the
bot's frontend in a thread); :func:`serialize_nio_stores`, which every person calls, makes them so.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import html
import io
import json
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import quote
from uuid import uuid4

import peewee  # type: ignore[import-untyped]
from nio import (
    AsyncClient,
    AsyncClientConfig,
    ErrorResponse,
    Event,
    MegolmEvent,
    RoomPreset,
    SyncResponse,
    ToDeviceMessage,
    UploadResponse,
)
from nio.crypto import OutboundGroupSession
from nio.exceptions import EncryptionError

from tests.support.matrix_events import (
    MEGOLM,
    encryption_state,
    reaction,
    room_preset,
    thread_relation,
)
from tests.support.synapse import Synapse, User

__all__ = ["E2EPerson", "Text", "serialize_nio_stores"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Text = tuple[str, str, str, dict[str, Any]]
"""A received text message: (event id, sender, body, content)."""

CLIENT_API = "/_matrix/client/v3"
SYNC_TIMEOUT_MS = 1000
SYNC_RETRY_SECONDS = 1.0
CALL_SECONDS = 60.0
WAIT_SECONDS = 60.0
STOP_SECONDS = 20.0
REQUEST_SECONDS = 30.0

_STORE_LOCK = threading.RLock()


def serialize_nio_stores() -> None:
    """Make nio's crypto stores safe for several clients on several threads of one process.

    nio's SQLite stores share process-wide peewee model classes and bind them to their own
    database for each operation (``database.bind_ctx(models)``). Two clients on two threads (two
    people, or a person and the bot's frontend) then read and write each other's database, or
    none ("Query must be bound to a database"). Holding one lock from binding to unbinding
    makes each store operation whole; one client alone never waits. Idempotent.
    """
    context: Any = peewee._BoundModelsContext
    if getattr(context, "serialized_by_cairn_tests", False):
        return
    bind, unbind = context.__enter__, context.__exit__

    def locked_bind(self: Any) -> Any:
        _STORE_LOCK.acquire()
        try:
            return bind(self)
        except BaseException:
            _STORE_LOCK.release()
            raise

    def locked_unbind(self: Any, *exc_info: object) -> Any:
        try:
            return unbind(self, *exc_info)
        finally:
            _STORE_LOCK.release()

    context.__enter__ = locked_bind
    context.__exit__ = locked_unbind
    context.serialized_by_cairn_tests = True


class E2EPerson:
    """Someone in encrypted rooms: a nio client with its own device, driven synchronously.

    ``store`` is a folder for the device's crypto store (created if missing). Use it as a
    context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self, synapse: Synapse, user: User, store: Path, *, device_name: str = "cairn-test"
    ) -> None:
        self.synapse = synapse
        self.user = user
        self.store = store
        self.device_name = device_name
        serialize_nio_stores()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"e2e-{user.user_id}", daemon=True
        )
        self._client: AsyncClient | None = None
        self._sync_task: asyncio.Task[None] | None = None
        self._synced: asyncio.Condition | None = None
        self._crypto_lock: asyncio.Lock | None = None
        # The timeline, written by the loop's thread and read by the test's, under this lock.
        self._seen = threading.Condition()
        self._timeline: dict[str, list[Event]] = {}
        self._tried: set[str] = set()
        self._mentions: dict[str, str | None] = {}

    # ----------------------------------------------------------------------------------------
    # Life cycle

    def start(self) -> E2EPerson:
        """Log in with a new device, upload its keys and start syncing; returns self."""
        self._thread.start()
        try:
            self._call(self._start(), "logging in")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop syncing, close the client and end the loop's thread (idempotent)."""
        if self._loop.is_closed():
            return
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                self._call(self._shutdown(), "stopping", timeout=STOP_SECONDS)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(STOP_SECONDS)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> E2EPerson:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def id(self) -> str:
        """The user id."""
        return self.user.user_id

    @property
    def device_id(self) -> str:
        """This client's device id (set by :meth:`start`)."""
        return str(self._nio.device_id)

    # ----------------------------------------------------------------------------------------
    # Rooms

    def create_room(
        self,
        *,
        invite: tuple[str, ...] = (),
        encrypted: bool = True,
        direct: bool = False,
        public: bool = False,
    ) -> str:
        """A new room, once this client has synced it: invite-only (``private_chat``), or anyone
        may join (``public``), or a direct chat (``direct``: ``trusted_private_chat`` flagged
        ``is_direct``); Megolm-encrypted from the start unless ``encrypted`` is False."""
        preset = RoomPreset(room_preset(public=public, direct=direct))
        state = [encryption_state()] if encrypted else []
        return self._call(
            self._create_room(preset, list(invite), direct, state),
            "creating a room",
        )

    def invite(self, room: str, user_id: str) -> None:
        """Invite ``user_id`` into ``room``."""
        self._call(self._checked(self._nio.room_invite(room, user_id), "invite"), "inviting")

    def join(self, room: str) -> None:
        """Join ``room`` and wait until this client has synced it."""
        self._call(self._join(room), f"joining {room}")

    def room_encrypted(self, room: str) -> bool:
        """Whether this client knows ``room`` to be encrypted."""
        return self._call(self._room_encrypted(room), "reading the room")

    def wait_joined(self, room: str, user_id: str, timeout: float = WAIT_SECONDS) -> None:
        """Wait until this client's view of ``room`` has ``user_id`` joined, so that what it
        sends next is encrypted for that user's devices too."""
        self._call(self._until(lambda: self._joined(room, user_id)), f"{user_id} joined", timeout)

    # ----------------------------------------------------------------------------------------
    # Sending

    def send(
        self,
        room: str,
        body: str,
        *,
        mention: str | None = None,
        thread: str | None = None,
        reply_to: str | None = None,
    ) -> str:
        """Send an ``m.text`` message as Element does; its event id.

        ``mention`` goes into ``m.mentions.user_ids``, the body then starts with the user's
        localpart and a pill to them (without it ``m.mentions`` is empty); ``thread`` makes it a
        reply in the thread on that root (``m.thread``, ``is_falling_back``, ``m.in_reply_to``
        the root), ``reply_to`` a reply to that event. Encrypted in an encrypted room.
        """
        content = self._text(body, mention)
        if thread:
            content["m.relates_to"] = thread_relation(thread, reply_to)
        elif reply_to:
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        event_id = self._call(self._send(room, "m.room.message", content), "sending")
        self._mentions[event_id] = mention
        return event_id

    def send_file(
        self, room: str, name: str, data: bytes, *, mimetype: str = "text/plain", thread: str
    ) -> str:
        """Send a file as Element does in an encrypted room: the bytes encrypted with a key of
        their own and uploaded to the media repository, then an ``m.file`` event carrying the
        key (itself encrypted with the room's session) in the thread on ``thread``."""
        return self._call(self._send_file(room, name, data, mimetype, thread), "sending a file")

    async def _send_file(
        self, room: str, name: str, data: bytes, mimetype: str, thread: str
    ) -> str:
        uploaded, keys = await self._nio.upload(
            lambda *_: io.BytesIO(data),
            content_type="application/octet-stream",
            filename=name,
            encrypt=True,
            filesize=len(data),
        )
        assert isinstance(uploaded, UploadResponse), uploaded
        assert keys is not None
        content = {
            "msgtype": "m.file",
            "body": name,
            "filename": name,
            "info": {"mimetype": mimetype, "size": len(data)},
            "file": {**keys, "url": uploaded.content_uri},
            "m.relates_to": thread_relation(thread),
        }
        return await self._send(room, "m.room.message", content)

    def edit(self, room: str, event_id: str, new_body: str, *, mention: str | None = None) -> str:
        """Replace this person's message ``event_id`` (``m.replace`` with ``m.new_content``, the
        body prefixed with ``* ``, as Element does); the edit's event id. The outer
        ``m.mentions`` names ``mention`` only when the original did not mention them."""
        new = self._text(new_body, mention)
        content: dict[str, Any] = {
            "msgtype": "m.text",
            "body": f"* {new['body']}",
            "m.new_content": new,
            "m.mentions": new["m.mentions"] if mention != self._mentions.get(event_id) else {},
            "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
        }
        if "formatted_body" in new:
            content["format"] = new["format"]
            content["formatted_body"] = f"* {new['formatted_body']}"
        return self._call(self._send(room, "m.room.message", content), "editing")

    def react(self, room: str, event_id: str, key: str) -> str:
        """Annotate ``event_id`` with ``key``; the reaction's event id. In an encrypted room the
        reaction is encrypted, with ``m.relates_to`` also in clear, as Element sends it."""
        return self._call(self._react(room, reaction(event_id, key)), "reacting")

    def name_room(self, room: str, name: str, alias: str | None = None) -> None:
        """Give ``room`` the name ``name`` (``m.room.name``) and, when given, the local alias
        ``#alias:server`` as its canonical alias (created in the room directory first)."""
        self._call(
            self._checked(
                self._nio.room_put_state(room, "m.room.name", {"name": name}), "naming a room"
            ),
            "naming a room",
        )
        if alias is not None:
            full = f"#{alias}:{self.id.partition(':')[2]}"
            self._call(
                self._checked(self._nio.room_put_alias(full, room), "creating an alias"),
                "creating an alias",
            )
            self._call(
                self._checked(
                    self._nio.room_put_state(room, "m.room.canonical_alias", {"alias": full}),
                    "setting the canonical alias",
                ),
                "setting the canonical alias",
            )

    def redact(self, room: str, event_id: str) -> str:
        """Redact ``event_id``; the redaction's event id."""
        answer = self._call(
            self._checked(self._nio.room_redact(room, event_id), "redact"), "redacting"
        )
        return str(answer.event_id)

    def send_withheld(
        self, room: str, body: str, *, mention: str | None = None, thread: str | None = None
    ) -> tuple[str, Callable[[], None]]:
        """Send an encrypted message whose room key nobody has yet; (event id, release).

        The message is encrypted with a fresh Megolm session of its own; ``release()`` sends
        that session's key to every device in the room then, so a receiver that waited can
        decrypt it. Messages sent meanwhile use the room's usual session and are readable.
        """
        content = self._text(body, mention)
        if thread:
            content["m.relates_to"] = thread_relation(thread)
        held = OutboundGroupSession()
        # The key as exported before the first message: from index 0, so it opens that message.
        key = {
            "algorithm": MEGOLM,
            "room_id": room,
            "session_id": held.id,
            "session_key": held.session_key,
        }
        event_id = self._call(
            self._send_with(room, held, content, readable_here=True), "sending a withheld message"
        )

        def release() -> None:
            self._call(self._share_room_key(room, key), "releasing the withheld key")

        return event_id, release

    def send_undecryptable(self, room: str, body: str) -> str:
        """Send an encrypted message whose key is never shared with anyone; its event id."""
        (event_id,) = self.send_undecryptable_many(room, [body])
        return event_id

    def send_undecryptable_many(self, room: str, bodies: list[str]) -> list[str]:
        """Send several encrypted messages of one Megolm session whose key is never shared
        with anyone; their event ids, in order."""
        session = OutboundGroupSession()
        return [
            self._call(
                self._send_with(room, session, self._text(body, None), readable_here=False),
                "sending an undecryptable message",
            )
            for body in bodies
        ]

    def request_key(self, room: str, event_id: str, *, ask: str | None = None) -> None:
        """Ask for the room key of the undecrypted ``event_id`` (``m.room_key_request``), as a
        new device does: of this account's other devices (trusted first, as a person who
        verified them), or of all devices of ``ask`` when given."""
        self._call(self._request_key(room, event_id, ask), "requesting a room key")

    # ----------------------------------------------------------------------------------------
    # Receiving

    def events(self, room: str) -> list[Event]:
        """The timeline events this client has seen in ``room``, oldest first, decrypted where
        possible (``event.decrypted``); an undecrypted one is a ``MegolmEvent``."""
        with self._seen:
            return list(self._timeline.get(room, ()))

    def texts(self, room: str) -> list[Text]:
        """The ``m.room.message`` events seen in ``room`` (clear or decrypted), oldest first."""
        return [_as_text(e) for e in self.events(room) if _is_text(e)]

    def wait_for(
        self,
        predicate: Callable[[Event], bool],
        timeout: float = WAIT_SECONDS,
        *,
        room: str | None = None,
        what: str = "a matching event",
    ) -> Event:
        """The first event seen (in ``room``, or any room) that ``predicate`` accepts, waiting
        for new events and late decryptions until ``timeout``; AssertionError after that.
        Events already seen count too."""
        deadline = time.monotonic() + timeout
        with self._seen:
            while True:
                rooms = [room] if room else list(self._timeline)
                for name in rooms:
                    for event in self._timeline.get(name, ()):
                        if predicate(event):
                            return event
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.id} saw no {what} within {timeout:.0f}s")
                self._seen.wait(left)

    def wait_for_text(
        self,
        room: str,
        *,
        contains: str = "",
        sender: str | None = None,
        timeout: float = WAIT_SECONDS,
    ) -> Text:
        """The first text message in ``room`` whose body contains ``contains`` (from
        ``sender``, when given), waiting up to ``timeout``."""

        def matches(event: Event) -> bool:
            return (
                _is_text(event)
                and contains in _as_text(event)[2]
                and (sender is None or event.sender == sender)
            )

        what = f"text {contains!r}" + (f" from {sender}" if sender else "")
        return _as_text(self.wait_for(matches, timeout, room=room, what=what))

    # ----------------------------------------------------------------------------------------
    # On the loop

    @property
    def _nio(self) -> AsyncClient:
        assert self._client is not None, "the person is not started"
        return self._client

    def _call(self, coro: Coroutine[Any, Any, T], what: str, timeout: float = CALL_SECONDS) -> T:
        """Run ``coro`` on the loop and wait for its result, at most ``timeout`` seconds."""
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise AssertionError(f"{self.id}: {what} did not finish in {timeout:.0f}s") from None

    async def _start(self) -> None:
        self.store.mkdir(parents=True, exist_ok=True)
        self._synced = asyncio.Condition()
        self._crypto_lock = asyncio.Lock()
        config = AsyncClientConfig(
            encryption_enabled=True,
            store_sync_tokens=False,
            request_timeout=REQUEST_SECONDS,
            max_timeouts=3,
        )
        self._client = AsyncClient(
            self.synapse.base_url, self.user.user_id, store_path=str(self.store), config=config
        )
        await self._checked(self._nio.login(self.user.password, self.device_name), "login")
        await self._sync_once(0)
        self._sync_task = asyncio.create_task(self._sync_forever())

    async def _shutdown(self) -> None:
        if self._sync_task is not None:
            self._sync_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sync_task
        if self._client is not None:
            await self._client.close()

    async def _sync_forever(self) -> None:
        while True:
            try:
                await self._sync_once(SYNC_TIMEOUT_MS)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: sync failed; retrying", self.id)
                await asyncio.sleep(SYNC_RETRY_SECONDS)

    async def _sync_once(self, timeout_ms: int) -> None:
        """One sync and its bookkeeping, then the key traffic ``sync_forever`` would do."""
        client = self._nio
        previous = client.next_batch
        response = await client.sync(timeout=timeout_ms)
        if not isinstance(response, SyncResponse):
            log.warning("%s: sync answered %s; retrying", self.id, response)
            await asyncio.sleep(SYNC_RETRY_SECONDS)
            return
        if response.next_batch != previous:  # nio ignores a repeated answer; so do we
            self._keep(response)
        self._retry_undecrypted()
        assert self._synced is not None
        async with self._synced:
            self._synced.notify_all()
        await self._exchange_keys()

    async def _exchange_keys(self) -> None:
        client = self._nio
        assert self._crypto_lock is not None
        async with self._crypto_lock:
            if client.outgoing_to_device_messages:
                for answer in await client.send_to_device_messages():
                    if isinstance(answer, ErrorResponse):
                        log.warning("%s: to-device message failed: %s", self.id, answer)
            if client.should_upload_keys:
                await self._checked(client.keys_upload(), "keys upload")
            if client.should_query_keys:
                await self._checked(client.keys_query(), "keys query")
            if client.should_claim_keys:
                users = client.get_users_for_key_claiming()
                await self._checked(client.keys_claim(users), "keys claim")

    def _keep(self, response: SyncResponse) -> None:
        with self._seen:
            for room_id, info in response.rooms.join.items():
                self._timeline.setdefault(room_id, []).extend(info.timeline.events)
            self._seen.notify_all()

    def _retry_undecrypted(self) -> None:
        """Decrypt kept Megolm events whose session has arrived since, in place."""
        olm = self._nio.olm
        assert olm is not None
        with self._seen:
            changed = False
            for room_id, events in self._timeline.items():
                for index, event in enumerate(events):
                    if not isinstance(event, MegolmEvent) or event.event_id in self._tried:
                        continue
                    if not olm.inbound_group_store.get(room_id, event.sender_key, event.session_id):
                        continue
                    self._tried.add(event.event_id)
                    event.room_id = room_id
                    try:
                        events[index] = self._nio.decrypt_event(event)
                    except EncryptionError as exc:
                        log.warning("%s: %s stays undecrypted: %s", self.id, event.event_id, exc)
                        continue
                    changed = True
            if changed:
                self._seen.notify_all()

    async def _request_key(self, room: str, event_id: str, ask: str | None) -> None:
        client = self._nio
        with self._seen:
            kept = [e for e in self._timeline.get(room, ()) if e.event_id == event_id]
        assert kept, f"{self.id} has not seen {event_id}"
        event = kept[0]
        assert isinstance(event, MegolmEvent), f"{event_id} is not undecrypted here"
        event.room_id = room
        for device in client.device_store.active_user_devices(self.id):
            if device.device_id != client.device_id and not device.verified:
                client.verify_device(device)
        if ask is None:
            await self._checked(client.request_room_key(event), "room key request")
            return
        request = event.as_key_request(self.id, str(client.device_id))
        message = ToDeviceMessage(request.type, ask, "*", request.content)
        await self._checked(client.to_device(message), "room key request")

    async def _until(self, condition: Callable[[], bool]) -> None:
        """Wait for syncs until ``condition`` holds (the caller's timeout bounds it)."""
        assert self._synced is not None
        async with self._synced:
            await self._synced.wait_for(condition)

    def _joined(self, room: str, user_id: str) -> bool:
        known = self._nio.rooms.get(room)
        return known is not None and user_id in known.users and not known.users[user_id].invited

    async def _room_encrypted(self, room: str) -> bool:
        await self._until(lambda: room in self._nio.rooms)
        return bool(self._nio.rooms[room].encrypted)

    async def _create_room(
        self, preset: RoomPreset, invite: list[str], direct: bool, state: list[dict[str, Any]]
    ) -> str:
        answer = await self._checked(
            self._nio.room_create(
                preset=preset, invite=invite, is_direct=direct, initial_state=state
            ),
            "createRoom",
        )
        room = str(answer.room_id)
        await self._until(lambda: room in self._nio.rooms)
        return room

    async def _join(self, room: str) -> None:
        await self._checked(self._nio.join(room), "join")
        await self._until(lambda: self._joined(room, self.id))

    async def _send(self, room: str, event_type: str, content: dict[str, Any]) -> str:
        """``room_send``, encrypting for every device in an encrypted room."""
        await self._ready_to_encrypt(room)
        answer = await self._checked(
            self._nio.room_send(room, event_type, content, ignore_unverified_devices=True),
            f"send {event_type}",
        )
        return str(answer.event_id)

    async def _react(self, room: str, content: dict[str, Any]) -> str:
        if not await self._ready_to_encrypt(room):
            return await self._send(room, "m.reaction", content)
        if self._nio.olm and self._nio.olm.should_share_group_session(room):
            await self._share_group_session(room)
        # encrypt() keeps m.relates_to in clear as well.
        event_type, encrypted = self._nio.encrypt(room, "m.reaction", content)
        return await self._put_event(room, event_type, encrypted)

    async def _send_with(
        self,
        room: str,
        session: OutboundGroupSession,
        content: dict[str, Any],
        *,
        readable_here: bool,
    ) -> str:
        """Encrypt ``content`` with ``session`` instead of the room's own, sharing it with no
        one (but this device's own inbound store, when ``readable_here``)."""
        assert await self._ready_to_encrypt(room), f"{room} is not encrypted"
        olm = self._nio.olm
        assert olm is not None
        if readable_here:
            keys = olm.account.identity_keys
            olm.create_group_session(
                keys["curve25519"], keys["ed25519"], room, session.id, session.session_key
            )
        usual = olm.outbound_group_sessions.get(room)
        # Swapped in and out with no await between: nothing else on the loop sees it.
        session.shared = True
        olm.outbound_group_sessions[room] = session
        try:
            event_type, encrypted = self._nio.encrypt(room, "m.room.message", content)
        finally:
            if usual is None:
                del olm.outbound_group_sessions[room]
            else:
                olm.outbound_group_sessions[room] = usual
        return await self._put_event(room, event_type, encrypted)

    async def _ready_to_encrypt(self, room: str) -> bool:
        """Whether ``room`` is encrypted; if so, its members and their devices are known."""
        await self._until(lambda: room in self._nio.rooms)
        client = self._nio
        if not client.rooms[room].encrypted:
            return False
        if not client.rooms[room].members_synced:
            await self._checked(client.joined_members(room), "joined members")
        await self._exchange_keys()
        return True

    async def _share_group_session(self, room: str) -> None:
        """Share the room's Megolm session as ``room_send`` would (once, if already under way)."""
        client = self._nio
        sharing = client.sharing_session.get(room)
        if sharing is not None:
            await sharing.wait()
            return
        await self._checked(
            client.share_group_session(room, ignore_unverified_devices=True), "share room key"
        )

    async def _share_room_key(self, room: str, key: dict[str, str]) -> None:
        """Send the Megolm ``key`` to every device now in ``room`` (but this one), over Olm."""
        client = self._nio
        olm = client.olm
        assert olm is not None
        await self._ready_to_encrypt(room)
        missing = client.get_missing_sessions(room)
        if missing:
            await self._checked(client.keys_claim(missing), "keys claim")
        messages: dict[str, dict[str, Any]] = {}
        for user_id in client.rooms[room].users:
            for device in olm.device_store.active_user_devices(user_id):
                if device.id == client.device_id:
                    continue
                session = olm.session_store.get(device.curve25519)
                if session is None:
                    log.warning("%s: no Olm session with %s %s", self.id, user_id, device.id)
                    continue
                # nio's own payload for an m.room_key to one device, signed with our keys.
                messages.setdefault(user_id, {})[device.id] = olm._olm_encrypt(
                    session, device, "m.room_key", key
                )
        assert messages, f"{self.id}: no device in {room} to release the key to"
        await self._raw(
            "PUT", f"/sendToDevice/m.room.encrypted/{uuid4().hex}", {"messages": messages}
        )

    async def _put_event(self, room: str, event_type: str, content: dict[str, Any]) -> str:
        path = f"/rooms/{quote(room, safe='')}/send/{quote(event_type, safe='')}/{uuid4().hex}"
        return str((await self._raw("PUT", path, content))["event_id"])

    async def _raw(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A client-server API call that nio does not interpret."""
        client = self._nio
        headers = {
            "Authorization": f"Bearer {client.access_token}",
            "Content-Type": "application/json",
        }
        response = await client.send(method, CLIENT_API + path, json.dumps(body), headers)
        async with response:
            answer: dict[str, Any] = await response.json(content_type=None)
            status = response.status
        assert status == 200, f"{self.id}: {method} {path} -> {status}: {answer}"
        return answer

    async def _checked(self, call: Coroutine[Any, Any, T], what: str) -> T:
        """The answer of ``call``; AssertionError when it is a Matrix error."""
        answer = await call
        if isinstance(answer, ErrorResponse):
            raise AssertionError(f"{self.id}: {what} failed: {answer.status_code} {answer.message}")
        return answer

    def _text(self, body: str, mention: str | None) -> dict[str, Any]:
        """An m.text content; a mention leads the body with the user's name and a pill."""
        if not mention:
            return {"msgtype": "m.text", "body": body, "m.mentions": {}}
        name = mention.lstrip("@").split(":", 1)[0]
        pill = f'<a href="https://matrix.to/#/{mention}">{html.escape(name)}</a>'
        return {
            "msgtype": "m.text",
            "body": f"{name}: {body}",
            "format": "org.matrix.custom.html",
            "formatted_body": f"{pill}: {html.escape(body)}",
            "m.mentions": {"user_ids": [mention]},
        }


def _is_text(event: Event) -> bool:
    return event.source.get("type") == "m.room.message" and "body" in event.source.get(
        "content", {}
    )


def _as_text(event: Event) -> Text:
    content: dict[str, Any] = event.source["content"]
    return event.event_id, event.sender, str(content["body"]), content
