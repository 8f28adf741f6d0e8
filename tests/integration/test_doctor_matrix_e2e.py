"""``cairn doctor`` on the Matrix frontend's end-to-end encryption, against a real Synapse.

Cairn's own Matrix frontend runs (as ``cairn run`` runs it: a thread with a stop event, on the
embedded default) and makes its device, its crypto store and its state file; a person with an
encrypting client (matrix-nio, as Element would) sends it an encrypted message, which gives the
store an Olm session, a Megolm session and a tracked device. ``cairn doctor`` then runs as a
command and must print what the store holds and what the homeserver publishes (read over HTTP
here, independently), and fail, saying what to do, when the store's keys are lost or differ.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nio import AsyncClient, AsyncClientConfig, RoomCreateResponse
from nio.crypto import OlmAccount
from nio.store import DefaultStore

from cairn.bot.matrix.store import PICKLE_KEY, CryptoStore
from cairn.bot.matrix.sync_state import StateFile
from cairn.core.settings import load_settings
from tests.e2e.test_matrix import (  # noqa: F401 - synapse is the module-scoped homeserver fixture
    Cairn,
    synapse,
    wait_for,
)
from tests.support.synapse import Synapse, User

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ENCRYPTED = [
    {"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}}
]


def doctor() -> tuple[int, str]:
    """``cairn doctor``'s exit code and its matrix-e2e lines (the last check of the report)."""
    done = subprocess.run(
        [sys.executable, "-m", "cairn", "doctor"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = done.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if " matrix-e2e " in line), None)
    assert start is not None, done.stdout + done.stderr
    return done.returncode, "\n".join(lines[start:])


def grouped(key: str) -> str:
    """A key in groups of four characters, as Element shows a session key."""
    return " ".join(key[i : i + 4] for i in range(0, len(key), 4))


