"""A room's history import handed to the running frontend: ``cairn import matrix`` beside
``cairn run``.

Only one process may use the bot's device (:class:`~cairn.bot.matrix.store.AccountLock`), and
only that device holds the room keys of the encrypted rooms. So when a frontend runs, the import
command does not read the room itself: it leaves a request in the store folder, and the frontend
reads the room with its own client, between the turns of its sync loop, and writes how far it
got. The command shows that progress and the room's tally as if it had read the room itself,
then indexes what was written.

The folder ``<store>/imports/`` holds, per request (a random id):
- ``ID.request``: what to read (the room, the dates, ``full``), written whole by the command;
- ``ID.taken``: the same file, renamed by the frontend that takes it (a rename: one taker);
- ``ID.status``: written whole by the frontend: ``running`` with the events read so far, then
  ``done`` with the tally, or ``failed`` with the reason, or ``stopped`` when the frontend
  stopped part-way.
``serving`` names the process of the frontend that takes requests; it counts only while that
process holds the account's lock, so a killed frontend's file misleads nobody.

Nothing is lost when either side dies: the import writes a checkpoint after every page
(:mod:`~cairn.bot.matrix.history`), so when the frontend stops or dies part-way the command takes
the device over and continues from the checkpoint itself; when the command dies, the frontend
finishes the import (a later run then adds nothing).
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from cairn.bot.matrix.store import CryptoStore

__all__ = ["Desk", "ImportRequest", "Status"]

log = logging.getLogger(__name__)

STALE_SECONDS = 86_400.0
"""A status nobody read for a day (its command died) is removed at the next frontend start."""


@dataclass(frozen=True)
class ImportRequest:
    """What a command asks the frontend to read: ``room`` (an id or an alias) between
    ``since`` and ``until``, the whole of it with ``full``."""

    id: str
    room: str
    since: date | None = None
    until: date | None = None
    full: bool = False

    def to_json(self) -> str:
        since, until = self.since, self.until
        return json.dumps(
            {
                "room": self.room,
                "since": since.isoformat() if since else None,
                "until": until.isoformat() if until else None,
                "full": self.full,
            }
        )

    @classmethod
    def from_json(cls, request_id: str, text: str) -> ImportRequest:
        """Raises ValueError naming what is wrong with a request that is not one."""
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("room"), str):
            raise ValueError("a request names its room")
        return cls(
            request_id,
            data["room"],
            since=date.fromisoformat(data["since"]) if data.get("since") else None,
            until=date.fromisoformat(data["until"]) if data.get("until") else None,
            full=bool(data.get("full")),
        )


@dataclass(frozen=True)
class Status:
    """Where a request stands: ``state`` is ``running``, ``done``, ``failed`` or ``stopped``;
    ``events`` read so far; ``report``, the tally of a ``done`` one (its JSON form);
    ``error``, why a ``failed`` one failed."""

    state: str
    events: int = 0
    report: dict[str, Any] | None = None
    error: str = ""

    @property
    def over(self) -> bool:
        return self.state in ("done", "failed", "stopped")


class Desk:
    """The request folder of one bot account's store, seen from either side."""

    def __init__(self, store: CryptoStore) -> None:
        self.store = store
        self.folder = store.folder / "imports"

    @property
    def _serving(self) -> Path:
        return self.folder / "serving"

    # --- the frontend's side -----------------------------------------------------------------

    def open(self) -> None:
        """Take requests from now on (the caller holds the account's lock); removes what a
        frontend before this one left: requests it had taken, statuses nobody read."""
        self.folder.mkdir(parents=True, exist_ok=True)
        now = time.time()
        for path in self.folder.iterdir():
            try:
                if path.suffix == ".taken" or (
                    path.suffix == ".status" and now - path.stat().st_mtime > STALE_SECONDS
                ):
                    path.unlink()
            except OSError:
                continue  # another process's, or gone already
        _write_whole(self._serving, f"{os.getpid()}\n")

    def close(self) -> None:
        """Take no more requests."""
        try:
            if self._serving.read_text().strip() == str(os.getpid()):
                self._serving.unlink()
        except OSError:
            pass

    def take(self) -> ImportRequest | None:
        """The oldest request no frontend has taken, now taken by this one; None when there is
        none. A request that cannot be read is answered ``failed`` with the reason."""
        try:
            waiting = sorted(self.folder.glob("*.request"), key=_age)
        except OSError:
            return None
        for path in waiting:
            taken = path.with_suffix(".taken")
            try:
                path.rename(taken)
            except OSError:
                continue  # withdrawn by its command meanwhile
            request_id = path.stem
            try:
                return ImportRequest.from_json(request_id, taken.read_text(encoding="utf-8"))
            except (OSError, ValueError, TypeError) as exc:
                self.tell(request_id, Status("failed", error=f"the request cannot be read: {exc}"))
                self.done(request_id)
        return None

    def tell(self, request_id: str, status: Status) -> None:
        """Write where ``request_id`` stands, whole."""
        data = {
            "state": status.state,
            "events": status.events,
            "report": status.report,
            "error": status.error,
        }
        _write_whole(self.folder / f"{request_id}.status", json.dumps(data))

    def done(self, request_id: str) -> None:
        """The request is answered: its taken file goes (its status stays for the command)."""
        (self.folder / f"{request_id}.taken").unlink(missing_ok=True)

    # --- the command's side ------------------------------------------------------------------

    def server(self) -> int | None:
        """The process id of the frontend that takes requests now: the holder of the account's
        lock, when it says it serves; None otherwise."""
        try:
            said = self._serving.read_text().strip()
        except OSError:
            return None
        holder = self.store.holder()
        return holder if holder is not None and said == str(holder) else None

    def ask(self, room: str, since: date | None, until: date | None, full: bool) -> str:
        """Leave a request; returns its id."""
        request = ImportRequest(uuid.uuid4().hex, room, since, until, full)
        _write_whole(self.folder / f"{request.id}.request", request.to_json())
        return request.id

    def withdraw(self, request_id: str) -> bool:
        """Take back a request no frontend took; False when one took it already."""
        try:
            (self.folder / f"{request_id}.request").unlink()
        except FileNotFoundError:
            return False
        return True

    def waiting(self, request_id: str) -> bool:
        """Whether ``request_id`` waits for a frontend to take it."""
        return (self.folder / f"{request_id}.request").exists()

    def status(self, request_id: str) -> Status | None:
        """Where ``request_id`` stands; None before a frontend said anything of it."""
        try:
            data = json.loads((self.folder / f"{request_id}.status").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # not yet written (a status is replaced whole, never half-written)
        if not isinstance(data, dict):
            return None
        return Status(
            str(data.get("state") or ""),
            int(data.get("events") or 0),
            data.get("report") if isinstance(data.get("report"), dict) else None,
            str(data.get("error") or ""),
        )

    def forget(self, request_id: str) -> None:
        """The command has read the end of ``request_id``: its files go."""
        for suffix in (".request", ".taken", ".status"):
            (self.folder / f"{request_id}{suffix}").unlink(missing_ok=True)


def _age(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _write_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole: a reader sees the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + f".{os.getpid()}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
