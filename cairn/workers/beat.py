"""The one scheduler of periodic jobs: a Celery beat that schedules only while it holds a lock.

Any number of ``cairn worker --beat`` may run, on any machines sharing the broker; exactly one
of them schedules. The others wait (standby) and take over when the holder's lock lapses, within
CAIRN_LOCK_TTL seconds of its death.

- The lock is a Redis key on the broker (:data:`LOCK_KEY`) with a TTL, whose value names its
  holder (``host:pid:nonce``). The beat loop renews it on every tick, and ticks at least every
  third of the TTL. A beat sends a due job only right after a renewal succeeded, so a beat that
  was frozen, cut off, or whose lock was taken by another never sends one more job: it logs the
  loss and waits like any standby.
- When each job last ran is kept next to the lock (:data:`LAST_RUN_KEY`), so a beat that takes
  over on another machine keeps the hourly jobs hourly. A job that last ran "in the future"
  (the clock stepped back, or the other machine's clock ran ahead) is scheduled from now,
  rather than held back until the clock catches up.
- A beat embedded in a worker (a child process) ends with its worker: it asks Linux to send it
  SIGTERM when its parent dies, and checks its parent on every tick elsewhere. That is hygiene;
  the lock is the guarantee.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys
import threading
import uuid
from datetime import datetime, timedelta
from types import FrameType
from typing import Any

import redis
from celery import Celery
from celery.beat import ScheduleEntry, Scheduler
from celery.signals import beat_embedded_init
from celery.utils.time import maybe_make_aware
from redis.exceptions import LockError, LockNotOwnedError

from cairn.core.errors import ConfigError
from cairn.core.settings import get_settings

__all__ = [
    "CLOCK_SLACK",
    "LAST_RUN_KEY",
    "LOCK_KEY",
    "OneScheduler",
    "SchedulerLock",
    "scheduler_holder",
]

log = logging.getLogger(__name__)

LOCK_KEY = "cairn:beat:scheduler"
LAST_RUN_KEY = "cairn:beat:last-run"
# A job that last ran further ahead of the clock than this is scheduled from now instead.
CLOCK_SLACK = timedelta(seconds=1)

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def scheduler_holder(client: redis.Redis[bytes]) -> str | None:
    """Who holds the scheduler lock (``host:pid:nonce``), or None when no beat schedules.

    Raises redis.RedisError when Redis cannot be reached.
    """
    value = client.get(LOCK_KEY)
    return value.decode("utf-8", "replace") if value is not None else None


class SchedulerLock:
    """The scheduler lock, seen from one beat: take it when free, renew it while held."""

    def __init__(self, client: redis.Redis[bytes], *, ttl: float) -> None:
        self.ttl = ttl
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._client = client
        # thread_local=False: the token must not depend on which thread renews it.
        self._lock = client.lock(LOCK_KEY, timeout=ttl, thread_local=False)
        self.held = False
        self.takes = 0  # how many times this beat took the lock (a new take resumes the jobs)
        self._state = ""  # the last state logged, so that each change is logged once

    def keep(self) -> bool:
        """Take or renew the lock; True when this beat holds it for ``ttl`` seconds from now.

        Never raises: when Redis cannot be reached the answer is False (nothing may be sent
        while holding the lock cannot be confirmed), and the next call tries again.
        """
        try:
            if self.held:
                try:
                    self._lock.reacquire()
                    return True
                except LockNotOwnedError:
                    self.held = False
                    self._log("lost", "lost the scheduler lock (now %s): stopped scheduling")
            if self._lock.acquire(blocking=False, token=self.holder):
                self.held = True
                self.takes += 1
                self._log("holding", "took the scheduler lock as %s: scheduling", self.holder)
            else:
                self._log("waiting", "the scheduler lock is held by %s: waiting (standby)")
        except (LockError, redis.RedisError) as exc:
            self._log("unreachable", "cannot reach Redis for the scheduler lock: %s", str(exc))
            return False
        return self.held

    def release(self) -> None:
        """Let the lock go at once if this beat holds it (a standby takes over on its next try)."""
        if self.held:
            self.held = False
            # Lapsed or taken already, or Redis away: the TTL frees it either way.
            with contextlib.suppress(LockError, redis.RedisError):
                self._lock.release()
                log.info("beat: released the scheduler lock")

    def _log(self, state: str, message: str, detail: str | None = None) -> None:
        """Log ``message`` when the state changes; ``detail`` defaults to the lock's holder."""
        if state == self._state:
            return
        self._state = state
        if detail is None:
            try:
                detail = scheduler_holder(self._client) or "nobody"
            except redis.RedisError:
                detail = "unknown"
        level = logging.WARNING if state in ("lost", "unreachable") else logging.INFO
        log.log(level, "beat: " + message, detail)


