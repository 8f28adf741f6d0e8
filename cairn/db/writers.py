"""One SQLite writer at a time, handed over at once instead of by SQLite's sleeping back-off.

SQLite lets one connection write at a time. A connection that finds the write lock taken
waits in SQLite's busy handler, which sleeps 1, 2, 5, 10, 15, 20, 25 ... ms between tries
whether or not the lock was freed meanwhile. With a frontend and two workers each committing
a few hundred small transactions a second, those sleeps left a third of the CPU idle and set
the latency tail (ADR 0015).

So Cairn's own connections queue for the write lock themselves, before SQLite sees the
contention: the first data-changing statement of a transaction takes the gate (a lock
between the threads of this process, then an advisory ``flock`` on ``<database>-writer.lock``
between processes), and the commit or rollback that ends the transaction gives it back.
Threads wake the moment the gate is free; processes poll the file lock at sub-millisecond
steps. Anything else writing the file (the ``sqlite3`` shell, an older Cairn) still meets
SQLite's busy timeout, as before, and a gate that stays taken past the timeout raises the
same "database is locked" error SQLite would.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

if sys.platform != "win32":
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

else:  # no flock: threads still queue at the gate, processes meet in SQLite's busy handler

    def _try_lock(fd: int) -> bool:
        return True

    def _unlock(fd: int) -> None:
        return None


__all__ = ["WriterGate", "gated_connection_class", "is_write", "take_gate_before_write"]

# pysqlite opens a transaction implicitly before exactly these statements; a transaction
# that only reads never takes SQLite's write lock, so it never needs the gate.
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def is_write(statement: str) -> bool:
    """True for a statement that takes SQLite's write lock (opening a transaction)."""
    return statement.lstrip()[:7].upper().startswith(_WRITES)


class WriterGate:
    """The write lock of one database file, shared by this process's connections."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._threads = threading.Lock()
        self._fd: int | None = None
        self._pid = 0

    def acquire(self) -> None:
        """Wait for the gate; raises sqlite3.OperationalError after ``timeout`` seconds."""
        deadline = time.monotonic() + self.timeout
        if not self._threads.acquire(timeout=self.timeout):
            raise sqlite3.OperationalError("database is locked (waited for another writer)")
        try:
            fd = self._file()
            pause = 0.00005
            while not _try_lock(fd):
                if time.monotonic() >= deadline:
                    raise sqlite3.OperationalError(
                        "database is locked (another process kept writing)"
                    )
                time.sleep(pause)
                pause = min(pause * 2, 0.001)
        except BaseException:
            self._threads.release()
            raise

    def release(self) -> None:
        """Give the gate back (from whichever thread ends the transaction)."""
        try:
            if self._fd is not None and self._pid == os.getpid():
                _unlock(self._fd)
        finally:
            self._threads.release()

    def _file(self) -> int:
        # A forked child must not share its parent's open file: flock belongs to the open
        # file, so both would hold the lock at once.
        if self._fd is None or self._pid != os.getpid():
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            self._pid = os.getpid()
        return self._fd


def gated_connection_class(gate: WriterGate) -> type[sqlite3.Connection]:
    """A ``sqlite3.Connection`` class (``factory=``) that gives ``gate`` back when its
    transaction ends; :func:`take_gate_before_write` takes it before a write."""

    class GatedConnection(sqlite3.Connection):
        holds_gate = False

        def take_gate(self) -> None:
            if not self.holds_gate and not self.in_transaction:
                gate.acquire()
                self.holds_gate = True

        def _give_back(self) -> None:
            if self.holds_gate:
                self.holds_gate = False
                gate.release()

        def commit(self) -> None:
            try:
                super().commit()
            finally:
                self._give_back()

        def rollback(self) -> None:
            try:
                super().rollback()
            finally:
                self._give_back()

        def close(self) -> None:
            try:
                super().close()
            finally:
                self._give_back()

    return GatedConnection


def take_gate_before_write(
    _conn: Any, _cursor: Any, statement: str, _params: Any, _context: Any, _many: bool
) -> None:
    """SQLAlchemy ``before_cursor_execute`` hook: queue for the gate before a write."""
    if is_write(statement):
        dbapi = _conn.connection.dbapi_connection
        take = getattr(dbapi, "take_gate", None)
        if take is not None:
            take()
