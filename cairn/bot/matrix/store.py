"""Where the Matrix frontend keeps its end-to-end encryption keys, and the lock that lets only one
running frontend of an account use them.

matrix-nio keeps the Olm account, the Olm and Megolm sessions and the device trust of each
device of an account in one SQLite file, ``<user>_<device>.db``, in the store folder:
``CAIRN_MATRIX_STORE``, or else ``CAIRN_HOME/matrix/store``. Two processes using one Olm account
at once would hand out the same one-time keys and fork the ratchets, which breaks decryption for
good; so a frontend holds ``<account>.lock`` in that folder (an advisory ``flock``, released by
the kernel when the process dies, whatever the way) for as long as it runs, and a second one is
refused with the process id of the first.

:meth:`CryptoStore.keys_summary` reads what the store holds for a device (its identity keys, how
many sessions, how many devices it tracks and trusts) without changing or locking anything, so
``cairn doctor`` may look while the frontend runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from nio import ClientConfig

from cairn.core.errors import ConfigError, StorageError

__all__ = ["PICKLE_KEY", "AccountHeld", "AccountLock", "CryptoStore", "StoreKeys"]

# The passphrase nio encrypts the pickled keys in the store with: its default, which the
# frontend's client uses (it sets none). Reading the store needs the same one.
PICKLE_KEY: str = ClientConfig.pickle_key

# The trust files nio's DefaultStore keeps next to the database, one per trust state, most
# binding first: a device listed in two counts as the first (as nio's load_device_keys has it).
_TRUST_FILES = (("verified", "trusted"), ("blacklisted", "blacklisted"), ("ignored", "ignored"))


@dataclass(frozen=True)
class StoreKeys:
    """What the crypto store holds for one device of the bot."""

    ed25519: str
    curve25519: str
    # Whether the identity keys were uploaded to the homeserver (nio's ``shared``).
    uploaded: bool
    megolm_sessions: int
    olm_sessions: int
    # Devices of other users (and the bot's own other devices) whose keys are tracked.
    devices: int
    verified: int
    blacklisted: int
    ignored: int


@dataclass(frozen=True)
class CryptoStore:
    """The crypto store folder of one bot account."""

    folder: Path
    user_id: str

    @property
    def account(self) -> str:
        """The account as a file name: the user id without ``@``, unsafe characters as ``_``."""
        return re.sub(r"[^A-Za-z0-9._=-]", "_", self.user_id.lstrip("@"))

    @property
    def lock_path(self) -> Path:
        """The lock file a running frontend of this account holds."""
        return self.folder / f"{self.account}.lock"

    def database(self, device_id: str) -> Path:
        """The SQLite file matrix-nio keeps the keys of ``device_id`` in."""
        return self.folder / f"{self.user_id}_{device_id}.db"

    def holder(self) -> int | None:
        """The process id of the frontend that holds the lock now; None when nobody does."""
        try:
            handle = self.lock_path.open("r")
        except OSError:
            return None
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _pid_in(handle)
            fcntl.flock(handle, fcntl.LOCK_UN)
            return None

    def keys_summary(self, device_id: str) -> StoreKeys | None:
        """What the store holds for ``device_id``; None when it has no keys for that device.

        Reads the database read-only (it is never created, changed or write-locked, whether a
        frontend runs or not). Raises StorageError when it cannot be read, or when the keys do
        not open with :data:`PICKLE_KEY`.
        """
        path = self.database(device_id)
        if not path.is_file():
            return None
        try:
            with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
                return self._read(db, device_id)
        except sqlite3.Error as exc:
            raise StorageError(f"cannot read the crypto store {path}: {exc}") from exc
        except ValueError as exc:  # vodozemac's pickle errors are ValueErrors
            raise StorageError(
                f"cannot open the keys in the crypto store {path}: {exc}; were they written with "
                "another pickle key?"
            ) from exc

    def _read(self, db: sqlite3.Connection, device_id: str) -> StoreKeys | None:
        db.execute("BEGIN")  # one snapshot for every count
        row = db.execute(
            "SELECT id, account, shared FROM accounts WHERE user_id = ? AND device_id = ?",
            (self.user_id, device_id),
        ).fetchone()
        if row is None:
            return None
        account_id, pickle, shared = row
        # Here, not at the top: without matrix-nio's e2e extra there is no OlmAccount, and the
        # frontend (which imports this module) says so in words of its own.
        from nio.crypto import OlmAccount

        keys = OlmAccount.from_pickle(bytes(pickle), PICKLE_KEY, bool(shared)).identity_keys

        def count(table: str) -> int:
            query = f"SELECT count(*) FROM {table} WHERE account_id = ?"  # noqa: S608 (ours)
            found: int = db.execute(query, (account_id,)).fetchone()[0]
            return found

        devices = db.execute(
            "SELECT d.user_id, d.device_id, k.key FROM devicekeys d"
            " LEFT JOIN keys k ON k.device_id = d.id AND k.key_type = 'ed25519'"
            " WHERE d.account_id = ? AND NOT d.deleted",
            (account_id,),
        ).fetchall()
        trust = self._trust(device_id, {(user, device, key) for user, device, key in devices})
        return StoreKeys(
            ed25519=keys["ed25519"],
            curve25519=keys["curve25519"],
            uploaded=bool(shared),
            megolm_sessions=count("megolminboundsessions"),
            olm_sessions=count("olmsessions"),
            devices=len(devices),
            **trust,
        )

    def _trust(self, device_id: str, devices: set[tuple[str, str, str]]) -> dict[str, int]:
        """How many of ``devices`` (user, device, ed25519) each trust file lists."""
        counts: dict[str, int] = {}
        left = set(devices)
        for state, suffix in _TRUST_FILES:
            path = self.folder / f"{self.user_id}_{device_id}.{suffix}_devices"
            listed = {entry for entry in _trust_entries(path) if entry in left}
            counts[state] = len(listed)
            left -= listed
        return counts


class AccountHeld(ConfigError):
    """Another process holds the account's lock: ``pid`` (None when its file does not say)."""

    def __init__(self, message: str, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


class AccountLock:
    """Holds the lock of ``store`` while a frontend runs (a context manager)."""

    def __init__(self, store: CryptoStore) -> None:
        self.store = store
        self._handle: IO[str] | None = None

    def __enter__(self) -> AccountLock:
        """Take the lock. Raises AccountHeld naming the process that holds it already."""
        self.store.folder.mkdir(parents=True, exist_ok=True)
        handle = self.store.lock_path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _pid_in(handle)
            handle.close()
            who = f"process {pid}" if pid else "another process"
            raise AccountHeld(
                f"another Cairn Matrix frontend ({who}) is running for {self.store.user_id} with "
                f"the store in {self.store.folder}; two frontends of one account must not share "
                "its keys. Stop it, or give this one its own CAIRN_HOME (or CAIRN_MATRIX_STORE), "
                "which logs in as a device of its own",
                pid,
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Let the lock go."""
        if self._handle is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


def _trust_entries(path: Path) -> set[tuple[str, str, str]]:
    """The (user, device, ed25519) entries of a trust file; none when it does not exist.

    Raises StorageError when it cannot be read.
    """
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return set()
    except OSError as exc:
        raise StorageError(f"cannot read the trust file {path}: {exc}") from exc
    entries = set()
    for line in lines:
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "matrix-ed25519":
            entries.add((fields[0], fields[1], fields[3]))
    return entries


def _pid_in(handle: IO[str]) -> int | None:
    handle.seek(0)
    text = handle.read().strip()
    return int(text) if text.isdigit() else None
