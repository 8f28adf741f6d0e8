"""Matrix messages out: the outbox posted into its rooms and threads, and the bot typing while
a worker is busy.

Replies are sent with a transaction id per outbox row and part, so the homeserver drops a
repeated send after a crash between posting and recording it. Replicas of one bot account see
the same pending rows; a claim in the dedupe store lets only one of them post each row. A reply
that was streamed as it was written (:mod:`cairn.bot.matrix.streaming`) is not posted again:
its final text is the last edit of the messages it was streamed into. A request for approval
is posted as one message that says how to answer it, and the bot puts the approve and deny
reactions on it, for people to click (its own reactions are never taken as decisions: the
frontend ignores what its account sends); when the notice of its decision is posted, the
request is edited to say who decided what, so that it no longer asks for an answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from nio import AsyncClient, RoomSendResponse

from cairn.bot.dedupe import Dedupe, claim_or_warn, release_quietly
from cairn.bot.matrix.account import BotAccount
from cairn.bot.matrix.records import Cause, EventRecords
from cairn.bot.matrix.render import (
    MAX_PART_BYTES,
    approval_content,
    decided_line,
    how_to_answer,
    message_content,
    replacement,
    split_text,
)
from cairn.bot.matrix.retry import CONNECTION_ERRORS, backoff
from cairn.bot.streaming import BUSY, Refused, StreamRelay, Throttled
from cairn.core.errors import first_line
from cairn.db import is_unavailable
from cairn.db.models import OutboundMessage
from cairn.sessions.approvals import Approvals
from cairn.sessions.outbox import Outbox

__all__ = ["Delivery", "Typing"]

log = logging.getLogger(__name__)

OUTBOX_POLL_SECONDS = 0.3
SEND_ATTEMPTS = 5
# How long a replica's claim on an outbox row lasts: long enough to post every part of it; if
# that replica dies mid-post, another takes the row over after this.
POST_CLAIM_TTL = 60.0
# Errors after which sending the same message again cannot succeed.
PERMANENT_SEND_ERRORS = frozenset({"M_FORBIDDEN", "M_NOT_FOUND", "M_BAD_JSON", "M_TOO_LARGE"})
TYPING_POLL_SECONDS = 0.5
TYPING_TIMEOUT_MS = 30_000
TYPING_REFRESH_SECONDS = 20.0
# The outbox kinds that answer a turn, and so end what was streamed of it.
STREAMED_KINDS = ("reply", "error")
# How soon to look again at a reply whose stream another frontend is finishing.
BUSY_RETRY_SECONDS = 0.5


class Delivery:
    """Posts the pending outbox rows of ``account``'s tenant, oldest first."""

    def __init__(
        self,
        account: BotAccount,
        outbox: Outbox,
        records: EventRecords,
        dedupe: Dedupe,
        *,
        approve: str,
        deny: str,
        max_bytes: int = MAX_PART_BYTES,
    ) -> None:
        """``approve`` and ``deny`` are the reactions that answer a request for approval, as
        people type them (``✅``, see :func:`~cairn.core.reactions.emoji_character`)."""
        self.account = account
        self.outbox = outbox
        self.records = records
        self.dedupe = dedupe
        self.approve = approve
        self.deny = deny
        self.max_bytes = max_bytes
        self._retry_at: dict[int, float] = {}  # outbox row -> when to try it again
        # Answers as they are written: the relay streaming this account's replies, whose
        # final text edits the streamed messages (set by the frontend; None: no streaming).
        self.relay: StreamRelay | None = None

    async def run(self, client: AsyncClient) -> None:
        """Post what is pending, for ever; a failing homeserver or database is waited out."""
        failures = 0
        while True:
            try:
                await self._deliver_pending(client)
                failures = 0
                await asyncio.sleep(OUTBOX_POLL_SECONDS)
            except CONNECTION_ERRORS as exc:
                failures += 1
                log.warning("Matrix delivery paused: %s", exc)
                await asyncio.sleep(backoff(failures))
            except Exception as exc:
                failures += 1
                if is_unavailable(exc):
                    log.warning("Matrix delivery waits for the database: %s", first_line(exc))
                else:
                    log.exception("Matrix delivery failed")
                await asyncio.sleep(backoff(failures))

    async def _deliver_pending(self, client: AsyncClient) -> None:
        rows = await asyncio.to_thread(self.outbox.pending, tenant=self.account.tenant, limit=50)
        now = time.monotonic()
        for row in rows:
            assert row.id is not None
            if self._retry_at.get(row.id, 0.0) > now:
                continue
            # The bot's user id is in the key: agents with their own Matrix users share the
            # outbox table but post different rows, and must never wait on each other's claims.
            key = f"matrix:outbox:{self.account.user_id}:{row.id}"
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
        if self.relay is not None and message.kind in STREAMED_KINDS:
            finished = await self._finish_stream(message)
            if finished is not None:
                return finished
        cause = await asyncio.to_thread(self.records.cause, message)
        if message.kind == "approval":
            return await self._post_request(client, message, cause)
        event_ids: list[str] = []
        for index, part in enumerate(split_text(message.text, self.max_bytes)):
            content = message_content(
                part,
                notice=message.kind == "notice",
                thread_root=message.thread_ref,
                in_reply_to=cause.reply_to,
                mentions=(cause.user,) if cause.user else (),
            )
            event_id = await self._send_part(client, message, content, index)
            if event_id is None:
                return False
            event_ids.append(event_id)
        await asyncio.to_thread(
            self.outbox.mark_sent, message.id, event_ids[0] if event_ids else None
        )
        self._retry_at.pop(message.id, None)
        await self._stream_done(message)
        if message.kind == "notice":
            await self._show_decision(client, message)
        return True

    async def _post_request(
        self, client: AsyncClient, message: OutboundMessage, cause: Cause
    ) -> bool:
        """Post the request for approval ``message`` as one message (reactions on it decide,
        and they find it by its event id), then react to it with the approve and deny emoji.

        Returns whether the row is done with. Those reactions are a courtesy: people can add
        them by hand, so one that fails is only logged.
        """
        assert message.id is not None
        content = approval_content(
            message.text,
            message.data,
            agent=message.agent,
            footer=how_to_answer(self.approve, self.deny),
            thread_root=message.thread_ref,
            in_reply_to=cause.reply_to,
            mentions=(cause.user,) if cause.user else (),
        )
        request = await self._send_part(client, message, content, 0)
        if request is None:
            return False
        await asyncio.to_thread(self.outbox.mark_sent, message.id, request)
        self._retry_at.pop(message.id, None)
        for answer, key in (("approve", self.approve), ("deny", self.deny)):
            reacted = await client.room_send(
                message.channel,
                "m.reaction",
                {"m.relates_to": {"rel_type": "m.annotation", "event_id": request, "key": key}},
                tx_id=f"cairn-{message.id}-{answer}",
                ignore_unverified_devices=True,
            )
            if not isinstance(reacted, RoomSendResponse):
                log.warning("could not react %s to request %s: %s", key, request, reacted)
        return True

    async def _show_decision(self, client: AsyncClient, notice: OutboundMessage) -> None:
        """When ``notice`` tells a decision on a request for approval, edit the request to say
        who decided what instead of how to answer. A courtesy (the notice says it already), so
        a failure is only logged."""
        decided = await asyncio.to_thread(Approvals(self.records.db).request_decided_in, notice)
        if decided is None:
            return
        request = decided.request
        content = approval_content(
            request.text,
            request.data,
            agent=request.agent,
            footer=decided_line(decided.decision, decided.by),
        )
        response = await client.room_send(
            request.channel,
            "m.room.message",
            replacement(decided.posted_as, content),
            tx_id=f"cairn-{request.id}-decided",
            ignore_unverified_devices=True,
        )
        if not isinstance(response, RoomSendResponse):
            log.warning("could not mark request %s decided: %s", decided.posted_as, response)

    async def _finish_stream(self, message: OutboundMessage) -> bool | None:
        """Make the messages ``message`` was streamed into show its final text, and record it
        as sent; returns whether it is done with, or None when it was not streamed (post it).

        The relay runs in its own thread and hands its Matrix calls back to this loop, so it is
        waited for in a worker thread, never on the loop."""
        assert message.id is not None
        assert self.relay is not None
        try:
            refs = await asyncio.to_thread(
                self.relay.final,
                message.tenant_id,
                message.cause_event_id,
                message.channel,
                message.thread_ref,
                message.text,
            )
        except Throttled as exc:
            log.info("the homeserver asks to slow down posting outbox #%s: %s", message.id, exc)
            self._retry_at[message.id] = time.monotonic() + exc.seconds
            return False
        except Refused as exc:
            await self._failed(message, str(exc), None)
            return False
        if refs == BUSY:  # another replica streams it and posts it in a moment
            self._retry_at[message.id] = time.monotonic() + BUSY_RETRY_SECONDS
            return False
        if refs is None:
            return None
        # Reactions point at the first message as first sent, never at an edit of it.
        await asyncio.to_thread(self.outbox.mark_sent, message.id, refs[0])
        self._retry_at.pop(message.id, None)
        await self._stream_done(message)
        return True

    async def _stream_done(self, message: OutboundMessage) -> None:
        """The final reply is posted: the relay forgets its stream (and shows no late piece)."""
        if self.relay is not None and message.kind in STREAMED_KINDS:
            await asyncio.to_thread(self.relay.done, message.tenant_id, message.cause_event_id)

    async def _send_part(
        self, client: AsyncClient, message: OutboundMessage, content: dict[str, Any], index: int
    ) -> str | None:
        """Send part ``index`` of ``message``; its event id, or None when it failed (counted,
        and tried again later). The transaction id is the row's and the part's, so a resend
        after a crash is dropped by the homeserver."""
        response = await client.room_send(
            message.channel,
            "m.room.message",
            content,
            tx_id=f"cairn-{message.id}-{index}",
            ignore_unverified_devices=True,
        )
        if not isinstance(response, RoomSendResponse):
            await self._failed(message, str(response), getattr(response, "status_code", None))
            return None
        return str(response.event_id)

    async def _failed(self, message: OutboundMessage, error: str, code: str | None) -> None:
        assert message.id is not None
        attempts = message.attempts + 1
        give_up = code in PERMANENT_SEND_ERRORS or attempts >= SEND_ATTEMPTS
        log.warning(
            "could not post outbox message %s to %s: %s", message.id, message.channel, error
        )
        await asyncio.to_thread(self.outbox.mark_failed, message.id, error, give_up=give_up)
        self._retry_at[message.id] = time.monotonic() + backoff(attempts)


class Typing:
    """The bot typing in each room where a message of it is being worked on."""

    def __init__(self, records: EventRecords) -> None:
        self.records = records
        self._working: dict[int, str] = {}  # pending event row -> room
        self._wake = asyncio.Event()

    def busy(self, event_row: int, room_id: str) -> None:
        """A worker is to answer the message logged as ``event_row`` in ``room_id``."""
        self._working[event_row] = room_id
        self._wake.set()

    def forget_room(self, room_id: str) -> None:
        """The bot is out of ``room_id``: stop typing there."""
        for row, room in list(self._working.items()):
            if room == room_id:
                self._working.pop(row, None)

    async def run(self, client: AsyncClient) -> None:
        """Keep the typing notices current, for ever; a failure only skips a round."""
        typing: dict[str, float] = {}  # room -> when the last typing notice went out
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), TYPING_POLL_SECONDS)
            self._wake.clear()
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
