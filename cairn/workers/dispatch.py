"""Getting work to the workers: in-process threads by default, Celery on Redis at scale."""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

import redis

from cairn.core.errors import QueueError
from cairn.core.redact import mask_url
from cairn.db import is_unavailable
from cairn.workers.broker import QueuePublisher, is_redis_url

__all__ = ["CeleryDispatcher", "Dispatcher", "InProcessDispatcher"]

log = logging.getLogger(__name__)

# How an in-process turn waits out a database outage: first and longest pause between runs, and
# how long in all before it gives up (the periodic requeue of stale sessions takes over then).
_FIRST_WAIT = 0.5
_LONGEST_WAIT = 5.0
_OUTAGE_PATIENCE = 300.0


class Dispatcher(Protocol):
    """Hands a session with pending events to a worker."""

    def submit(self, session_id: int) -> None:
        """Queue the session's pending events; raises QueueError when the queue is down."""
        ...

    def close(self) -> None:
        """Finish or hand over queued work and release resources."""
        ...


class InProcessDispatcher:
    """Runs the Celery task itself on a small thread pool in this process (the default)."""

    def __init__(self, workers: int = 4) -> None:
        from cairn.workers.celery_app import app
        from cairn.workers.tasks import process_session

        # Celery binds tasks lazily, and binding is not thread-safe: two pool threads applying
        # the task for the first time at once can see it half-bound. Bind it here, once.
        app.finalize(auto=True)
        if process_session.request_stack is None:
            raise RuntimeError("the Celery task could not be bound")
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cairn-worker")

    def submit(self, session_id: int) -> None:
        """Run ``process_session`` for the session on a pool thread."""
        future = self._pool.submit(_run_task, session_id)
        future.add_done_callback(_report)

    def close(self) -> None:
        """Wait for running turns to finish."""
        self._pool.shutdown(wait=True)


def _run_task(session_id: int) -> int:
    """Run the task here; while the database is down, wait for it and run it again."""
    from cairn.workers.tasks import process_session

    delay, waited = _FIRST_WAIT, 0.0
    while True:
        # apply() runs the very task a Celery worker would, in this thread, retries included;
        # but applied retries run at once, without their countdown, so a database restart
        # would use them all up in a moment. Waiting for the database is done here instead.
        result = process_session.apply(args=(session_id,))
        try:
            return int(result.get(propagate=True))
        except Exception as exc:
            if not is_unavailable(exc) or waited >= _OUTAGE_PATIENCE:
                raise
            if not waited:
                log.warning("database unavailable; session %s waits for it: %s", session_id, exc)
        time.sleep(delay)
        waited += delay
        delay = min(delay * 2, _LONGEST_WAIT)


def _report(future: Future[int]) -> None:
    exc = future.exception()
    if exc is not None:
        log.error("in-process task failed: %s", exc, exc_info=exc)


class CeleryDispatcher:
    """Sends ``process_session`` to Celery workers through the Redis broker.

    The task goes straight onto its queue with one LPUSH (:class:`QueuePublisher`), retried a
    few times on a connection failure. Settings accept only redis:// and rediss:// brokers.
    """

    def __init__(self, broker_url: str) -> None:
        from cairn.workers.celery_app import app

        if not is_redis_url(broker_url):
            raise ValueError(
                f"the broker must be a redis:// or rediss:// URL, not {mask_url(broker_url)!r}"
            )
        self._broker_url = broker_url
        self._publisher = QueuePublisher(app, broker_url, app.conf.task_default_queue)

    def submit(self, session_id: int) -> None:
        """Publish the task; raises QueueError naming the broker when it is unreachable."""
        from cairn.workers.tasks import process_session

        try:
            self._publisher.publish(process_session.name, (session_id,))
        except (OSError, redis.RedisError) as exc:
            raise QueueError(
                f"cannot reach the broker at {mask_url(self._broker_url)} (CAIRN_BROKER_URL): {exc}"
            ) from exc

    def close(self) -> None:
        """Close the publisher's connections (the broker keeps queued work)."""
        self._publisher.close()
