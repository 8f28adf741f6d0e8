"""Free space under CAIRN_HOME: refuse to start, or to take new work, rather than die of it.

The embedded vector index maps its segments in 32 MB chunks; when the filesystem cannot back a
page the process gets SIGBUS and dies without a word (issue 33). So Cairn looks before it
leaps: :func:`check_start` refuses a start on a filesystem too small for the embedded index or
with less than ``CAIRN_MIN_FREE_MB`` free, and :func:`check_room` refuses a new message below
that threshold with :class:`DiskFull`, which the frontends tell in the thread, as they tell any
refused message. See docs/adr/0038.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from cairn.core.errors import InvalidInput

__all__ = [
    "DISK_FULL",
    "INDEX_MIN_MB",
    "DiskFull",
    "DiskSpace",
    "check_room",
    "check_start",
    "disk_space",
]

log = logging.getLogger(__name__)

DISK_FULL = "I can't store anything: the disk under CAIRN_HOME is full"
# Two of the embedded index's 32 MB mapped chunks: below this it cannot even open.
INDEX_MIN_MB = 64
_MB = 1024 * 1024


class DiskFull(InvalidInput):
    """The filesystem under CAIRN_HOME has too little room: nothing was taken or stored."""


@dataclass(frozen=True, slots=True)
class DiskSpace:
    """The filesystem that holds ``path``: its free and total megabytes, and the threshold."""

    path: Path
    free_mb: int
    total_mb: int
    min_free_mb: int

    @property
    def low(self) -> bool:
        """Whether free space is under the threshold (CAIRN_MIN_FREE_MB)."""
        return self.free_mb < self.min_free_mb

    def describe(self) -> str:
        """One line for people: what is free, of what, and the threshold."""
        return (
            f"{self.free_mb} MB free of {self.total_mb} MB at {self.path} "
            f"(CAIRN_MIN_FREE_MB is {self.min_free_mb})"
        )


def disk_space(home: Path, min_free_mb: int) -> DiskSpace:
    """The space of the filesystem that holds ``home`` (or its nearest existing parent)."""
    path = home
    while not path.exists() and path != path.parent:
        path = path.parent
    found = os.statvfs(path)
    return DiskSpace(
        home,
        free_mb=found.f_bavail * found.f_frsize // _MB,
        total_mb=found.f_blocks * found.f_frsize // _MB,
        min_free_mb=min_free_mb,
    )


def check_start(home: Path, min_free_mb: int, *, embedded_index: bool) -> DiskSpace:
    """The space under ``home`` when Cairn may start there; raises DiskFull with the reason.

    Refused: a filesystem smaller than :data:`INDEX_MIN_MB` when the embedded index lives in it
    (it would die of SIGBUS on its first write), and less than ``min_free_mb`` free.
    """
    space = disk_space(home, min_free_mb)
    if embedded_index and space.total_mb < INDEX_MIN_MB:
        raise DiskFull(
            f"the filesystem under CAIRN_HOME is too small for the embedded vector index: "
            f"{space.total_mb} MB at {home}, it needs at least {INDEX_MIN_MB} MB; put "
            "CAIRN_HOME on a larger filesystem or set CAIRN_QDRANT_URL"
        )
    if space.low:
        raise DiskFull(f"{DISK_FULL}: {space.describe()}; free some space and start again")
    return space


# Homes that had plenty of room when last looked at, until when (monotonic): a message is not
# worth a statvfs each while the disk is far from its threshold (no second of messages writes
# _ROOMY_MB). Near the threshold every message looks again.
_ROOMY: dict[tuple[Path, int], float] = {}
_ROOMY_SECONDS = 1.0
_ROOMY_MB = 256


def check_room(home: Path, min_free_mb: int) -> None:
    """Raise DiskFull (and say so on the log) when ``home`` has under ``min_free_mb`` free.

    Called before new work is taken, so that nothing is acknowledged that cannot be stored.
    """
    now = time.monotonic()
    key = (home, min_free_mb)
    if _ROOMY.get(key, 0.0) > now:
        return  # looked less than a second ago, and there was room
    space = disk_space(home, min_free_mb)
    if space.low:
        log.error(
            "%s: %s; new messages are refused until there is room", DISK_FULL, space.describe()
        )
        raise DiskFull(f"{DISK_FULL} ({space.free_mb} MB free); try again once there is room")
    if space.free_mb - min_free_mb >= _ROOMY_MB:
        _ROOMY[key] = now + _ROOMY_SECONDS
