"""Where the Matrix frontend keeps its end-to-end encryption keys, and the lock that lets only one
running frontend of an account use them.

matrix-nio keeps the Olm account, the Olm and Megolm sessions and the device trust of each
device of an account in one SQLite file, ``<user>_<device>.db``, in the store folder:
``CAIRN_MATRIX_STORE``, or else ``CAIRN_HOME/matrix/store``. Two processes using one Olm account
at once would hand out the same one-time keys and fork the ratchets, which breaks decryption for
good; so a frontend holds ``<account>.lock`` in that folder (an advisory ``flock``, released by
the kernel when the process dies, whatever the way) for as long as it runs, and a second one is
refused with the process id of the first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from cairn.core.errors import ConfigError

__all__ = ["AccountLock", "CryptoStore"]


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


class AccountLock:
    """Holds the lock of ``store`` while a frontend runs (a context manager)."""

    def __init__(self, store: CryptoStore) -> None:
        self.store = store
        self._handle: IO[str] | None = None

    def __enter__(self) -> AccountLock:
        """Take the lock. Raises ConfigError naming the process that holds it already."""
        self.store.folder.mkdir(parents=True, exist_ok=True)
        handle = self.store.lock_path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _pid_in(handle)
            handle.close()
            who = f"process {pid}" if pid else "another process"
            raise ConfigError(
                f"another Cairn Matrix frontend ({who}) is running for {self.store.user_id} with "
                f"the store in {self.store.folder}; two frontends of one account must not share "
                "its keys. Stop it, or give this one its own CAIRN_HOME (or CAIRN_MATRIX_STORE), "
                "which logs in as a device of its own"
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


def _pid_in(handle: IO[str]) -> int | None:
    handle.seek(0)
    text = handle.read().strip()
    return int(text) if text.isdigit() else None
