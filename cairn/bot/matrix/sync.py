"""The Matrix sync loop: each batch's events taken in, then its ``since`` token saved.

The token is saved only after every event of a batch is stored in the event log, so a crash
replays at most one batch and the log's unique keys drop the replay. A database outage stops the
batch and it is synced again from the same token; a homeserver that is away is retried with
backoff; a rejected token logs in again. A timeline the server cut short is paged back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from nio import AsyncClient, MessageDirection, RoomMessagesResponse, SyncResponse
from sqlalchemy.exc import OperationalError

from cairn.bot.matrix.crypto import DeviceTrust
from cairn.bot.matrix.inbound import TIMELINE_EVENTS, Inbound
from cairn.bot.matrix.login import TOKEN_ERRORS, Login
from cairn.bot.matrix.retry import CONNECTION_ERRORS, Retry, backoff
from cairn.bot.matrix.rooms import Rooms
from cairn.bot.matrix.sync_state import MatrixState, StateFile
from cairn.core.errors import CairnError, StorageError

__all__ = ["SYNC_FILTER", "SYNC_TIMEOUT_MS", "Sync"]

log = logging.getLogger(__name__)

SYNC_TIMEOUT_MS = 30_000
MIN_SYNC_TIMEOUT_MS = 500
# Enough timeline per room that a short outage leaves no gap; a longer one is paged back.
SYNC_FILTER: dict[str, Any] = {
    "room": {"timeline": {"limit": 100}},
    "presence": {"types": []},
}
GAP_PAGES = 20


class Sync:
    """Syncs one client for ever, handing its events to ``inbound`` and ``rooms``."""

    def __init__(
        self,
        state: MatrixState,
        state_file: StateFile,
        login: Login,
        inbound: Inbound,
        rooms: Rooms,
        *,
        trust: DeviceTrust | None,
    ) -> None:
        self.state = state
        self.state_file = state_file
        self.login = login
        self.inbound = inbound
        self.rooms = rooms
        self.trust = trust  # None when encryption is off
        self.connected = False
        self.synced = asyncio.Event()  # set after the first sync: then the rooms are known
        self._last_sync = 0.0

    def healthy(self) -> bool:
        """Whether the last sync succeeded recently."""
        recent = time.monotonic() - self._last_sync < SYNC_TIMEOUT_MS / 1000 + 60
        return self.connected and recent

    async def run(self, client: AsyncClient) -> None:
        """Sync until cancelled. Raises CairnError when the credentials are rejected."""
        first = True
        failures = 0
        while True:
            since = self.state.since or None
            self.inbound.history = since is None
            # matrix-nio ignores a response whose token it already holds. Cleared, it takes in
            # every response: a batch again that we failed to store, and the first full-state
            # sync after a quiet restart, which ends at the token it started from and is the
            # only place the rooms are learnt from.
            client.next_batch = ""
            try:
                response = await client.sync(
                    timeout=self._timeout_ms(),
                    sync_filter=SYNC_FILTER,
                    since=since,
                    full_state=True if first else None,
                )
                if not isinstance(response, SyncResponse):
                    if response.status_code in TOKEN_ERRORS:
                        self.connected = False
                        self.state.access_token = ""
                        await self.login.log_in(client)
                        continue
                    raise Retry(str(response))
                await self._after_sync(client, response, since)
            except (*CONNECTION_ERRORS, Retry, StorageError, OperationalError) as exc:
                self.connected = False
                failures += 1
                delay = backoff(failures)
                log.warning("Matrix sync failed (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            except CairnError:
                raise  # rejected credentials and the like: retrying cannot help
            except Exception:
                self.connected = False
                failures += 1
                log.exception("Matrix sync failed unexpectedly; retrying")
                await asyncio.sleep(backoff(failures))
                continue
            failures = 0
            first = False
            self.state.since = str(response.next_batch)
            await asyncio.to_thread(self.state_file.save, self.state)
            self.connected = True
            self._last_sync = time.monotonic()
            self.synced.set()

    def _timeout_ms(self) -> int:
        """How long a sync may wait for news: less when a kept event is due to be told."""
        undecrypted = self.inbound.undecrypted
        due = undecrypted.seconds_to_next_notice() if undecrypted is not None else None
        if due is None:
            return SYNC_TIMEOUT_MS
        return int(min(SYNC_TIMEOUT_MS, max(MIN_SYNC_TIMEOUT_MS, due * 1000)))

    async def _after_sync(
        self, client: AsyncClient, response: SyncResponse, since: str | None
    ) -> None:
        """What nio's callbacks do not cover: rooms left, gaps, encryption, keys."""
        for room_id in response.rooms.leave:
            await self.rooms.left(room_id)
        if since is not None:
            for room_id, info in response.rooms.join.items():
                if info.timeline.limited and info.timeline.prev_batch:
                    await self._fill_gap(client, room_id, str(info.timeline.prev_batch), since)
        if self.trust is None:
            for room_id in response.rooms.join:
                room = client.rooms.get(room_id)
                if room is not None and room.encrypted:
                    await self.rooms.warn_encrypted(room_id)
            return
        await self.trust.exchange_keys(client)
        if self.inbound.undecrypted is not None:
            await self.inbound.undecrypted.retry(client, self.inbound.take)

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
            if isinstance(event, TIMELINE_EVENTS):
                await self.inbound.take(room, event)
