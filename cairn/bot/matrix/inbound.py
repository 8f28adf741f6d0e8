"""Matrix events in: messages, reactions and their redactions turned into ChatEvents for the
pipeline.

A message belongs to a session when it mentions the bot (it starts a thread), continues a thread
that has a session, or replies to a bot message. A storage failure propagates, so that the sync
retries the whole batch without advancing its ``since`` token; an event that is stored but could
not be queued (QueueError) is left to recovery; one malformed event is logged and skipped. Every
event says whether its room is private (:mod:`cairn.bot.matrix.privacy`), so that what is
learned there stays there.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from nio import (
    AsyncClient,
    MatrixRoom,
    MegolmEvent,
    ReactionEvent,
    RedactionEvent,
    RoomGetEventResponse,
    RoomGetStateResponse,
    RoomMessageText,
    RoomSendResponse,
)

from cairn.bot.matrix.account import PLATFORM, BotAccount
from cairn.bot.matrix.crypto import DeviceTrust
from cairn.bot.matrix.delivery import Typing
from cairn.bot.matrix.direct import DirectChats
from cairn.bot.matrix.files import MEDIA_EVENTS, caption, fetched
from cairn.bot.matrix.mentions import (
    is_mentioned,
    mentioned_users,
    strip_mention,
    strip_reply_fallback,
)
from cairn.bot.matrix.privacy import is_private
from cairn.bot.matrix.records import EventRecords
from cairn.bot.matrix.render import message_content, notice_to
from cairn.bot.matrix.trust import (
    creators_are_privileged,
    creators_in,
    is_room_admin,
    is_untrusted,
)
from cairn.bot.matrix.undecrypted import Undecrypted
from cairn.bot.pipeline import Pipeline
from cairn.core.errors import InvalidInput, QueueError
from cairn.core.settings import Settings
from cairn.db import is_unavailable
from cairn.sessions.events import Attachment, ChatEvent, EventType
from cairn.sessions.ingest import Admission, Ingested

__all__ = ["TIMELINE_EVENTS", "Inbound"]

log = logging.getLogger(__name__)

# The timeline events taken in; the sync hands over each of them, from a batch or a gap. In an
# encrypted room nio hands them over decrypted, and a MegolmEvent is one it could not decrypt.
TIMELINE_EVENTS = (RoomMessageText, *MEDIA_EVENTS, ReactionEvent, RedactionEvent, MegolmEvent)


class Inbound:
    """Takes in the timeline events of ``account``'s rooms."""

    def __init__(
        self,
        pipeline: Pipeline,
        settings: Settings,
        account: BotAccount,
        records: EventRecords,
        typing: Typing,
        *,
        trust: DeviceTrust | None = None,
        undecrypted: Undecrypted | None = None,
        direct: DirectChats | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.direct = direct if direct is not None else DirectChats()
        self.settings = settings
        self.account = account
        self.records = records
        self.typing = typing
        self.trust = trust  # None when encryption is off
        self.undecrypted = undecrypted
        # Set by the sync: the batch is the first of a new device, whose old history is not
        # answered.
        self.history = False
        self._creators: dict[str, frozenset[str]] = {}  # room -> its creators (room v12+)
        self._client_now: AsyncClient | None = None

    def listen(self, client: AsyncClient) -> None:
        """Take in the timeline events ``client``'s sync reports."""
        self._client_now = client
        client.add_event_callback(self.take, TIMELINE_EVENTS)

    def _client(self) -> AsyncClient:
        assert self._client_now is not None, "used before listen()"
        return self._client_now

    async def take(self, room: MatrixRoom, event: Any) -> None:
        """Take in one timeline event. Storage failures propagate: the batch is retried."""
        if self.history or event.sender == self.account.user_id:
            return
        if isinstance(event, MegolmEvent):
            if self.undecrypted is not None:
                self.undecrypted.keep(self._client(), room, event)
            return
        if getattr(event, "decrypted", False) and await self._from_blocked_device(event):
            return
        try:
            if isinstance(event, (RoomMessageText, *MEDIA_EVENTS)):
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

    async def _from_blocked_device(self, event: Any) -> bool:
        """Whether the decrypted ``event`` was sent by a device the bot does not hear."""
        if self.trust is None:
            return False
        blocked = await self.trust.is_blocked_sender(
            self._client(), str(event.sender), str(event.sender_key)
        )
        if blocked:
            log.warning("ignored Matrix event %s from a blocked device", event.event_id)
        return blocked

    async def _on_message(self, room: MatrixRoom, event: Any) -> None:
        """A text message, or a file (``m.file``, ``m.image``, encrypted or not)."""
        content: dict[str, Any] = event.source.get("content") or {}
        relation: dict[str, Any] = content.get("m.relates_to") or {}
        if relation.get("rel_type") == "m.replace":
            await self._on_edit(room, event, content, relation)
            return
        room_id = str(room.room_id)
        mentioned = is_mentioned(content, self.account.user_id, self.account.names)
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
                if not (mentioned or self.direct.is_direct(room)):
                    return
                thread = str(event.event_id)  # the mention (or a direct message) starts one
        files: tuple[Attachment, ...] = ()
        if isinstance(event, MEDIA_EVENTS):
            text = caption(content)
            limit = self.settings.attachment_max_bytes
            files = (await fetched(self._client(), event, limit),)
        else:
            text = str(event.body or "")
        if "m.in_reply_to" in relation and not relation.get("is_falling_back"):
            text = strip_reply_fallback(text)
        await self._hand_over(
            room, event, content, text, thread, addressed=addressed, message_id=None, files=files
        )

    async def _on_edit(
        self,
        room: MatrixRoom,
        event: RoomMessageText,
        content: dict[str, Any],
        relation: dict[str, Any],
    ) -> None:
        """An edit is read when it adds a mention of the bot to a message it did not take in
        (someone forgot to mention it); the answer goes where the message is. Otherwise the
        first version was the message."""
        new: Any = content.get("m.new_content")
        original = relation.get("event_id")
        if not isinstance(new, dict) or not isinstance(original, str):
            return
        if not is_mentioned(new, self.account.user_id, self.account.names):
            return
        if await asyncio.to_thread(self.records.message_taken, original):
            return  # answered as it was first said
        if await asyncio.to_thread(self.records.thread_of_bot_message, original) is not None:
            return  # an answer of another bot identity, edited as it is written
        room_id = str(room.room_id)
        thread = await self._thread_of(room_id, original) or original
        text = str(new.get("body") or "")
        await self._hand_over(room, event, new, text, thread, addressed=True, message_id=original)

    async def _thread_of(self, room_id: str, event_id: str) -> str | None:
        """The thread root of ``event_id``, read from the homeserver (the relation is in the
        clear part of an encrypted event too); None when it is in no thread."""
        response = await self._client().room_get_event(room_id, event_id)
        if not isinstance(response, RoomGetEventResponse):
            return None
        relation = (response.event.source.get("content") or {}).get("m.relates_to") or {}
        root = relation.get("event_id")
        return root if relation.get("rel_type") == "m.thread" and isinstance(root, str) else None

    async def _hand_over(
        self,
        room: MatrixRoom,
        event: RoomMessageText,
        content: dict[str, Any],
        text: str,
        thread: str,
        *,
        addressed: bool,
        message_id: str | None,
        files: tuple[Attachment, ...] = (),
    ) -> None:
        """The message ``event`` (its ``content``, ``text`` and ``files``) into the pipeline."""
        room_id = str(room.room_id)
        text = strip_mention(text, self.account.user_id, self.account.names).strip()
        if not text and not files:
            return  # a bare mention
        chat = ChatEvent(
            platform=PLATFORM,
            tenant=self.account.tenant,
            channel=room_id,
            thread=thread,
            user=str(event.sender),
            text=text,
            attachments=files,
            event_id=str(event.event_id),
            message_id=message_id or str(event.event_id),
            mentions=mentioned_users(content),
            addressed=addressed,
            agent=self.settings.identity_agent if addressed else None,
            untrusted=is_untrusted(str(event.sender), self.settings.matrix.trusted),
            # What is said in a room that is not public, or is encrypted, is remembered there.
            private=is_private(room),
            conversation=room.display_name,  # its name, else its alias, else its members
            raw=event.source,
        )
        result = await self._accept(chat, room_id, thread)
        if result is not None and result.admission is Admission.QUEUED and result.event_row:
            self.typing.busy(result.event_row, room_id)

    async def _on_reaction(self, room: MatrixRoom, event: ReactionEvent) -> None:
        """A reaction into the pipeline. On a request for approval the approve and deny
        reactions decide (see :func:`~cairn.sessions.ingest.ingest`); one that is refused
        (not allowed, decided already, expired) is answered in the thread, to its author."""
        target = str(event.reacts_to)
        request = await asyncio.to_thread(self.records.approval_request, target)
        if request is not None and not self.settings.speaks_for(request.agent):
            # Another bot identity posted it and takes its decisions: answered once, by it.
            return
        result = await self._accept(
            ChatEvent(
                platform=PLATFORM,
                tenant=self.account.tenant,
                channel=str(room.room_id),
                thread=target,
                user=str(event.sender),
                type=EventType.REACTION_ADDED,
                event_id=str(event.event_id),
                reaction=str(event.key),
                target_id=target,
                admin=await self._is_admin(room, str(event.sender)),
                # Of an untrusted homeserver: their confirmation of a memory does not count.
                untrusted=is_untrusted(str(event.sender), self.settings.matrix.trusted),
                private=is_private(room),  # the memories on the message are read in its room
            ),
            None,
            None,
        )
        if request is not None and result is not None and result.admission is Admission.REFUSED:
            await self._send(
                str(room.room_id),
                notice_to(
                    str(event.sender),
                    result.answer,
                    thread_root=request.thread_ref,
                    in_reply_to=target,
                ),
                key=f"refused-{event.event_id}",
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
            response = await self._client().room_get_state(room_id)
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
                tenant=self.account.tenant,
                channel=str(room.room_id),
                thread=reaction.target,
                # Whoever redacted it, the reaction that goes away is its author's.
                user=reaction.user,
                type=EventType.REACTION_REMOVED,
                event_id=str(event.event_id),
                reaction=reaction.emoji,
                target_id=reaction.target,
                private=is_private(room),
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
        content = message_content(text, notice=True, thread_root=thread, in_reply_to=thread)
        await self._send(room_id, content, key=key)

    async def _send(self, room_id: str, content: dict[str, Any], *, key: str) -> None:
        """Post ``content`` once (``key`` names it: the homeserver drops a resend after a
        replay); a failure is logged, as the answer is not worth holding the sync for."""
        response = await self._client().room_send(
            room_id,
            "m.room.message",
            content,
            tx_id=f"cairn-{key}",
            ignore_unverified_devices=True,
        )
        if not isinstance(response, RoomSendResponse):
            log.warning("could not post to %s: %s", room_id, response)
