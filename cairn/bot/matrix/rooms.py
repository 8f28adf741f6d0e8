"""The rooms the Matrix bot is in: invites joined or declined (CAIRN_MATRIX_ALLOWED_INVITERS),
rooms it was removed from dropped with what was left to post there, and encrypted rooms told
once that the bot cannot read them when encryption is off."""

from __future__ import annotations

import asyncio
import logging

from nio import (
    AsyncClient,
    InviteMemberEvent,
    JoinResponse,
    MatrixRoom,
    RoomLeaveResponse,
    RoomSendResponse,
)

from cairn.bot.matrix.account import BotAccount
from cairn.bot.matrix.delivery import Typing
from cairn.bot.matrix.direct import DirectChats
from cairn.bot.matrix.invites import InvitePolicy
from cairn.bot.matrix.render import message_content
from cairn.bot.matrix.sync_state import MatrixState
from cairn.sessions.outbox import Outbox

__all__ = ["ENCRYPTION_OFF_NOTICE", "Rooms"]

log = logging.getLogger(__name__)

ENCRYPTION_OFF_NOTICE = (
    "This room is end-to-end encrypted, and encryption is not enabled for me, so I cannot read "
    "what is said here. Talk to me in an unencrypted room, or ask whoever runs me to enable "
    "encryption (CAIRN_MATRIX_ENCRYPTION=true with the cairn-bot[matrix-e2e] extra)."
)


class Rooms:
    """Joins and leaves the rooms of ``account``."""

    def __init__(
        self,
        account: BotAccount,
        invites: InvitePolicy,
        outbox: Outbox,
        state: MatrixState,
        typing: Typing,
        direct: DirectChats | None = None,
    ) -> None:
        self.account = account
        self.direct = direct if direct is not None else DirectChats()
        self.invites = invites
        self.outbox = outbox
        self.state = state
        self.typing = typing
        self._handled_invites: set[str] = set()
        self._declined: set[str] = set()
        self._client_now: AsyncClient | None = None

    def listen(self, client: AsyncClient) -> None:
        """Answer the invites ``client``'s sync reports."""
        self._client_now = client
        client.add_event_callback(self._on_invite, InviteMemberEvent)

    def _client(self) -> AsyncClient:
        assert self._client_now is not None, "used before listen()"
        return self._client_now

    async def _on_invite(self, room: MatrixRoom, event: InviteMemberEvent) -> None:
        if event.membership != "invite" or event.state_key != self.account.user_id:
            return
        room_id = str(room.room_id)
        if room_id in self._handled_invites:
            return
        self._handled_invites.add(room_id)
        try:
            direct = event.content.get("is_direct") is True
            answered = await self._answer_invite(room_id, str(event.sender), direct=direct)
        except BaseException:
            self._handled_invites.discard(room_id)  # the batch is retried, invite and all
            raise
        if not answered:
            self._handled_invites.discard(room_id)

    async def _answer_invite(self, room_id: str, inviter: str, *, direct: bool) -> bool:
        """Join, or decline when the inviter is not allowed; False if the server refused.
        A ``direct`` chat joined is recorded as the bot's direct chat with the inviter."""
        client = self._client()
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
        if direct:
            await self.direct.add(client, room_id, inviter)
        return True

    async def left(self, room_id: str) -> None:
        """The bot is out of ``room_id`` (declined, kicked, banned): drop all that is left."""
        client = self._client()
        self._handled_invites.discard(room_id)
        client.rooms.pop(room_id, None)
        if room_id in self._declined:
            self._declined.discard(room_id)
            return
        log.info("removed from Matrix room %s; dropping what was left to post there", room_id)
        self.typing.forget_room(room_id)
        await asyncio.to_thread(self._give_up_room, room_id)
        await client.room_forget(room_id)

    def _give_up_room(self, room_id: str) -> None:
        for message in self.outbox.pending(tenant=self.account.tenant, limit=1000):
            if message.channel == room_id and message.id is not None:
                self.outbox.mark_failed(
                    message.id, "the bot was removed from the room", give_up=True
                )

    async def warn_encrypted(self, room_id: str) -> None:
        """Tell ``room_id``, once, that the bot cannot read it; the state, saved with the next
        since token, remembers that it was told."""
        if room_id in self.state.warned_rooms:
            return
        content = message_content(ENCRYPTION_OFF_NOTICE, notice=True)
        response = await self._client().room_send(
            room_id, "m.room.message", content, tx_id=f"cairn-encryption-{room_id}"
        )
        if isinstance(response, RoomSendResponse):
            self.state.warned_rooms.append(room_id)  # saved with the since token
        else:
            log.warning("could not tell %s that encryption is off: %s", room_id, response)
