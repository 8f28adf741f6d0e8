"""One process owns an embedded index folder: an exclusive lock on a file beside it.

qdrant-edge locks a shard's WAL only once the shard is open. Two processes that start together
(two ``cairn worker`` on the embedded folder) both found no shard and both created one: the
loser's attempt broke the winner's files ("Gridstore IO error: No such file"), and neither had
an index for the next 30 s. An exclusive lock on a file beside the folder, taken before the
shard is touched, lets exactly one in and leaves its files alone. The OS drops the lock when the
process ends, SIGKILL included.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

__all__ = ["claim", "release", "release_all"]

_CLAIMS: dict[Path, int] = {}  # folder -> descriptor of its lock file, held


def claim(path: Path) -> None:
    """Take the folder ``path`` for this process, or raise RuntimeError naming the process that
    has it. Taking it again is a no-op; callers serialise their calls (one lock around them)."""
    if path in _CLAIMS:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = _holder(fd)
        os.close(fd)
        raise RuntimeError(
            f"held by another process{f' (pid {holder})' if holder else ''}; "
            "one process at a time can use the embedded index, the others recall lexically "
            "(set CAIRN_QDRANT_URL to share a Qdrant server)"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    _CLAIMS[path] = fd


def release(path: Path) -> None:
    """Give the folder ``path`` up (nothing when this process does not hold it)."""
    fd = _CLAIMS.pop(path, None)
    if fd is not None:
        os.close(fd)  # closing the descriptor drops the lock


def release_all() -> None:
    """Give up every folder this process holds (at exit)."""
    for path in list(_CLAIMS):
        release(path)


def _holder(fd: int) -> int | None:
    """The live process named in the lock file ``fd``, or None if none is named within 0.5 s.

    The holder writes its pid just after it takes the lock, so a process that loses the race
    by microseconds can read an empty file, or the pid of a holder that has since exited.
    """
    deadline = time.monotonic() + 0.5
    while True:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if text.isdigit() and _alive(int(text)):
            return int(text)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        pass
    return True
