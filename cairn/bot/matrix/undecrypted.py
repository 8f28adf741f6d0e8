"""Encrypted events the bot could not decrypt yet: kept, retried when their keys arrive, and
their sender told once if the keys never come.

A Megolm event arrives before its room key when the sender's client shares keys late, shares
them only with verified devices, or never learned of the bot's device. Such an event is kept in
the state file (saved with the sync token, so a crash loses neither) and the bot asks for its
key. After every sync each kept event whose session has become known is decrypted and taken in
like any other, however late; after CAIRN_MATRIX_KEY_WAIT_SECONDS its sender gets one notice
per room and Megolm session, in the thread when the event says which. An event still unreadable
after :data:`KEEP_SECONDS` is given up with a log line. Nothing here logs what a message says.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from nio import AsyncClient, LocalProtocolError, MatrixRoom, MegolmEvent, RoomSendResponse
from nio.exceptions import EncryptionError

from cairn.bot.matrix.render import message_content
from cairn.bot.matrix.sync_state import MatrixState

__all__ = ["KEEP_SECONDS", "UNDECRYPTABLE_NOTICE", "Undecrypted"]

log = logging.getLogger(__name__)

KEEP_SECONDS = 7 * 86400
UNDECRYPTABLE_NOTICE = (
    "I could not read your encrypted message: its keys never reached my device ({device}). "
    "Please send it again. If this keeps happening, your client may be sharing keys with "
    "verified devices only: verify my device, or allow unverified devices in this room."
)

Take = Callable[[MatrixRoom, Any], Awaitable[None]]


class Undecrypted:
    """The events of ``state`` waiting for their keys."""

    def __init__(self, state: MatrixState, key_wait_seconds: float) -> None:
        self.state = state
        self.key_wait_seconds = key_wait_seconds

    def keep(self, client: AsyncClient, room: MatrixRoom, event: MegolmEvent) -> None:
        """Keep ``event`` (saved with the next sync token); its key is asked for by ``retry``."""
        event_id = str(event.event_id)
        if event_id in self.state.undecrypted:
            return
        self.state.undecrypted[event_id] = {
            "room": str(room.room_id),
            "event": event.source,
            "seen": time.time(),
            "told": False,
            "asked": False,
        }
        log.info(
            "cannot decrypt Matrix event %s from %s in %s yet (session %s); waiting for its keys",
            event_id,
            event.sender,
            room.room_id,
            event.session_id,
        )

    def seconds_to_next_notice(self) -> float | None:
        """How long until a kept event's sender is due a notice; None when none is."""
        dues = [
            float(kept["seen"]) + self.key_wait_seconds - time.time()
            for kept in self.state.undecrypted.values()
            if not kept.get("told")
        ]
        return max(0.0, min(dues)) if dues else None

    async def retry(self, client: AsyncClient, take: Take) -> None:
        """Decrypt what can be now (``take`` gets each), ask for missing keys, tell who waited
        too long. A storage failure in ``take`` propagates (the event stays kept)."""
        now = time.time()
        for event_id, kept in list(self.state.undecrypted.items()):
            room = client.rooms.get(str(kept.get("room")))
            event = _megolm(kept)
            if room is None or event is None or now - float(kept["seen"]) > KEEP_SECONDS:
                log.warning("gave up on undecryptable Matrix event %s", event_id)
                self.state.undecrypted.pop(event_id, None)
                continue
            event.room_id = room.room_id
            decrypted = _decrypted(client, event)
            if decrypted is not None and not isinstance(decrypted, MegolmEvent):
                await take(room, decrypted)
                self.state.undecrypted.pop(event_id, None)
                log.info("decrypted Matrix event %s once its keys arrived", event_id)
                continue
            if not kept.get("asked"):
                await self._ask_for_key(client, event)
                kept["asked"] = True
            if not kept.get("told") and now - float(kept["seen"]) > self.key_wait_seconds:
                await self._tell(client, room, event, kept)

    async def _ask_for_key(self, client: AsyncClient, event: MegolmEvent) -> None:
        with contextlib.suppress(LocalProtocolError):  # asked already for this session
            await client.request_room_key(event)

    async def _tell(
        self, client: AsyncClient, room: MatrixRoom, event: MegolmEvent, kept: dict[str, Any]
    ) -> None:
        """One notice per room, sender and session: the others waiting on it count as told."""
        same = [
            other
            for other in self.state.undecrypted.values()
            if other.get("room") == kept.get("room") and _same_session(other, event)
        ]
        if any(other.get("told") for other in same):
            kept["told"] = True
            return
        relation = (event.source.get("content") or {}).get("m.relates_to") or {}
        thread = relation.get("event_id") if relation.get("rel_type") == "m.thread" else None
        content = message_content(
            UNDECRYPTABLE_NOTICE.format(device=client.device_id),
            notice=True,
            thread_root=thread if isinstance(thread, str) else str(event.event_id),
            in_reply_to=str(event.event_id),
            mentions=(str(event.sender),),
        )
        response = await client.room_send(
            room.room_id,
            "m.room.message",
            content,
            tx_id=f"cairn-undecryptable-{event.event_id}",
            ignore_unverified_devices=True,
        )
        if isinstance(response, RoomSendResponse):
            for other in same:
                other["told"] = True
            log.info("told %s that event %s could not be decrypted", event.sender, event.event_id)
        else:
            log.warning("could not tell %s about %s: %s", event.sender, event.event_id, response)


def _decrypted(client: AsyncClient, event: MegolmEvent) -> Any:
    """``event`` decrypted, or None while its session is unknown (looked up first: nio logs a
    warning for each failed attempt, and kept events are tried after every sync)."""
    olm = client.olm
    if olm is None or not olm.inbound_group_store.get(
        event.room_id, event.sender_key, event.session_id
    ):
        return None
    try:
        return client.decrypt_event(event)
    except EncryptionError:
        return None


def _megolm(kept: dict[str, Any]) -> MegolmEvent | None:
    source = kept.get("event")
    if not isinstance(source, dict):
        return None
    try:
        event = MegolmEvent.from_dict(source)
    except (KeyError, TypeError, ValueError):
        return None
    return event if isinstance(event, MegolmEvent) else None


def _same_session(kept: dict[str, Any], event: MegolmEvent) -> bool:
    source = kept.get("event") or {}
    content = source.get("content") or {}
    return bool(
        source.get("sender") == event.sender and content.get("session_id") == event.session_id
    )
