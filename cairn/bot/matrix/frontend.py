"""The Matrix frontend: Cairn as a bot account on a homeserver, through matrix-nio.

One asyncio loop (in the thread ``cairn run`` gives each frontend) runs three tasks on one
:class:`nio.AsyncClient`: the sync loop, whose callbacks turn invites, messages, reactions and
redactions into ChatEvents for the pipeline; the delivery of the outbox; and the typing
notifications of rooms where a worker is busy. The sync ``since`` token is saved only after
every event of a batch is stored in the event log, so a crash replays at most one batch and the
log's unique keys drop the replay; replies are sent with a transaction id per outbox row, so the
homeserver drops a repeated send after a crash between posting and recording it.

Every room is part of one tenant, ``matrix:<the bot's homeserver>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import time
from typing import Any

import aiohttp
from nio import (
    AsyncClient,
    AsyncClientConfig,
    InviteMemberEvent,
    JoinResponse,
    LoginResponse,
    MatrixRoom,
    MessageDirection,
    ProfileGetDisplayNameResponse,
    ReactionEvent,
    RedactionEvent,
    RoomGetStateResponse,
    RoomLeaveResponse,
    RoomMessagesResponse,
    RoomMessageText,
    RoomSendResponse,
    SyncResponse,
    WhoamiResponse,
)
from nio.crypto import ENCRYPTION_ENABLED
from sqlalchemy.exc import OperationalError

from cairn.bot.dedupe import claim_or_warn, open_dedupe, release_quietly
from cairn.bot.matrix.invites import InvitePolicy
from cairn.bot.matrix.mentions import (
    is_mentioned,
    mentioned_users,
    strip_mention,
    strip_reply_fallback,
)
from cairn.bot.matrix.records import EventRecords
from cairn.bot.matrix.render import message_content, split_text
from cairn.bot.matrix.sync_state import StateFile
from cairn.bot.matrix.trust import (
    creators_are_privileged,
    creators_in,
    is_room_admin,
    is_untrusted,
)
from cairn.bot.pipeline import Pipeline
from cairn.core.errors import (
    CairnError,
    ConfigError,
    InvalidInput,
    QueueError,
    StorageError,
    first_line,
)
from cairn.core.reactions import emoji_name
from cairn.core.settings import Settings
from cairn.db import is_unavailable
from cairn.db.models import OutboundMessage
from cairn.sessions.events import ChatEvent, EventType
from cairn.sessions.ingest import Admission, Ingested
from cairn.sessions.outbox import Outbox

__all__ = ["ENCRYPTION_OFF_NOTICE", "MatrixFrontend"]

log = logging.getLogger(__name__)

PLATFORM = "matrix"
DEVICE_NAME = "Cairn"
SYNC_TIMEOUT_MS = 30_000
# Enough timeline per room that a short outage leaves no gap; a longer one is paged back.
SYNC_FILTER: dict[str, Any] = {
    "room": {"timeline": {"limit": 100}},
    "presence": {"types": []},
}
GAP_PAGES = 20
OUTBOX_POLL_SECONDS = 0.3
TYPING_POLL_SECONDS = 0.5
TYPING_TIMEOUT_MS = 30_000
TYPING_REFRESH_SECONDS = 20.0
SEND_ATTEMPTS = 5
# How long a replica's claim on an outbox row lasts: long enough to post every part of it; if
# that replica dies mid-post, another takes the row over after this.
POST_CLAIM_TTL = 60.0
BACKOFF_MAX_SECONDS = 30.0
# Errors after which sending the same message again cannot succeed.
PERMANENT_SEND_ERRORS = frozenset({"M_FORBIDDEN", "M_NOT_FOUND", "M_BAD_JSON", "M_TOO_LARGE"})
TOKEN_ERRORS = frozenset({"M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"})
# Failures of the connection to the homeserver, after nio's own quick retries.
CONNECTION_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)

ENCRYPTION_OFF_NOTICE = (
    "This room is end-to-end encrypted, and encryption is not enabled for me, so I cannot read "
    "what is said here. Talk to me in an unencrypted room, or ask whoever runs me to enable "
    "encryption (CAIRN_MATRIX_ENCRYPTION=true with the cairn-bot[matrix-e2e] extra)."
)


class _Retry(Exception):
    """The homeserver answered with an error that may pass; try again after a pause."""


class MatrixFrontend:
    """Cairn's Matrix bot. ``run`` blocks until ``stop`` is set; reconnects with backoff."""

    name = PLATFORM

    def __init__(self, pipeline: Pipeline, settings: Settings) -> None:
        """Check the Matrix settings; raises ConfigError naming what is missing."""
        if not (settings.matrix_homeserver and settings.matrix_user_id):
            raise ConfigError("the Matrix frontend needs MATRIX_HOMESERVER and MATRIX_USER_ID")
        if settings.matrix_encryption and not ENCRYPTION_ENABLED:
            raise ConfigError(
                "CAIRN_MATRIX_ENCRYPTION=true needs matrix-nio's e2e extra (vodozemac): "
                "pip install 'cairn-bot[matrix-e2e]', or unset CAIRN_MATRIX_ENCRYPTION"
            )
        self.pipeline = pipeline
        self.settings = settings
        self.homeserver = settings.matrix_homeserver.rstrip("/")
        self.user_id = settings.matrix_user_id
        self.server_name = self.user_id.partition(":")[2]
        self.tenant = f"matrix:{self.server_name}"
        self.folder = settings.home_dir / "matrix"
        self.state_file = StateFile(self.folder, self.user_id)
        self.state = self.state_file.load(self.homeserver, self.user_id)
        self.outbox = Outbox(pipeline.rt.db, PLATFORM, settings)
        # Replicas of one bot account (each with its own device when logged in by password) see
        # the same pending rows; a claim here lets only one of them post each row.
        self.dedupe = open_dedupe(settings, pipeline.rt.redis)
        self.records = EventRecords(pipeline.rt.db, self.tenant)
        self.invites = InvitePolicy(settings.matrix_inviters)
        self._names: tuple[str, ...] = (self.user_id.partition(":")[0].lstrip("@"),)
        self._connected = False
        self._last_sync = 0.0
        self._history = False  # the first sync of a new device: old history is not answered
        self._handled_invites: set[str] = set()
        self._declined: set[str] = set()
        self._working: dict[int, str] = {}  # pending event row -> room, for typing
        self._creators: dict[str, frozenset[str]] = {}  # room -> its creators (room v12+)
        self._retry_at: dict[int, float] = {}  # outbox row -> when to try it again
        self._synced: asyncio.Event | None = None
        self._wake_typing: asyncio.Event | None = None
        self._client_now: AsyncClient | None = None

    # --- the Frontend protocol -------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Sync, take events in and post replies until ``stop`` is set.

        Raises CairnError when the homeserver rejects the credentials (retrying cannot help);
        an unreachable homeserver is retried with backoff for as long as it takes.
        """
        asyncio.run(self._run(stop))

    def healthy(self) -> bool:
        """Whether the last sync succeeded recently."""
        recent = time.monotonic() - self._last_sync < SYNC_TIMEOUT_MS / 1000 + 60
        return self._connected and recent

    # --- lifecycle -------------------------------------------------------------------------

    async def _run(self, stop: threading.Event) -> None:
        self._synced = asyncio.Event()
        self._wake_typing = asyncio.Event()
        client = self._client_now = self._client()
        work = asyncio.create_task(self._work(client), name="matrix")
        try:
            while not stop.is_set() and not work.done():
                await asyncio.wait({work}, timeout=0.2)
            if work.done():
                work.result()  # a fatal error: let `cairn run` report it
        finally:
            if not work.done():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await work
            self._connected = False
            await client.close()

    def _nio(self) -> AsyncClient:
        assert self._client_now is not None, "used outside run()"
        return self._client_now

    def _client(self) -> AsyncClient:
        store = self.folder / "store"
        store.mkdir(parents=True, exist_ok=True)
        config = AsyncClientConfig(
            max_limit_exceeded=None,  # rate limited: wait as told, however often
            max_timeouts=2,  # then our own backoff takes over, and healthy() says so
            request_timeout=SYNC_TIMEOUT_MS / 1000 + 30,
            encryption_enabled=self.settings.matrix_encryption,
            store_sync_tokens=False,  # the since token is ours to save, after ingest
        )
        client = AsyncClient(
            self.homeserver,
            self.user_id,
            device_id=self.state.device_id or None,
            store_path=str(store),
            config=config,
        )
        client.add_event_callback(self._on_invite, InviteMemberEvent)
        client.add_event_callback(
            self._on_room_event, (RoomMessageText, ReactionEvent, RedactionEvent)
        )
        return client

    async def _work(self, client: AsyncClient) -> None:
        await self._log_in(client)
        tasks = [
            asyncio.create_task(self._deliver_forever(client), name="matrix-outbox"),
            asyncio.create_task(self._type_forever(client), name="matrix-typing"),
        ]
        try:
            await self._sync_forever(client)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # --- logging in ------------------------------------------------------------------------

    async def _log_in(self, client: AsyncClient) -> None:
        """Log in (reusing the saved device and token), retrying while the server is away."""
        failures = 0
        while True:
            try:
                await self._try_log_in(client)
            except (*CONNECTION_ERRORS, _Retry) as exc:
                failures += 1
                delay = _backoff(failures)
                log.warning("Matrix login failed (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            break
        try:
            response = await client.get_displayname(self.user_id)
        except CONNECTION_ERRORS:
            return  # the localpart will do until the next login
        if isinstance(response, ProfileGetDisplayNameResponse) and response.displayname:
            self._names = tuple(dict.fromkeys((str(response.displayname), *self._names)))

    async def _try_log_in(self, client: AsyncClient) -> None:
        token = self.settings.matrix_access_token
        if token is not None:
            await self._use_token(client, token.get_secret_value(), saved=False)
            return
        if self.state.access_token:
            try:
                await self._use_token(client, self.state.access_token, saved=True)
                return
            except _TokenRejected:
                log.info("the saved Matrix access token was rejected; logging in again")
                self.state.access_token = ""
        password = self.settings.matrix_password
        if password is None:
            raise ConfigError("Matrix needs MATRIX_PASSWORD or MATRIX_ACCESS_TOKEN")
        client.device_id = self.state.device_id or None
        response = await client.login(password.get_secret_value(), device_name=DEVICE_NAME)
        if not isinstance(response, LoginResponse):
            if response.status_code in {"M_FORBIDDEN", "M_USER_DEACTIVATED", "M_INVALID_USERNAME"}:
                raise CairnError(
                    f"the homeserver {self.homeserver} rejected the login of {self.user_id}: "
                    f"{response}; check MATRIX_USER_ID and MATRIX_PASSWORD"
                )
            raise _Retry(str(response))
        self.state.device_id = str(response.device_id)
        self.state.access_token = str(response.access_token)
        await asyncio.to_thread(self.state_file.save, self.state)
        log.info("logged in to Matrix as %s (device %s)", self.user_id, response.device_id)

    async def _use_token(self, client: AsyncClient, token: str, *, saved: bool) -> None:
        client.access_token = token
        response = await client.whoami()
        if not isinstance(response, WhoamiResponse):
            if response.status_code in TOKEN_ERRORS | {"M_FORBIDDEN"}:
                if saved:
                    raise _TokenRejected(str(response))
                raise CairnError(f"the homeserver rejected MATRIX_ACCESS_TOKEN: {response}")
            raise _Retry(str(response))
        if response.user_id != self.user_id:
            raise ConfigError(
                f"the Matrix access token belongs to {response.user_id}, not to "
                f"MATRIX_USER_ID={self.user_id}"
            )
        device = str(response.device_id or self.state.device_id or "")
        client.restore_login(self.user_id, device, token)
        if device and device != self.state.device_id:
            self.state.device_id = device
            await asyncio.to_thread(self.state_file.save, self.state)

    # --- the sync loop ---------------------------------------------------------------------

    async def _sync_forever(self, client: AsyncClient) -> None:
        first = True
        failures = 0
        while True:
            since = self.state.since or None
            self._history = since is None
            client.next_batch = since  # so nio handles a batch again that we failed to store
            try:
                response = await client.sync(
                    timeout=SYNC_TIMEOUT_MS,
                    sync_filter=SYNC_FILTER,
                    since=since,
                    full_state=True if first else None,
                )
                if not isinstance(response, SyncResponse):
                    if response.status_code in TOKEN_ERRORS:
                        self._connected = False
                        self.state.access_token = ""
                        await self._log_in(client)
                        continue
                    raise _Retry(str(response))
                await self._after_sync(client, response, since)
            except (*CONNECTION_ERRORS, _Retry, StorageError, OperationalError) as exc:
                self._connected = False
                failures += 1
                delay = _backoff(failures)
                log.warning("Matrix sync failed (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            except CairnError:
                raise  # rejected credentials and the like: retrying cannot help
            except Exception:
                self._connected = False
                failures += 1
                log.exception("Matrix sync failed unexpectedly; retrying")
                await asyncio.sleep(_backoff(failures))
                continue
            failures = 0
            first = False
            self.state.since = str(response.next_batch)
            await asyncio.to_thread(self.state_file.save, self.state)
            self._connected = True
            self._last_sync = time.monotonic()
            assert self._synced is not None
            self._synced.set()

    async def _after_sync(
        self, client: AsyncClient, response: SyncResponse, since: str | None
    ) -> None:
        """What nio's callbacks do not cover: rooms left, gaps, encryption, keys."""
        for room_id in response.rooms.leave:
            await self._left(client, room_id)
        if since is not None:
            for room_id, info in response.rooms.join.items():
                if info.timeline.limited and info.timeline.prev_batch:
                    await self._fill_gap(client, room_id, str(info.timeline.prev_batch), since)
        if not self.settings.matrix_encryption:
            for room_id in response.rooms.join:
                room = client.rooms.get(room_id)
                if room is not None and room.encrypted:
                    await self._warn_encrypted(client, room_id)
        else:
            await self._exchange_keys(client)

    async def _fill_gap(self, client: AsyncClient, room_id: str, start: str, since: str) -> None:
        """Take in what a limited timeline left out between ``since`` and ``start``."""
        events: list[Any] = []
        token = start
        for _ in range(GAP_PAGES):
            page = await client.room_messages(
                room_id, start=token, end=since, direction=MessageDirection.back, limit=100
            )
            if not isinstance(page, RoomMessagesResponse) or not page.chunk:
                break
            events.extend(page.chunk)
            if not page.end or page.end == token:
                break
            token = str(page.end)
        room = client.rooms.get(room_id)
        if room is None:
            return
        for event in reversed(events):  # oldest first, as they happened
            if isinstance(event, (RoomMessageText, ReactionEvent, RedactionEvent)):
                await self._on_room_event(room, event)

    async def _exchange_keys(self, client: AsyncClient) -> None:
        """The key traffic nio's sync_forever would do, for encrypted rooms."""
        await client.send_to_device_messages()
        if client.should_upload_keys:
            await client.keys_upload()
        if client.should_query_keys:
            await client.keys_query()
        if client.should_claim_keys:
            await client.keys_claim(client.get_users_for_key_claiming())

    # --- invites and leaving ---------------------------------------------------------------

    async def _on_invite(self, room: MatrixRoom, event: InviteMemberEvent) -> None:
        if event.membership != "invite" or event.state_key != self.user_id:
            return
        room_id = str(room.room_id)
        if room_id in self._handled_invites:
            return
        self._handled_invites.add(room_id)
        try:
            answered = await self._answer_invite(room_id, str(event.sender))
        except BaseException:
            self._handled_invites.discard(room_id)  # the batch is retried, invite and all
            raise
        if not answered:
            self._handled_invites.discard(room_id)

    async def _answer_invite(self, room_id: str, inviter: str) -> bool:
        """Join, or decline when the inviter is not allowed; False if the server refused."""
        client = self._nio()
        if not self.invites.allows(inviter):
            log.info(
                "declining the invite of %s to %s (CAIRN_MATRIX_ALLOWED_INVITERS)", inviter, room_id
            )
            self._declined.add(room_id)
            declined = await client.room_leave(room_id)
            if isinstance(declined, RoomLeaveResponse):
                return True
            log.warning("could not decline the invite to %s: %s", room_id, declined)
            return False
        response = await client.join(room_id)
        if not isinstance(response, JoinResponse):
            log.warning("could not join %s on the invite of %s: %s", room_id, inviter, response)
            return False
        log.info("joined %s on the invite of %s", room_id, inviter)
        return True

    async def _left(self, client: AsyncClient, room_id: str) -> None:
        """The bot is out of ``room_id`` (declined, kicked, banned): drop all that is left."""
        self._handled_invites.discard(room_id)
        client.rooms.pop(room_id, None)
        if room_id in self._declined:
            self._declined.discard(room_id)
            return
        log.info("removed from Matrix room %s; dropping what was left to post there", room_id)
        for row, room in list(self._working.items()):
            if room == room_id:
                self._working.pop(row, None)
        await asyncio.to_thread(self._give_up_room, room_id)
        await client.room_forget(room_id)

    def _give_up_room(self, room_id: str) -> None:
        for message in self.outbox.pending(tenant=self.tenant, limit=1000):
            if message.channel == room_id and message.id is not None:
                self.outbox.mark_failed(
                    message.id, "the bot was removed from the room", give_up=True
                )

    async def _warn_encrypted(self, client: AsyncClient, room_id: str) -> None:
        if room_id in self.state.warned_rooms:
            return
        content = message_content(ENCRYPTION_OFF_NOTICE, notice=True)
        response = await client.room_send(
            room_id, "m.room.message", content, tx_id=f"cairn-encryption-{room_id}"
        )
        if isinstance(response, RoomSendResponse):
            self.state.warned_rooms.append(room_id)  # saved with the since token
        else:
            log.warning("could not tell %s that encryption is off: %s", room_id, response)

    # --- events in -------------------------------------------------------------------------

    async def _on_room_event(self, room: MatrixRoom, event: Any) -> None:
        """Take in one timeline event. Storage failures propagate: the batch is retried."""
        if self._history or event.sender == self.user_id:
            return
        try:
            if isinstance(event, RoomMessageText):
                await self._on_message(room, event)
            elif isinstance(event, ReactionEvent):
                await self._on_reaction(room, event)
            elif isinstance(event, RedactionEvent):
                await self._on_redaction(room, event)
        except Exception as exc:
            if is_unavailable(exc):
                raise  # the database is down: the batch is retried, since is not advanced
            # One malformed event must not stop the room: log it and go on.
            log.exception("could not take in Matrix event %s", getattr(event, "event_id", "?"))

    async def _on_message(self, room: MatrixRoom, event: RoomMessageText) -> None:
        content: dict[str, Any] = event.source.get("content") or {}
        relation: dict[str, Any] = content.get("m.relates_to") or {}
        if relation.get("rel_type") == "m.replace":
            return  # an edit; the first version was the message
        room_id = str(room.room_id)
        mentioned = is_mentioned(content, self.user_id, self._names)
        addressed = True
        thread: str | None
        if relation.get("rel_type") == "m.thread" and isinstance(relation.get("event_id"), str):
            thread = str(relation["event_id"])
            if not mentioned:
                owner = await asyncio.to_thread(self.records.thread_agent, room_id, thread)
                if owner is None:
                    return  # a thread the bot is not part of
                # A follow-up without a mention is for the agent the thread began with; another
                # agent's own identity (or the shared one) only logs it as context.
                addressed = self.settings.speaks_for(owner)
        else:
            reply_to = (relation.get("m.in_reply_to") or {}).get("event_id")
            thread = None
            if isinstance(reply_to, str):
                thread = await asyncio.to_thread(self.records.thread_of_bot_message, reply_to)
            if thread is None:
                if not mentioned:
                    return
                thread = str(event.event_id)  # the mention starts a thread
        text = str(event.body or "")
        if "m.in_reply_to" in relation and not relation.get("is_falling_back"):
            text = strip_reply_fallback(text)
        text = strip_mention(text, self.user_id, self._names).strip()
        if not text:
            return  # a bare mention
        chat = ChatEvent(
            platform=PLATFORM,
            tenant=self.tenant,
            channel=room_id,
            thread=thread,
            user=str(event.sender),
            text=text,
            event_id=str(event.event_id),
            message_id=str(event.event_id),
            mentions=mentioned_users(content),
            addressed=addressed,
            agent=self.settings.identity_agent if addressed else None,
            untrusted=is_untrusted(str(event.sender), self.settings.matrix_trusted),
            raw=event.source,
        )
        result = await self._accept(chat, room_id, thread)
        if result is not None and result.admission is Admission.QUEUED and result.event_row:
            self._working[result.event_row] = room_id
            assert self._wake_typing is not None
            self._wake_typing.set()

    async def _on_reaction(self, room: MatrixRoom, event: ReactionEvent) -> None:
        target = str(event.reacts_to)
        await self._accept(
            ChatEvent(
                platform=PLATFORM,
                tenant=self.tenant,
                channel=str(room.room_id),
                thread=target,
                user=str(event.sender),
                type=EventType.REACTION_ADDED,
                event_id=str(event.event_id),
                reaction=emoji_name(str(event.key)),
                target_id=target,
                admin=await self._is_admin(room, str(event.sender)),
            ),
            None,
            None,
        )

    async def _is_admin(self, room: MatrixRoom, user_id: str) -> bool:
        """Whether ``user_id`` is an admin of ``room`` (see :func:`is_room_admin`).

        From room version 12 the creators are not in the power levels; they are read from the
        room's state once per room and kept.
        """
        if is_room_admin(room, user_id):
            return True
        if not creators_are_privileged(room):
            return False
        room_id = str(room.room_id)
        if room_id not in self._creators:
            response = await self._nio().room_get_state(room_id)
            if not isinstance(response, RoomGetStateResponse):
                log.warning("could not read the state of %s: %s", room_id, response)
                return False  # not kept: asked again on the next reaction
            self._creators[room_id] = creators_in(response.events)
        return is_room_admin(room, user_id, self._creators[room_id])

    async def _on_redaction(self, room: MatrixRoom, event: RedactionEvent) -> None:
        redacted = event.redacts or (event.source.get("content") or {}).get("redacts")
        if not isinstance(redacted, str):
            return
        reaction = await asyncio.to_thread(self.records.reaction, redacted)
        if reaction is None:
            return  # not a reaction the bot took in
        await self._accept(
            ChatEvent(
                platform=PLATFORM,
                tenant=self.tenant,
                channel=str(room.room_id),
                thread=reaction.target,
                # Whoever redacted it, the reaction that goes away is its author's.
                user=reaction.user,
                type=EventType.REACTION_REMOVED,
                event_id=str(event.event_id),
                reaction=reaction.emoji,
                target_id=reaction.target,
            ),
            None,
            None,
        )

    async def _accept(
        self, event: ChatEvent, room_id: str | None, thread: str | None
    ) -> Ingested | None:
        """Hand ``event`` to the pipeline; a rejected message is answered with the reason."""
        try:
            return await asyncio.to_thread(self.pipeline.accept, event)
        except InvalidInput as exc:
            if room_id and thread:
                await self._say(room_id, thread, str(exc), key=f"invalid-{event.event_id}")
            return None
        except QueueError as exc:  # the event is stored; recovery queues it again later
            log.warning("Matrix event %s stored but not queued: %s", event.event_id, exc)
            return None

    async def _say(self, room_id: str, thread: str, text: str, *, key: str) -> None:
        client = self._nio()
        content = message_content(text, notice=True, thread_root=thread, in_reply_to=thread)
        response = await client.room_send(room_id, "m.room.message", content, tx_id=f"cairn-{key}")
        if not isinstance(response, RoomSendResponse):
            log.warning("could not post to %s: %s", room_id, response)

    # --- replies out -----------------------------------------------------------------------

    async def _deliver_forever(self, client: AsyncClient) -> None:
        assert self._synced is not None
        await self._synced.wait()  # rooms are known only after the first sync
        failures = 0
        while True:
            try:
                await self._deliver_pending(client)
                failures = 0
                await asyncio.sleep(OUTBOX_POLL_SECONDS)
            except CONNECTION_ERRORS as exc:
                failures += 1
                log.warning("Matrix delivery paused: %s", exc)
                await asyncio.sleep(_backoff(failures))
            except Exception as exc:
                failures += 1
                if is_unavailable(exc):
                    log.warning("Matrix delivery waits for the database: %s", first_line(exc))
                else:
                    log.exception("Matrix delivery failed")
                await asyncio.sleep(_backoff(failures))

    async def _deliver_pending(self, client: AsyncClient) -> None:
        rows = await asyncio.to_thread(self.outbox.pending, tenant=self.tenant, limit=50)
        now = time.monotonic()
        for row in rows:
            assert row.id is not None
            if self._retry_at.get(row.id, 0.0) > now:
                continue
            # The bot's user id is in the key: agents with their own Matrix users share the
            # outbox table but post different rows, and must never wait on each other's claims.
            key = f"matrix:outbox:{self.user_id}:{row.id}"
            if not await asyncio.to_thread(claim_or_warn, self.dedupe, key, POST_CLAIM_TTL):
                break  # another replica is posting it: keep the order, look again shortly
            try:
                posted = await self._post(client, row)
            except BaseException:
                # Released so that a connection blip does not hold this room's replies back for
                # the whole claim; if a part did get through, this replica's retry reuses its
                # transaction id, which the homeserver drops.
                await asyncio.to_thread(release_quietly, self.dedupe, key)
                raise
            if not posted:
                await asyncio.to_thread(release_quietly, self.dedupe, key)

    async def _post(self, client: AsyncClient, message: OutboundMessage) -> bool:
        """Post one outbox row (in parts if long) and record the event id reactions target.

        Returns whether the row is done with (sent, or an ack); False when it failed.
        """
        assert message.id is not None
        if message.kind == "ack":  # said to the console; in Matrix the reaction says it
            await asyncio.to_thread(self.outbox.mark_sent, message.id, None)
            return True
        if message.channel not in client.rooms:
            await asyncio.to_thread(
                self.outbox.mark_failed, message.id, "the bot is not in that room", give_up=True
            )
            return False
        cause = await asyncio.to_thread(self.records.cause, message)
        event_ids: list[str] = []
        for index, part in enumerate(split_text(message.text)):
            content = message_content(
                part,
                notice=message.kind == "notice",
                thread_root=message.thread_ref,
                in_reply_to=cause.reply_to,
                mentions=(cause.user,) if cause.user else (),
            )
            response = await client.room_send(
                message.channel,
                "m.room.message",
                content,
                tx_id=f"cairn-{message.id}-{index}",  # a resend after a crash is dropped
                ignore_unverified_devices=True,
            )
            if not isinstance(response, RoomSendResponse):
                await self._failed(message, str(response), getattr(response, "status_code", None))
                return False
            event_ids.append(str(response.event_id))
        await asyncio.to_thread(
            self.outbox.mark_sent, message.id, event_ids[0] if event_ids else None
        )
        self._retry_at.pop(message.id, None)
        return True

    async def _failed(self, message: OutboundMessage, error: str, code: str | None) -> None:
        assert message.id is not None
        attempts = message.attempts + 1
        give_up = code in PERMANENT_SEND_ERRORS or attempts >= SEND_ATTEMPTS
        log.warning(
            "could not post outbox message %s to %s: %s", message.id, message.channel, error
        )
        await asyncio.to_thread(self.outbox.mark_failed, message.id, error, give_up=give_up)
        self._retry_at[message.id] = time.monotonic() + _backoff(attempts)

    # --- typing ----------------------------------------------------------------------------

    async def _type_forever(self, client: AsyncClient) -> None:
        """Show the bot typing in each room where a message of it is being worked on."""
        assert self._wake_typing is not None
        typing: dict[str, float] = {}  # room -> when the last typing notice went out
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake_typing.wait(), TYPING_POLL_SECONDS)
            self._wake_typing.clear()
            try:
                rows = list(self._working)
                pending = await asyncio.to_thread(self.records.pending_in, rows)
                for row in rows:
                    if row not in pending:
                        self._working.pop(row, None)
                busy = set(self._working.values())
                now = time.monotonic()
                for room_id in busy:
                    if now - typing.get(room_id, 0.0) > TYPING_REFRESH_SECONDS:
                        await client.room_typing(room_id, True, timeout=TYPING_TIMEOUT_MS)
                        typing[room_id] = now
                for room_id in [r for r in typing if r not in busy]:
                    typing.pop(room_id)
                    if room_id in client.rooms:
                        await client.room_typing(room_id, False)
            except Exception as exc:  # typing is a courtesy; never let it stop the bot
                log.debug("typing notification failed: %s", exc)


class _TokenRejected(Exception):
    """The saved access token is no longer valid (logged out, or the device was deleted)."""


def _backoff(failures: int) -> float:
    """Seconds to wait after ``failures`` failures in a row: exponential with jitter, capped."""
    ceiling = min(BACKOFF_MAX_SECONDS, 0.5 * 2.0 ** min(failures, 10))
    return ceiling * random.uniform(0.5, 1.0)
