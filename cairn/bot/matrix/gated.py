"""The Matrix client Cairn uses: nio's AsyncClient, gated: every event it sends into a room
passes cairn.core.gate first (bodies, formatted bodies, edits), whichever code sent it."""

from __future__ import annotations

from typing import Any

from nio import AsyncClient, RoomSendError, RoomSendResponse

from cairn.core.gate import gated_data

__all__ = ["GatedAsyncClient"]


class GatedAsyncClient(AsyncClient):  # type: ignore[misc]
    """nio's AsyncClient whose :meth:`room_send` gates the content first. Identifiers in it
    (event ids in relations, the reaction's key) pass the gate unchanged."""

    async def room_send(
        self,
        room_id: str,
        message_type: str,
        content: dict[Any, Any],
        tx_id: str | None = None,
        ignore_unverified_devices: bool = False,
    ) -> RoomSendResponse | RoomSendError:
        return await super().room_send(
            room_id,
            message_type,
            gated_data(content),
            tx_id=tx_id,
            ignore_unverified_devices=ignore_unverified_devices,
        )
