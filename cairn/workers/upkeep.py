"""Periodic upkeep: the one schedule of periodic jobs, run by celery beat or, in-process, a ticker.

- reconcile the vector index with the database (replay the memory outbox);
- re-queue sessions whose pending events have waited too long (a worker died mid-turn, a
  broker lost a message): the session lock and the event states make this harmless;
- end sessions idle for longer than CAIRN_SESSION_IDLE, running the session-end hooks (learning
  extraction) for each;
- decay and tier rotation of long-term memory, with rule-based garbage collection, and
  retention: old session logs and episodes deleted (docs/adr/0043);
- memo expiry: memos past their expiry by CAIRN_MEMO_KEEP_EXPIRED are deleted;
- approval expiry: a tool call held for approval past CAIRN_MCP_APPROVAL_TTL expires, and its
  session is queued to tell the model (docs/adr/0031).

:data:`JOBS` says what runs and how often; beat's schedule (:func:`beat_schedule`, set by
:mod:`cairn.workers.celery_app`, each job a task of :mod:`cairn.workers.tasks`) and the
in-process ticker (:func:`start_in_process`) are both read from it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from sqlmodel import select

from cairn.core.settings import Settings
from cairn.db.models import Tenant, utcnow
from cairn.memory.index import IndexUnavailable
from cairn.memory.retention import apply_retention
from cairn.memory.tiers import collect_garbage
from cairn.memos.box import MemoBox
from cairn.runtime import Runtime
from cairn.sessions.approvals import Approvals
from cairn.sessions.log import EventLog
from cairn.workers.session_end import end_session

__all__ = [
    "JOBS",
    "SESSION_END_HOOKS",
    "Periodic",
    "Submit",
    "Ticker",
    "UpkeepJob",
    "beat_schedule",
    "end_idle_sessions",
    "expire_approvals",
    "expire_memos",
    "in_process_ticker",
    "reconcile_index",
    "requeue_stale",
    "rotate_tiers",
    "stale_sessions",
    "start_in_process",
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
    """Decay and tier rotation (and rule-based garbage collection), then retention
    (CAIRN_RETENTION_SESSION_DAYS, CAIRN_RETENTION_EPISODE_DAYS), for every tenant."""
    policy = rt.settings.memory
    with rt.db.session() as s:
        tenants = list(s.exec(select(Tenant.id)).all())
    for tenant in tenants:
        collect_garbage(rt.db, tenant, policy)
        try:
            apply_retention(rt.db, rt.memory.index, tenant, rt.settings.workers)
        except IndexUnavailable as exc:
            log.warning("retention in %s waits for the vector index: %s", tenant, exc)
    return len(tenants)


def expire_memos(rt: Runtime) -> int:
    """Delete memos that expired more than CAIRN_MEMO_KEEP_EXPIRED seconds ago; returns how many."""
    purged = MemoBox(rt.db).purge_expired(
        older_than=timedelta(seconds=rt.settings.workers.memo_keep_expired)
    )
    if purged:
        log.info("deleted %d expired memos", purged)
    return purged


Submit = Callable[[int], object]
"""Queues a session's pending events: the dispatcher in-process, the Celery task under beat."""


def expire_approvals(rt: Runtime, submit: Submit) -> int:
    """Expire the requests for approval past their time and queue their sessions (``submit``),
    whose next turn tells the model; returns how many sessions had news."""
    events = EventLog(rt.db)
    sessions = Approvals(rt.db).expire_due(events)
    for session_id in sessions:
        submit(session_id)
    return len(sessions)


def stale_sessions(rt: Runtime, *, older_than: float) -> list[int]:
    """Sessions with a pending event older than ``older_than`` seconds."""
    return EventLog(rt.db).stale_sessions(older_than=older_than)


def requeue_stale(rt: Runtime, submit: Submit) -> int:
    """Queue again (``submit``) the sessions whose pending events waited longer than
    CAIRN_STALE_AFTER; returns how many."""
    sessions = stale_sessions(rt, older_than=rt.settings.workers.stale_after)
    for session_id in sessions:
        submit(session_id)
    return len(sessions)


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


@dataclass(frozen=True, slots=True)
class UpkeepJob:
    """One periodic job: its name in beat's schedule, its Celery task, what it runs and how
    often (seconds, from the settings)."""

    name: str
    task: str
    run: Callable[[Runtime, Submit], int]
    every: Callable[[Settings], float]


def _each_beat(settings: Settings) -> float:
    return settings.workers.beat_interval


def _each_five_minutes(settings: Settings) -> float:
    # Ending a session extracts its learnings with the model: a round may take a while, and
    # the next must not start on the same sessions meanwhile. Minutes late is nothing for
    # sessions idle for CAIRN_SESSION_IDLE (six hours by default, a minute at least).
    return max(settings.workers.beat_interval, 300.0)


def _hourly(settings: Settings) -> float:
    return 3600.0


JOBS: tuple[UpkeepJob, ...] = (
    UpkeepJob(
        "reconcile-index", "cairn.reconcile_index", lambda rt, _: reconcile_index(rt), _each_beat
    ),
    UpkeepJob("requeue-stale", "cairn.requeue_stale", requeue_stale, _each_beat),
    UpkeepJob("expire-approvals", "cairn.expire_approvals", expire_approvals, _each_beat),
    UpkeepJob(
        "end-idle-sessions",
        "cairn.end_idle_sessions",
        lambda rt, _: len(end_idle_sessions(rt, idle=rt.settings.workers.session_idle)),
        _each_five_minutes,
    ),
    UpkeepJob("rotate-tiers", "cairn.rotate_tiers", lambda rt, _: rotate_tiers(rt), _hourly),
    UpkeepJob("expire-memos", "cairn.expire_memos", lambda rt, _: expire_memos(rt), _hourly),
)
"""The upkeep schedule, for beat and the in-process ticker alike."""


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    """Celery's ``beat_schedule`` for :data:`JOBS`."""
    return {job.name: {"task": job.task, "schedule": job.every(settings)} for job in JOBS}


@dataclass(frozen=True, slots=True)
class Periodic:
    """A job the :class:`Ticker` runs every ``every`` seconds."""

    name: str
    every: float
    run: Callable[[], object]


class Ticker:
    """Runs periodic jobs on a daemon thread (the in-process beat).

    It wakes every shortest interval of its jobs, and runs each job on its first wake-up and
    then whenever its own interval has passed since it last ran; jobs run one after another.
    """

    def __init__(self, jobs: Sequence[Periodic]) -> None:
        self.jobs = tuple(jobs)
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
        if not self.jobs:
            return
        last: dict[str, float] = {}
        while not self._stop.wait(min(job.every for job in self.jobs)):
            for job in self.jobs:
                now = time.monotonic()
                if job.name in last and now - last[job.name] < job.every:
                    continue
                last[job.name] = now
                try:
                    job.run()
                except Exception:
                    log.exception("periodic job %s failed", job.name)


def in_process_ticker(rt: Runtime, submit: Submit) -> Ticker:
    """A ticker (not started) for :data:`JOBS`, at the intervals of ``rt``'s settings."""
    return Ticker(
        [Periodic(j.name, j.every(rt.settings), partial(j.run, rt, submit)) for j in JOBS]
    )


def start_in_process(rt: Runtime, submit: Submit) -> Ticker:
    """Run the upkeep schedule on a thread of this process (no broker, so no beat); stop it
    with :meth:`Ticker.stop`."""
    return in_process_ticker(rt, submit).start()