@dataclass(frozen=True)
class BotDevice:
    """The bot's device as the frontend left it: its crypto store, id and access token."""

    store: CryptoStore
    device: str
    token: str
    base_url: str

    def call(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` to the client-server API as the bot's device."""
        request = urllib.request.Request(  # noqa: S310 (loopback http)
            f"{self.base_url}/_matrix/client/v3/{path}",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return json.load(response)

    def published_keys(self) -> dict[str, str]:
        """The identity keys the homeserver hands out for the device, by type."""
        user = self.store.user_id
        answer = self.call("keys/query", {"device_keys": {user: [self.device]}})
        keys = answer["device_keys"][user][self.device]["keys"]
        return {kind.partition(":")[0]: str(key) for kind, key in keys.items()}

    def nio_store(self) -> DefaultStore:
        """The store opened as the frontend's nio client opens it (only once the bot stopped)."""
        return DefaultStore(self.store.user_id, self.device, str(self.store.folder), PICKLE_KEY)


def device_of(bot: Cairn) -> BotDevice:
    """The bot's device, from its state file and the crypto store settings."""
    settings = load_settings()
    homeserver = settings.matrix.homeserver or ""
    state = StateFile(settings.home_dir / "matrix", bot.id).load(homeserver, bot.id)
    assert state.device_id, state
    assert state.access_token, state
    store = CryptoStore(settings.matrix.store_dir(settings.home_dir), bot.id)
    return BotDevice(store, state.device_id, state.access_token, homeserver)


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file of ``folder`` and its folders (the import requests' among them), by path."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


async def send_encrypted(server: Synapse, person: User, bot_id: str, store: Path) -> str:
    """``person``, with an encrypting client, invites the bot to an encrypted room and, once it
    has joined, sends it a message there; returns the person's device id."""
    store.mkdir(parents=True, exist_ok=True)
    config = AsyncClientConfig(encryption_enabled=True, store_sync_tokens=True)
    client = AsyncClient(server.base_url, person.user_id, store_path=str(store), config=config)
    try:
        await client.login(person.password, device_name="alice's laptop")
        await client.sync(timeout=0)
        await client.keys_upload()
        created = await client.room_create(invite=[bot_id], initial_state=ENCRYPTED)
        assert isinstance(created, RoomCreateResponse), created
        room = created.room_id
        for _ in range(120):
            await client.sync(timeout=500)
            if bot_id in client.rooms[room].users:
                break
        else:
            pytest.fail("the bot did not join the encrypted room")
        content = {
            "msgtype": "m.text",
            "body": "cairn: hello",
            "m.mentions": {"user_ids": [bot_id]},
        }
        await client.room_send(room, "m.room.message", content, ignore_unverified_devices=True)
        return str(client.device_id)
    finally:
        await client.close()


@pytest.fixture
def bot(synapse: Synapse, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cairn]:  # noqa: F811
    """The bot's account, with encryption on (the default); stopped at the end."""
    cairn = Cairn(synapse, synapse.register(f"cairn-{secrets.token_hex(3)}"), monkeypatch)
    try:
        yield cairn
    finally:
        cairn.stop()


def test_doctor_reports_the_device_its_keys_and_sessions_as_the_homeserver_publishes_them(
    synapse: Synapse,  # noqa: F811
    bot: Cairn,
    tmp_path: Path,
) -> None:
    alice = synapse.register(f"alice-{secrets.token_hex(3)}")
    bot.start()
    me = device_of(bot)
    alice_id = asyncio.run(send_encrypted(synapse, alice, bot.id, tmp_path / "alice"))
    wait_for(
        "the bot's store to hold the room key",
        lambda: (keys := me.store.keys_summary(me.device)) is not None and keys.megolm_sessions,
    )

    # While the frontend runs: doctor reads the store beside it, and names who holds it.
    _, report = doctor()
    published = me.published_keys()
    assert report.startswith("ok    matrix-e2e"), report
    assert f"device {me.device} of {bot.id}" in report
    assert f"ed25519 fingerprint {grouped(published['ed25519'])};" in report
    assert f"curve25519 {published['curve25519']}" in report
    assert "Megolm (room) sessions: 0," not in report
    assert "Olm sessions: 0;" not in report
    assert "the homeserver publishes the same keys" in report
    assert f"held by pid {os.getpid()}" in report  # the frontend's, in this process
    bot.stop()

    # Once the frontend has let the store go: the counts are those nio itself reads from the
    # store, and the homeserver's; verifying Alice's device (as a person would) is counted.
    nio_store = me.nio_store()
    [alice_device] = [
        d
        for d in nio_store.load_device_keys().active_user_devices(alice.user_id)
        if d.id == alice_id
    ]
    nio_store.verify_device(alice_device)
    devices = list(nio_store.load_device_keys())
    megolm = len(list(nio_store.load_inbound_group_sessions()))
    olm = len(list(nio_store.load_sessions()))
    nio_store.database.close()
    one_time_keys = me.call("keys/upload", {})["one_time_key_counts"]["signed_curve25519"]
    before = files_of(me.store.folder)
    code, report = doctor()
    assert code == 0, report
    assert files_of(me.store.folder) == before  # doctor changed nothing in the store
    assert f"Megolm (room) sessions: {megolm}, Olm sessions: {olm};" in report
    verified = sum(d.verified for d in devices)
    blacklisted = sum(d.blacklisted for d in devices)
    ignored = sum(d.ignored for d in devices)
    assert verified >= 1
    assert (
        f"tracked devices: {len(devices)} ({verified} verified, {blacklisted} blacklisted,"
        f" {ignored} ignored)"
    ) in report
    assert f"{one_time_keys} signed_curve25519 one-time keys on the homeserver" in report
    assert "no frontend holds it" in report


def test_doctor_fails_when_the_stores_keys_differ_from_the_homeservers_or_are_gone(
    bot: Cairn,
) -> None:
    bot.start()
    bot.stop()
    me = device_of(bot)
    published = me.published_keys()

    other = OlmAccount()
    other.shared = True
    me.nio_store().save_account(other)
    code, report = doctor()
    assert code == 1, report
    assert report.startswith("FAIL  matrix-e2e"), report
    assert f"the homeserver has other keys for device {me.device} than the store" in report
    assert grouped(published["ed25519"]) in report
    assert grouped(other.identity_keys["ed25519"]) in report
    assert f"delete the store ({me.store.database(me.device)})" in report

    me.store.database(me.device).unlink()
    code, report = doctor()
    assert code == 1, report
    assert f"store {me.store.database(me.device)} (missing)" in report
    assert f"the store has no keys for device {me.device}, but the homeserver has" in report
    assert "log in as a new device: delete" in report


def test_doctor_says_when_the_homeserver_refuses_the_token_and_still_reads_the_store(
    bot: Cairn, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot.start()
    bot.stop()
    me = device_of(bot)

    monkeypatch.setenv("MATRIX_ACCESS_TOKEN", "not-a-token")
    code, report = doctor()
    assert code == 1, report  # the matrix check fails on a refused token
    assert report.startswith("WARN  matrix-e2e"), report
    assert f"device {me.device} of {bot.id} (saved in" in report
    assert "whoami failed: the homeserver refused MATRIX_ACCESS_TOKEN (401)" in report
    assert "not compared with the homeserver: the homeserver refused MATRIX_ACCESS_TOKEN" in report
    assert "ed25519 fingerprint" in report

    monkeypatch.setenv("MATRIX_ACCESS_TOKEN", me.token)
    code, report = doctor()
    assert code == 0, report
    assert f"device {me.device} of {bot.id} (whoami of MATRIX_ACCESS_TOKEN)" in report
    assert "the homeserver publishes the same keys" in report
