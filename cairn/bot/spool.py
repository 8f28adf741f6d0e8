"""A local, append-only spool of acknowledged events, so that nothing acknowledged is lost.

A platform that never sends an event again once Cairn has acknowledged it (Slack's Events API
and Socket Mode) hands it to :meth:`Spool.append` *before* the acknowledgement: the record is
on disk (written and fsync'd) when ``append`` returns, or ``append`` raises and the event is
not acknowledged, so the platform retries it. One thread takes the records in arrival order
with :meth:`Spool.take` and says :meth:`Spool.done` once each is in the event log; while the
database is down it simply holds the record and retries, and the records behind it wait.

Each process writes its own segment file, named by its start time and pid, in a folder per
frontend, and holds an exclusive ``flock`` on it while it runs. A segment that nobody holds
belongs to a process that ended (crashed, killed, or stopped with records left): the next
process to open the folder copies its complete records into its own segment, marked
``replayed``, and deletes it. A replayed record may already be in the event log (the crash
came between logging and ``done``); the log's unique keys drop the copy. The segment is emptied
whenever everything in it is done and it has grown past a few dozen kilobytes, so a crash
replays little.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import queue
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cairn.core.errors import StorageError
from cairn.core.gate import gated_data
from cairn.core.settings import Settings

__all__ = ["Spool", "SpoolError", "Spooled", "forget_in_spools", "spool_folder"]

log = logging.getLogger(__name__)

# A segment is emptied once everything in it is done and it is at least this large; until
# then emptying it would cost a truncate per event for nothing.
_COMPACT_BYTES = 64 * 1024
_SUFFIX = ".spool"


def spool_folder(settings: Settings, platform: str) -> Path:
    """The spool folder of one frontend: per platform and bot identity, in CAIRN_HOME.

    Frontends with bot identities of their own each read events as that identity, so a
    segment left behind is replayed only by a frontend of the same identity.
    """
    identity = re.sub(r"[^A-Za-z0-9_.-]", "_", settings.identity_agent or "shared")
    return settings.home_dir / "spool" / f"{platform}-{identity}"


class SpoolError(StorageError):
    """A record could not be written durably (disk full, folder not writable, spool closed)."""


@dataclass(frozen=True, slots=True)
class Spooled:
    """One record taken from the spool: the payload, and whether an earlier process took it."""

    payload: dict[str, Any]
    replayed: bool
    end: int  # the offset just past this record in the segment


class Spool:
    """A durable FIFO of JSON records for one frontend of one process (see the module doc)."""

    def __init__(self, folder: Path) -> None:
        """Open (creating) ``folder``, take over every segment nobody holds, start a new one.

        Raises SpoolError when the folder or the segment can't be created or written.
        """
        self.folder = folder
        self._lock = threading.Lock()  # appends, compaction
        self._ready: queue.Queue[Spooled] = queue.Queue()
        self._done = 0  # offset up to which every record is done
        self._closed = False
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self.path = folder / f"{time.time_ns():020d}-{os.getpid()}{_SUFFIX}"
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._size = 0
            self.replayed = self._adopt_orphans()
        except OSError as exc:
            raise SpoolError(f"cannot open the event spool in {folder}: {exc}") from exc

    # --- writing ------------------------------------------------------------------------

    def append(self, payload: dict[str, Any], *, take: bool = True) -> None:
        """Write ``payload`` durably and, unless ``take`` is False, queue it for :meth:`take`.

        Every string in it passes the gate first (credentials masked), so no secret said in
        a message is ever on disk. Returns only once the record is on disk. Raises SpoolError
        when it can't be (the caller must then not acknowledge the event). A record not
        queued is a journal entry: it is read back only by the process that adopts the
        segment.
        """
        payload = gated_data(payload)  # what is on disk is what the gate lets through
        line = _encode(payload, replayed=False)
        with self._lock:
            if self._closed:
                raise SpoolError("the event spool is closed")
            try:
                self._write(line)
            except OSError as exc:
                raise SpoolError(f"cannot write to the event spool {self.path}: {exc}") from exc
            if take:
                self._ready.put(Spooled(payload, replayed=False, end=self._size))

    def _write(self, data: bytes) -> None:
        """Append ``data`` and fsync (under ``_lock``); a short write is undone."""
        start = self._size
        try:
            written = os.write(self._fd, data)
            if written != len(data):
                raise OSError(f"short write ({written} of {len(data)} bytes)")
            os.fsync(self._fd)
        except OSError:
            with contextlib.suppress(OSError):  # the error that matters is the write's
                os.ftruncate(self._fd, start)  # leave no torn record behind
            raise
        self._size = start + len(data)

    # --- reading ------------------------------------------------------------------------

    def take(self, timeout: float) -> Spooled | None:
        """The oldest record not yet taken, or None when none comes within ``timeout``."""
        try:
            return self._ready.get(timeout=timeout)
        except queue.Empty:
            return None

    def done(self, record: Spooled | None = None) -> None:
        """Record that ``record`` and every record before it (all of them when None) are
        handled for good."""
        with self._lock:
            self._done = max(self._done, self._size if record is None else record.end)
            if self._done >= self._size >= _COMPACT_BYTES and self._ready.empty():
                try:
                    os.ftruncate(self._fd, 0)
                except OSError as exc:  # harmless: the records are replayed and dropped
                    log.warning("could not empty the event spool %s: %s", self.path, exc)
                    return
                self._size = self._done = 0

    def pending(self) -> int:
        """Records appended and not yet taken."""
        return self._ready.qsize()

    def close(self) -> None:
        """Stop taking appends; delete the segment if everything in it is done.

        A segment with records left stays on disk, unlocked, for the next process to replay.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._done >= self._size:
                self.path.unlink(missing_ok=True)
            os.close(self._fd)  # releases the flock

    # --- taking over what ended processes left ------------------------------------------

    def _adopt_orphans(self) -> int:
        adopted = 0
        for path in sorted(self.folder.glob(f"*{_SUFFIX}")):
            if path == self.path:
                continue
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                continue  # another process adopted it just now
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a live process's own segment
                records = _read_records(path)
                for payload in records:
                    self._write(_encode(payload, replayed=True))
                    self._ready.put(Spooled(payload, replayed=True, end=self._size))
                adopted += len(records)
                path.unlink(missing_ok=True)  # its records are safe in ours now
            finally:
                os.close(fd)
            if records:
                log.warning(
                    "replaying %d event(s) that an earlier process acknowledged "
                    "and did not finish (%s)",
                    len(records),
                    path.name,
                )
        return adopted


