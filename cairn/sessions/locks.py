"""Per-thread locks: one session is worked on by one worker at a time, on any machine."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

import redis
from redis.lock import Lock

from cairn.core.errors import QueueError, SessionBusy

__all__ = ["LocalLocks", "RedisLocks", "SessionLocks"]

log = logging.getLogger(__name__)


class SessionLocks(Protocol):
    """Mutual exclusion per key, across whatever shares work (threads or machines)."""

    def hold(self, key: str, *, wait: float) -> AbstractContextManager[None]:
        """Hold the lock for ``key`` for the block.

        Raises SessionBusy when another holder keeps it for ``wait`` seconds (``wait=0``: one
        attempt), QueueError when the lock service cannot be reached.
        """
        ...


class LocalLocks:
    """Locks for one process (the embedded default)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    @contextmanager
    def hold(self, key: str, *, wait: float) -> Iterator[None]:
        """Hold the in-process lock for ``key``."""
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        if not lock.acquire(timeout=wait):
            raise SessionBusy(f"session {key} is still busy after {wait:.0f}s")
        try:
            yield
        finally:
            lock.release()


class RedisLocks:
    """Locks in Redis, shared by every worker.

    Held locks are renewed every ``ttl / 3`` seconds by one heartbeat thread per instance, so a
    long turn keeps its lock while a worker killed mid-turn lets it go within ``ttl`` seconds.
    (One thread for all locks, started on first use: a thread per hold cost more than the
    rest of taking and releasing the lock.)
    """

    def __init__(self, client: redis.Redis[bytes], *, ttl: float = 30.0) -> None:
        self._client = client
        self._ttl = ttl
        self._guard = threading.Lock()  # the heartbeat renews under it; a release waits for it
        self._held: dict[int, Lock] = {}
        self._heartbeat: threading.Thread | None = None

    @contextmanager
    def hold(self, key: str, *, wait: float) -> Iterator[None]:
        """Hold the Redis lock ``cairn:lock:{key}``."""
        # thread_local=False: the heartbeat thread renews the lock the task thread took.
        lock = self._client.lock(
            f"cairn:lock:{key}", timeout=self._ttl, blocking_timeout=wait, thread_local=False
        )
        try:
            acquired = lock.acquire()
        except redis.RedisError as exc:
            raise QueueError(f"cannot take the session lock in Redis: {exc}") from exc
        if not acquired:
            raise SessionBusy(f"session {key} is still busy after {wait:.0f}s")
        with self._guard:
            self._held[id(lock)] = lock
            if self._heartbeat is None or not self._heartbeat.is_alive():
                self._heartbeat = threading.Thread(
                    target=self._renew, name="cairn-lock-heartbeat", daemon=True
                )
                self._heartbeat.start()
        try:
            yield
        finally:
            with self._guard:  # never renewed after this: the heartbeat renews under the guard
                del self._held[id(lock)]
            # If it expired, another worker may hold it now, which is what ttl is for.
            with contextlib.suppress(redis.exceptions.LockError, redis.RedisError):
                lock.release()

    def _renew(self) -> None:
        while True:
            time.sleep(self._ttl / 3)
            with self._guard:
                for lock in self._held.values():
                    try:
                        lock.reacquire()
                    except (redis.exceptions.LockError, redis.RedisError) as exc:
                        log.warning("could not renew a session lock: %s", exc)