class OneScheduler(Scheduler):  # type: ignore[misc]
    """Celery's in-memory scheduler, sending due jobs only while it holds :class:`SchedulerLock`.

    Celery builds it from ``beat_scheduler`` (see :mod:`cairn.workers.celery_app`). Raises
    ConfigError when CAIRN_BROKER_URL is not set.
    """

    def __init__(self, app: Celery, *args: Any, **kwargs: Any) -> None:
        settings = get_settings()
        if not settings.broker_url:
            raise ConfigError("CAIRN_BROKER_URL is not set: celery beat needs the Redis broker")
        self._client: redis.Redis[bytes] = redis.Redis.from_url(
            settings.broker_url, socket_timeout=5, socket_connect_timeout=5
        )
        self.lock = SchedulerLock(self._client, ttl=settings.workers.lock_ttl)
        self.parent: int | None = None  # the worker this beat ends with, when embedded in one
        super().__init__(app, *args, **kwargs)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """Send the next due job if this beat holds the lock; returns how long to sleep.

        Raises SystemExit when the worker that started this beat is gone.
        """
        if self.parent is not None and os.getppid() != self.parent:
            log.warning("beat: the worker that started this beat is gone: exiting")
            raise SystemExit(0)
        takes = self.lock.takes
        if not self.lock.keep():
            return self.lock.ttl / 3
        if self.lock.takes != takes:
            self._resume()
        self._catch_up_with_the_clock()
        return float(min(super().tick(*args, **kwargs), self.lock.ttl / 3))

    def reserve(self, entry: ScheduleEntry) -> ScheduleEntry:
        """Advance ``entry`` and record in Redis when it ran (for whichever beat comes next)."""
        entry = super().reserve(entry)
        try:
            self._client.hset(LAST_RUN_KEY, entry.name, entry.last_run_at.isoformat())
        except redis.RedisError as exc:  # the next holder may run it early: jobs are idempotent
            log.warning("beat: could not record when %s ran: %s", entry.name, exc)
        return entry

    def close(self) -> None:
        """Release the lock, then close what Celery's scheduler holds."""
        self.lock.release()
        super().close()
        self._client.close()

    def _catch_up_with_the_clock(self) -> None:
        """Schedule from now the jobs that last ran "in the future".

        That happens when the wall clock steps back (a machine's clock set after it booted,
        NTP correcting it) or when the previous holder's clock ran ahead (:meth:`_resume`).
        Celery measures what is due against the wall clock, so it would send nothing until the
        clock caught up: minutes without upkeep, for a step back of minutes.
        """
        now = self.app.now()
        ahead = [
            entry
            for entry in self.schedule.values()
            if entry.last_run_at is not None
            and maybe_make_aware(entry.last_run_at) > now + CLOCK_SLACK
        ]
        if not ahead:
            return
        most = max(maybe_make_aware(entry.last_run_at) - now for entry in ahead)
        for entry in ahead:
            entry.last_run_at = now
        self._heap = None
        log.warning(
            "beat: the clock is %.0f s behind when %s last ran: scheduling from now",
            most.total_seconds(),
            ", ".join(sorted(entry.name for entry in ahead)),
        )

    def _resume(self) -> None:
        """Take up when each job last ran from the previous holder, and rebuild the heap."""
        try:
            stored = self._client.hgetall(LAST_RUN_KEY)
        except redis.RedisError as exc:
            log.warning("beat: could not read when the jobs last ran: %s", exc)
            return
        for raw_name, raw_when in stored.items():
            entry = self.schedule.get(raw_name.decode())
            if entry is not None:
                with contextlib.suppress(ValueError):
                    entry.last_run_at = datetime.fromisoformat(raw_when.decode())
        self._heap = None


@beat_embedded_init.connect  # type: ignore[untyped-decorator,unused-ignore]
def _end_with_the_worker(sender: Any = None, **_: object) -> None:
    """In a beat embedded in a worker (a child process), arrange to end with the worker.

    Only there: a standalone ``celery beat`` may outlive the shell or supervisor that started it.
    """
    scheduler = sender.scheduler if sender is not None else None
    if not isinstance(scheduler, OneScheduler):
        return
    scheduler.parent = os.getppid()
    if threading.current_thread() is threading.main_thread():
        # SIGTERM ends the beat loop through its `finally`, which releases the lock, so a
        # standby takes over at once instead of after the TTL.
        signal.signal(signal.SIGTERM, _exit_on_signal)
        if sys.platform == "linux":
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
                log.warning("beat: prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)
