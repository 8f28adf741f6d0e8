"""Direct chats with the Matrix bot: rooms it was invited to as a DM, where every message is
for it.

A client that opens a direct chat invites with ``is_direct``. The bot, joining, records the
room in its own ``m.direct`` account data, as the spec asks of the person invited, so that the
knowledge outlives the process and is shared by every replica of the account; it reads that
account data when it logs in. In a direct chat with one person, a message that mentions
nobody starts a session as a mention would (the bot answers in a thread on it, as everywhere).
Once someone else is in the room it is a room like any other: only mentions and the bot's
threads are read.
"""

from __future__ import annotations

import json
import logging
from urllib.parse import quote

from aiohttp import ClientError
from nio import AsyncClient, DirectRoomsResponse, MatrixRoom

__all__ = ["DIRECT_CHAT_MEMBERS", "DirectChats"]

log = logging.getLogger(__name__)

# The bot and one person: a direct chat with more members is read like any other room.
DIRECT_CHAT_MEMBERS = 2


class DirectChats:
    """The rooms one bot account knows as direct chats (its ``m.direct`` account data)."""

    def __init__(self) -> None:
        self.rooms: set[str] = set()

    def is_direct(self, room: MatrixRoom) -> bool:
        """Whether ``room`` is a direct chat of the bot with one person (invited or joined)."""
        return str(room.room_id) in self.rooms and room.member_count <= DIRECT_CHAT_MEMBERS

    async def load(self, client: AsyncClient) -> None:
        """Read the account's direct chats; a failure is logged and leaves them as they were
        (direct chats are then read like other rooms until the next log-in)."""
        listed = await self._listed(client)
        if listed is not None:
            self.rooms |= {room for rooms in listed.values() for room in rooms}

    async def add(self, client: AsyncClient, room_id: str, person: str) -> None:
        """Record ``room_id`` as the bot's direct chat with ``person``, here and in the account
        data (a failure there is logged: this process still knows it)."""
        self.rooms.add(room_id)
        listed = await self._listed(client)
        if listed is None:
            return  # never overwrite what could not be read
        rooms = listed.setdefault(person, [])
        if room_id in rooms:
            return
        rooms.append(room_id)
        path = f"/_matrix/client/v3/user/{quote(client.user_id, safe='')}/account_data/m.direct"
        headers = {
            "Authorization": f"Bearer {client.access_token}",
            "Content-Type": "application/json",
        }
        try:
            response = await client.send("PUT", path, json.dumps(listed), headers=headers)
            status = response.status
            response.release()
        except (TimeoutError, ClientError, OSError) as exc:
            log.warning("could not record %s as a direct chat: %s", room_id, exc)
            return
        if status != 200:
            log.warning("could not record %s as a direct chat: HTTP %s", room_id, status)

    async def _listed(self, client: AsyncClient) -> dict[str, list[str]] | None:
        """The account's ``m.direct`` (person -> rooms); empty when it has none yet, None when
        it could not be read."""
        try:
            response = await client.list_direct_rooms()
        except (TimeoutError, ClientError, OSError) as exc:
            log.warning("could not read the bot's direct chats: %s", exc)
            return None
        if isinstance(response, DirectRoomsResponse):
            return {
                str(person): [str(r) for r in rooms]
                for person, rooms in response.rooms.items()
                if isinstance(rooms, list)
            }
        if response.status_code == "M_NOT_FOUND":
            return {}
        log.warning("could not read the bot's direct chats: %s", response)
        return None
