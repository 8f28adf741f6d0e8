"""The Matrix frontend: Cairn as a bot account on a homeserver, through matrix-nio.

One asyncio loop (in the thread ``cairn run`` gives each frontend) runs four tasks on one
:class:`nio.AsyncClient`, after :mod:`~cairn.bot.matrix.login`: the sync loop
(:mod:`~cairn.bot.matrix.sync`), whose callbacks turn invites (:mod:`~cairn.bot.matrix.rooms`),
messages, reactions and redactions (:mod:`~cairn.bot.matrix.inbound`) into ChatEvents for the
pipeline; the delivery of the outbox; the typing notifications of rooms where a worker is busy
(both :mod:`~cairn.bot.matrix.delivery`); and the room history imports that `cairn import
matrix` hands to the running bot (:mod:`~cairn.bot.matrix.handover`). Beside the loop, a thread
shows answers as they are written (:mod:`~cairn.bot.matrix.streaming`), its calls run on the
loop. The sync ``since`` token is saved only after every event of a batch is stored in the event
log, so a crash replays at most one batch and the log's unique keys drop the replay; replies are
sent with a transaction id per outbox row, so the homeserver drops a repeated send after a crash
between posting and recording it.

Every room is part of one tenant, ``matrix:<the bot's homeserver>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

from nio import AsyncClient
from nio.crypto import ENCRYPTION_ENABLED

from cairn.bot.dedupe import open_dedupe
from cairn.bot.matrix.account import PLATFORM, BotAccount
from cairn.bot.matrix.client import bot_client
from cairn.bot.matrix.crypto import DeviceTrust
from cairn.bot.matrix.delivery import Delivery, Typing
from cairn.bot.matrix.departures import Departures
from cairn.bot.matrix.direct import DirectChats
from cairn.bot.matrix.handover import Desk
from cairn.bot.matrix.inbound import Inbound
from cairn.bot.matrix.invites import InvitePolicy
from cairn.bot.matrix.login import Login
from cairn.bot.matrix.records import EventRecords
from cairn.bot.matrix.rooms import Rooms
from cairn.bot.matrix.store import AccountLock, CryptoStore
from cairn.bot.matrix.streaming import MatrixWriter
from cairn.bot.matrix.sync import Sync
from cairn.bot.matrix.sync_state import StateFile
from cairn.bot.matrix.undecrypted import Undecrypted
from cairn.bot.pipeline import Pipeline
from cairn.bot.streaming import StreamRelay
from cairn.core.errors import ConfigError
from cairn.core.reactions import emoji_character
from cairn.core.settings import Settings
from cairn.sessions.outbox import Outbox

__all__ = ["MatrixFrontend"]


class MatrixFrontend:
    """Cairn's Matrix bot. ``run`` blocks until ``stop`` is set; reconnects with backoff."""

    name = PLATFORM

    def __init__(self, pipeline: Pipeline, settings: Settings) -> None:
        """Check the Matrix settings; raises ConfigError naming what is missing."""
        if not (settings.matrix.homeserver and settings.matrix.user_id):
            raise ConfigError("the Matrix frontend needs MATRIX_HOMESERVER and MATRIX_USER_ID")
        if settings.matrix.encryption and not ENCRYPTION_ENABLED:
            raise ConfigError(
                "Matrix encryption needs matrix-nio's e2e support, which is missing here: "
                "pip install 'matrix-nio[e2e]' (or reinstall cairn-bot), or set "
                "CAIRN_MATRIX_ENCRYPTION=false to stay out of encrypted rooms"
            )
        self.pipeline = pipeline
        self.settings = settings
        self.account = BotAccount(settings.matrix.homeserver.rstrip("/"), settings.matrix.user_id)
        self.tenant = self.account.tenant
        self.folder = settings.home_dir / "matrix"
        self.state_file = StateFile(self.folder, self.account.user_id)
        self.state = self.state_file.load(self.account.homeserver, self.account.user_id)
        self.store = CryptoStore(settings.matrix.store_dir(settings.home_dir), self.account.user_id)
        self.outbox = Outbox(pipeline.rt.db, PLATFORM, settings)
        # Replicas of one bot account (each with its own device when logged in by password) see
        # the same pending rows; a claim here lets only one of them post each row.
        self.dedupe = open_dedupe(settings, pipeline.rt.redis)
        records = EventRecords(pipeline.rt.db, self.tenant)
        self.login = Login(self.account, settings, self.state, self.state_file)
        self.typing = Typing(records)
        self.delivery = Delivery(
            self.account,
            self.outbox,
            records,
            self.dedupe,
            approve=emoji_character(settings.mcp.approve_reaction),
            deny=emoji_character(settings.mcp.deny_reaction),
            max_bytes=settings.matrix.message_bytes,
        )
        self.writer: MatrixWriter | None = None
        self.relay: StreamRelay | None = None
        if settings.matrix.stream:
            self.writer = MatrixWriter(settings, records)
            # Only the replies this account posts: agents with a Matrix user of their own share
            # the tenant (and its stream) with the shared identity, as they share the outbox.
            self.relay = StreamRelay(
                pipeline.rt.streams,
                self.tenant,
                self.writer,
                pipeline.rt.db,
                self.dedupe,
                speaks_for=settings.speaks_for,
            )
            self.delivery.relay = self.relay
        self._relay_stop = threading.Event()
        encryption = settings.matrix.encryption
        self.trust = (
            DeviceTrust(self.account, settings.matrix.trusted, settings.matrix.blocked)
            if encryption
            else None
        )
        undecrypted = (
            Undecrypted(self.state, settings.matrix.key_wait_seconds) if encryption else None
        )
        self.direct = DirectChats()
        self.inbound = Inbound(
            pipeline,
            settings,
            self.account,
            records,
            self.typing,
            trust=self.trust,
            undecrypted=undecrypted,
            direct=self.direct,
        )
        invites = InvitePolicy(settings.matrix.inviters)
        self.rooms = Rooms(self.account, invites, self.outbox, self.state, self.typing, self.direct)
        self.departures = Departures(pipeline.rt, self.account)
        self.sync = Sync(
            self.state, self.state_file, self.login, self.inbound, self.rooms, trust=self.trust
        )

    # --- the Frontend protocol -------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Sync, take events in and post replies until ``stop`` is set.

        Raises CairnError when the homeserver rejects the credentials (retrying cannot help);
        an unreachable homeserver is retried with backoff for as long as it takes.
        """
        asyncio.run(self._run(stop))

    def healthy(self) -> bool:
        """Whether the last sync succeeded recently."""
        return self.sync.healthy()

    # --- lifecycle -------------------------------------------------------------------------

    async def _run(self, stop: threading.Event) -> None:
        with AccountLock(self.store):  # one running frontend per account and store
            await self._run_locked(stop)

    async def _run_locked(self, stop: threading.Event) -> None:
        client = self._client()
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
            self.sync.connected = False
            await self._stop_relay()
            await client.close()

    def _client(self) -> AsyncClient:
        client = bot_client(self.settings, self.account, self.state, self.store)
        self.rooms.listen(client)
        self.inbound.listen(client)
        if self.settings.workers.erase_departed:
            self.departures.listen(client)
        if self.trust is not None:
            self.trust.listen(client)
        return client

    async def _work(self, client: AsyncClient) -> None:
        await self.login.log_in(client)
        await self.direct.load(client)  # before the sync: its messages may be direct ones
        tasks = [
            asyncio.create_task(self._deliver(client), name="matrix-outbox"),
            asyncio.create_task(self.typing.run(client), name="matrix-typing"),
            asyncio.create_task(self._imports(client), name="matrix-imports"),
        ]
        try:
            await self.sync.run(client)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _deliver(self, client: AsyncClient) -> None:
        await self.sync.synced.wait()  # rooms are known only after the first sync
        self._start_relay(client)
        await self.delivery.run(client)

    async def _imports(self, client: AsyncClient) -> None:
        """Read the rooms `cairn import matrix` asks for while this frontend holds the device
        (:mod:`~cairn.bot.matrix.handover`), once the first sync has brought the room keys."""
        from cairn.bot.matrix.history import RoomReader, serve_requests

        await self.sync.synced.wait()
        desk = Desk(self.store)
        desk.open()
        try:
            memory = self.pipeline.rt.memory
            reader = RoomReader(self.settings, memory, client, self.account, self.trust)
            await serve_requests(reader, desk)
        finally:
            desk.close()

    def _start_relay(self, client: AsyncClient) -> None:
        """Stream answers from now on, through ``client`` on this loop."""
        if self.relay is None or self.writer is None or self._relay_stop.is_set():
            return
        self.writer.bind(client, asyncio.get_running_loop())
        self.relay.start(self._relay_stop)

    async def _stop_relay(self) -> None:
        """Stop the relay while the loop still runs: a call it makes meanwhile completes."""
        if self.relay is None or self.writer is None:
            return
        self._relay_stop.set()
        await asyncio.to_thread(self.relay.join, 10)
        self.writer.unbind()
