"""Celery tasks: thin wrappers that take ids and call one domain function."""

from __future__ import annotations

from typing import Any

from cairn.errors import QueueError
from cairn.runtime import get_runtime
from cairn.workers.app import app
from cairn.workers.turn import handle_pending

__all__ = ["process_session"]


@app.task(name="cairn.process_session", bind=True, max_retries=10)  # type: ignore[untyped-decorator]
def process_session(self: Any, session_id: int) -> int:
    """Handle the pending events of one session; idempotent, safe to run twice."""
    try:
        return handle_pending(get_runtime(), session_id)
    except QueueError as exc:  # the session is busy elsewhere: try again shortly
        raise self.retry(exc=exc, countdown=2) from exc
