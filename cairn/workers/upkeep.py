"""Periodic upkeep: what celery beat (or, in-process, a ticker thread) runs on a schedule.

- reconcile the vector index with the database (replay the memory outbox);
- re-queue sessions whose pending events have waited too long (a worker died mid-turn, a
  broker lost a message): the session lock and the event states make this harmless;
- end sessions idle for longer than CAIRN_SESSION_IDLE, running the session-end hooks (learning
  extraction) for each;
- decay and tier rotation of long-term memory, with rule-based garbage collection;
- memo expiry: memos past their expiry by CAIRN_MEMO_KEEP_EXPIRED are deleted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta

from sqlmodel import select

from cairn.db.models import Tenant, utcnow
from cairn.memory.tiers import TierPolicy, collect_garbage
from cairn.memos.box import MemoBox
from cairn.runtime import Runtime
from cairn.sessions.log import EventLog
from cairn.workers.session_end import end_session

__all__ = [
    "SESSION_END_HOOKS",
    "Ticker",
    "end_idle_sessions",
    "expire_memos",
    "reconcile_index",
    "rotate_tiers",
    "stale_sessions",
]

log = logging.getLogger(__name__)

# Called with (runtime, session id) when a session ends: learnings are extracted from the
# session and announced in its thread as "remembered: ..." notices.
SESSION_END_HOOKS: list[Callable[[Runtime, int], object]] = [end_session]


def reconcile_index(rt: Runtime) -> int:
    """Bring the vector index in step with the database; returns how many entries it replayed."""
    replayed, _ = rt.memory.reconcile()
    return replayed


def rotate_tiers(rt: Runtime) -> int:
    """Decay and tier rotation (and rule-based garbage collection) for every tenant."""
    policy = TierPolicy.from_settings(rt.settings)
    with rt.db.session() as s:
        tenants = list(s.exec(select(Tenant.id)).all())
    for tenant in tenants:
        collect_garbage(rt.db, tenant, policy)
    return len(tenants)


def expire_memos(rt: Runtime) -> int:
    """Delete memos that expired more than CAIRN_MEMO_KEEP_EXPIRED seconds ago; returns how many."""
    purged = MemoBox(rt.db).purge_expired(
        older_than=timedelta(seconds=rt.settings.memo_keep_expired)
    )
    if purged:
        log.info("deleted %d expired memos", purged)
    return purged


def stale_sessions(rt: Runtime, *, older_than: float) -> list[int]:
    """Sessions with a pending event older than ``older_than`` seconds."""
    return EventLog(rt.db).stale_sessions(older_than=older_than)


def end_idle_sessions(rt: Runtime, *, idle: float) -> list[int]:
    """End open sessions without activity for ``idle`` seconds; returns their ids.

    The session-end hooks run while the session is still open, and it is marked ended after
    them: a crash in between leaves it open, so the next run reviews it again (a hook that
    ends the session itself does so in its own transaction). A hook that fails is logged and
    does not keep the session open; the next message in the thread reopens it. A session that
    a message woke meanwhile stays open.
    """
    cutoff = utcnow() - timedelta(seconds=idle)
    events = EventLog(rt.db)
    ended = []
    for session_id in events.idle_since(cutoff):
        for hook in SESSION_END_HOOKS:
            try:
                hook(rt, session_id)
            except Exception:
                log.exception("session-end hook %s failed for session %s", hook, session_id)
        events.end_if_idle(session_id, cutoff)
        ended.append(session_id)
    return ended


class Ticker:
    """Runs ``jobs`` every ``interval`` seconds on a daemon thread (the in-process beat)."""

    def __init__(self, jobs: list[Callable[[], object]], *, interval: float) -> None:
        self._jobs = jobs
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cairn-beat", daemon=True)

    def start(self) -> Ticker:
        """Start ticking; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop after the current round."""
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            for job in self._jobs:
                try:
                    job()
                except Exception:
                    log.exception("periodic job %s failed", job)
