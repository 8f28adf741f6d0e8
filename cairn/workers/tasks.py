"""Celery tasks: thin wrappers that take ids and call one domain function."""

from __future__ import annotations

from typing import Any

from cairn.core.errors import QueueError
from cairn.runtime import get_runtime
from cairn.workers import upkeep
from cairn.workers.celery_app import app
from cairn.workers.turn import handle_pending

__all__ = [
    "end_idle_sessions",
    "expire_memos",
    "process_session",
    "reconcile_index",
    "requeue_stale",
    "rotate_tiers",
]


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


@app.task(name="cairn.reconcile_index")  # type: ignore[untyped-decorator]
def reconcile_index() -> int:
    """Replay the memory index outbox."""
    return upkeep.reconcile_index(get_runtime())


@app.task(name="cairn.requeue_stale")  # type: ignore[untyped-decorator]
def requeue_stale() -> int:
    """Queue again the sessions whose pending events waited too long."""
    rt = get_runtime()
    sessions = upkeep.stale_sessions(rt, older_than=rt.settings.stale_after)
    for session_id in sessions:
        process_session.delay(session_id)
    return len(sessions)


@app.task(name="cairn.end_idle_sessions")  # type: ignore[untyped-decorator]
def end_idle_sessions() -> int:
    """End idle sessions (running the session-end hooks)."""
    rt = get_runtime()
    return len(upkeep.end_idle_sessions(rt, idle=rt.settings.session_idle))


@app.task(name="cairn.rotate_tiers")  # type: ignore[untyped-decorator]
def rotate_tiers() -> int:
    """Decay, tier rotation and garbage collection of long-term memory."""
    return upkeep.rotate_tiers(get_runtime())


@app.task(name="cairn.expire_memos")  # type: ignore[untyped-decorator]
def expire_memos() -> int:
    """Delete memos long past their expiry."""
    return upkeep.expire_memos(get_runtime())
