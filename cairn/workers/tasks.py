"""Celery tasks: thin wrappers that take ids and call one domain function.

``cairn.process_session`` works a session; each job of the upkeep schedule
(:data:`cairn.workers.upkeep.JOBS`) is a task of its own, named there, that beat sends.
"""

from __future__ import annotations

from typing import Any

from cairn.core.errors import QueueError
from cairn.runtime import get_runtime
from cairn.workers import upkeep
from cairn.workers.celery_app import app
from cairn.workers.turn import handle_pending

__all__ = ["process_session"]


@app.task(name="cairn.process_session", bind=True, max_retries=10)  # type: ignore[untyped-decorator]
def process_session(self: Any, session_id: int) -> int:
    """Handle the pending events of one session; idempotent, safe to run twice."""
    try:
        return handle_pending(get_runtime(), session_id)
    except QueueError as exc:  # the session locks (Redis) are unreachable: try again shortly
        raise self.retry(exc=exc, countdown=2) from exc
    except Exception as exc:
        # Transient trouble (a database restart, a network blip): back off and try again. An
        # event that keeps failing is turned into a dead letter by handle_pending itself.
        raise self.retry(exc=exc, countdown=min(60, 2**self.request.retries)) from exc


def _upkeep_task(job: upkeep.UpkeepJob) -> None:
    """Register ``job`` of the upkeep schedule as the Celery task beat sends for it."""

    def run() -> int:
        return job.run(get_runtime(), process_session.delay)

    run.__name__ = run.__qualname__ = job.task.removeprefix("cairn.")
    run.__doc__ = f"The upkeep job {job.name} (see cairn.workers.upkeep.JOBS)."
    app.task(name=job.task)(run)


for _job in upkeep.JOBS:
    _upkeep_task(_job)