def _encode(payload: dict[str, Any], *, replayed: bool) -> bytes:
    record = {"payload": payload, "replayed": replayed}
    return (json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n").encode()


def _read_records(path: Path) -> list[dict[str, Any]]:
    """The complete records of a segment; a torn last line (a crash mid-write) is skipped."""
    records: list[dict[str, Any]] = []
    with path.open("rb") as segment:
        for number, line in enumerate(segment, start=1):
            if not line.endswith(b"\n"):
                log.warning("%s: skipping a record cut short at line %d", path.name, number)
                break
            try:
                record = json.loads(line)
                payload = record["payload"]
            except (ValueError, KeyError, TypeError):
                log.warning("%s: skipping an unreadable record at line %d", path.name, number)
                continue
            if isinstance(payload, dict):
                records.append(payload)
    return records


def _mentions(value: Any, person: str) -> bool:
    """Whether ``person`` is a string anywhere in ``value`` (a record's author, a mention)."""
    if isinstance(value, str):
        return value == person
    if isinstance(value, dict):
        return any(_mentions(v, person) for v in value.values())
    if isinstance(value, list):
        return any(_mentions(v, person) for v in value)
    return False


def forget_in_spools(home: Path, person: str, *, dry_run: bool = False) -> tuple[int, int]:
    """Take every record that names ``person`` out of the spool segments under ``home``
    (erasure on request, docs/adr/0043); returns (records removed, segments skipped).

    A segment a running frontend holds is skipped (it is counted): its records are in the
    event log once done, and it is emptied then; erase again after that frontend stops.
    Each other segment is rewritten without those records, through a new file put in place.
    """
    removed = skipped = 0
    for path in sorted((home / "spool").glob(f"*/*{_SUFFIX}")):
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                skipped += 1
                continue
            kept: list[bytes] = []
            gone = 0
            with path.open("rb") as segment:
                for line in segment:
                    try:
                        named = _mentions(json.loads(line), person)
                    except ValueError:
                        named = person.encode() in line  # torn or unreadable: by its bytes
                    if named:
                        gone += 1
                    else:
                        kept.append(line)
            removed += gone
            if gone and not dry_run:
                fresh = path.with_suffix(".erasing")
                with fresh.open("wb") as out:
                    out.write(b"".join(kept))
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(fresh, path)
        finally:
            os.close(fd)
    return removed, skipped
