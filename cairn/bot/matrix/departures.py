"""A person of the bot's homeserver whose account was deactivated, erased (CAIRN_ERASE_DEPARTED).

Synapse makes a deactivated account leave its rooms, and that leave reads like any other
(docs/adr/0043 tried it): only its admin API says ``deactivated``. So on a person's own leave
of a room the bot is in, a bot whose account is a server admin asks that API, and erases the
person when it answers so; for any other bot the API refuses, and nothing is erased (an
operator runs ``cairn memory erase``).
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import quote

from nio import AsyncClient, MatrixRoom, RoomMemberEvent

from cairn.bot.departed import erase_departed
from cairn.bot.matrix.account import BotAccount
from cairn.runtime import Runtime

__all__ = ["Departures"]

log = logging.getLogger(__name__)


class Departures:
    """Erases the bot's homeserver's people whose accounts were deactivated."""

    def __init__(self, rt: Runtime, account: BotAccount) -> None:
        self.rt = rt
        self.account = account
        self.client: AsyncClient | None = None

    def listen(self, client: AsyncClient) -> None:
        """Hear ``client``'s membership events."""
        self.client = client
        client.add_event_callback(self._on_member, RoomMemberEvent)

    async def _on_member(self, room: MatrixRoom, event: RoomMemberEvent) -> None:
        person = event.state_key
        if event.membership != "leave" or event.sender != person:
            return  # a kick or a ban is someone else's act, not a departure
        if person == self.account.user_id or person.partition(":")[2] != self.account.server_name:
            return  # only the bot's own homeserver can say an account of it was deactivated
        if await self._deactivated(person):
            await asyncio.to_thread(erase_departed, self.rt, self.account.tenant, person)

    async def _deactivated(self, person: str) -> bool:
        if self.client is None:
            return False
        try:
            response = await self.client.send(
                "GET",
                f"/_synapse/admin/v2/users/{quote(person)}",
                headers={"Authorization": f"Bearer {self.client.access_token}"},
            )
            if response.status != 200:
                return False  # not a server admin, or not Synapse: nothing to go on
            answer = await response.json()
        except Exception as exc:  # a leave must never break the sync
            log.warning("could not ask whether %s was deactivated: %s", person, exc)
            return False
        return isinstance(answer, dict) and answer.get("deactivated") is True
