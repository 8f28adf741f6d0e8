"""The key traffic of an encrypted Matrix account, and whose devices the bot trusts.

After each sync the bot does what nio's ``sync_forever`` would: sends queued to-device messages,
uploads one-time keys when the server runs low, queries the device keys of users whose devices
changed and claims one-time keys for new Olm sessions. Then it applies its device-trust policy
(docs/adr/0026):

- a device named in CAIRN_MATRIX_BLOCKED_DEVICES (its id, ``@user:server/DEVICE``, or its
  ed25519 key) is blacklisted: it is sent no room key, and nothing it sends is taken in; a
  device taken off the list is unblocked;
- the devices of the bot's own account and of users on trusted homeservers (the bot's own and
  CAIRN_MATRIX_TRUSTED_SERVERS) are verified on first use, with a log line naming the device and
  its key, so that a key changed later is noticed rather than accepted;
- other devices stay unverified: they get the room keys of rooms they are in (their users are
  members; the bot's answers are for them), and what their users teach starts untrusted, as in
  clear rooms.

Room keys are forwarded, on request, to the bot's own verified devices only (a device of its
own trusted after its request came is answered then); a request from anyone else's device is
dropped: they get keys from the sender.
"""

from __future__ import annotations

import logging
from typing import Any

from nio import AsyncClient, RoomKeyRequest, RoomKeyRequestCancellation
from nio.crypto import OlmDevice

from cairn.bot.matrix.account import BotAccount
from cairn.bot.matrix.trust import is_untrusted

__all__ = ["DeviceTrust"]

log = logging.getLogger(__name__)


class DeviceTrust:
    """Applies the device-trust policy to ``account``'s client and answers key requests."""

    def __init__(
        self, account: BotAccount, trusted_servers: tuple[str, ...], blocked: tuple[str, ...]
    ) -> None:
        self.account = account
        self.trusted_servers = trusted_servers
        self.blocked = frozenset(blocked)
        self._own_requests: dict[str, RoomKeyRequest] = {}  # request id -> waiting for trust

    def listen(self, client: AsyncClient) -> None:
        """Hear the key requests nio could not answer at once."""
        client.add_to_device_callback(
            self._on_key_request,
            (RoomKeyRequest, RoomKeyRequestCancellation),
        )

    async def exchange_keys(self, client: AsyncClient) -> None:
        """Send, upload, query and claim keys as needed; then trust devices and answer the key
        requests of the bot's own devices that waited for their trust."""
        await client.send_to_device_messages()
        if client.should_upload_keys:
            await client.keys_upload()
        if client.should_query_keys:
            await client.keys_query()
        self.apply(client)
        if client.should_claim_keys:
            await client.keys_claim(client.get_users_for_key_claiming())
            if client.olm is not None:
                # Key requests that waited for an Olm session: answered now, not a sync later.
                for event in client.olm.collect_key_requests():
                    await self._on_key_request(event)
        self._answer_own_requests(client)
        await client.send_to_device_messages()

    def apply(self, client: AsyncClient) -> None:
        """Blacklist, unblock and trust on first use, over every device the client knows."""
        for device in client.device_store:
            if device.deleted or device.device_id == client.device_id:
                continue
            if self._is_blocked(device):
                if not client.olm or not client.olm.is_device_blacklisted(device):
                    client.blacklist_device(device)
                    self._forget_shared_sessions(client, device)
                    log.warning(
                        "blocked Matrix device %s of %s (CAIRN_MATRIX_BLOCKED_DEVICES): it gets "
                        "no room keys and is not heard",
                        device.device_id,
                        device.user_id,
                    )
                continue
            if client.olm is not None and client.olm.is_device_blacklisted(device):
                client.unblacklist_device(device)
                log.info(
                    "Matrix device %s of %s is no longer blocked", device.device_id, device.user_id
                )
            if device.verified or not self._trusted_user(device.user_id):
                continue
            client.verify_device(device)
            log.info(
                "trusting Matrix device %s of %s on first use (ed25519 %s)",
                device.device_id,
                device.user_id,
                device.ed25519,
            )

    async def is_blocked_sender(self, client: AsyncClient, user_id: str, sender_key: str) -> bool:
        """Whether the device of ``user_id`` with curve25519 key ``sender_key`` is blocked.

        A device not known yet, while some are blocked, is looked up first (its user's keys
        queried and the policy applied), so that the first message of a blocked device is not
        heard before its keys are.
        """
        device = client.device_store.device_from_sender_key(user_id, sender_key)
        if device is None and self.blocked:
            if client.olm is not None:
                client.olm.users_for_key_query.add(user_id)
            if client.should_query_keys:
                await client.keys_query()
                self.apply(client)
            device = client.device_store.device_from_sender_key(user_id, sender_key)
        return device is not None and device.blacklisted

    def _is_blocked(self, device: OlmDevice) -> bool:
        names = {device.device_id, f"{device.user_id}/{device.device_id}", device.ed25519}
        return not self.blocked.isdisjoint(names)

    def _trusted_user(self, user_id: str) -> bool:
        if user_id == self.account.user_id:
            return True
        return not is_untrusted(user_id, self.trusted_servers)

    @staticmethod
    def _forget_shared_sessions(client: AsyncClient, device: OlmDevice) -> None:
        """Rotate the room keys the blocked device was given, so it cannot read what follows."""
        for room_id, room in client.rooms.items():
            if room.encrypted and device.user_id in room.users:
                client.invalidate_outbound_session(room_id)

    async def _on_key_request(self, event: Any) -> None:
        """nio answers the key requests of the bot's own verified devices by itself, and drops
        everyone else's; those it hands over came from an own device not trusted yet."""
        if isinstance(event, RoomKeyRequestCancellation):
            self._own_requests.pop(event.request_id, None)
        elif event.sender == self.account.user_id:
            self._own_requests[event.request_id] = event  # answered once the device is trusted

    def _answer_own_requests(self, client: AsyncClient) -> None:
        if client.olm is None:
            return
        for request_id, event in list(self._own_requests.items()):
            device = client.device_store[event.sender].get(str(event.requesting_device_id))
            if device is None:
                continue  # its keys are queried first
            self._own_requests.pop(request_id)
            if device.verified and event in client.olm.key_request_from_untrusted.values():
                client.continue_key_share(event)
