"""The Celery application. ``celery -A cairn.workers.app worker`` (or ``cairn worker``) runs it.

Without CAIRN_BROKER_URL the same tasks run in-process (see :mod:`cairn.workers.dispatch`).
"""

from __future__ import annotations

import contextlib

from celery import Celery

from cairn.config import Settings, get_settings
from cairn.errors import ConfigError

__all__ = ["app", "configure_celery"]

app = Celery("cairn", include=["cairn.workers.tasks"])


def configure_celery(settings: Settings) -> Celery:
    """Point the app at the configured broker, with crash-safe delivery settings."""
    app.conf.update(
        broker_url=settings.broker_url or "memory://",
        broker_connection_retry_on_startup=True,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        # Crash safety: a task is acknowledged only after it ran, and requeued if the worker
        # dies under it; tasks are idempotent, so running twice is harmless.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
        task_default_queue="cairn",
        broker_transport_options={"visibility_timeout": 3600},
        beat_schedule={
            "reconcile-index": {
                "task": "cairn.reconcile_index",
                "schedule": settings.beat_interval,
            },
            "requeue-stale": {"task": "cairn.requeue_stale", "schedule": settings.beat_interval},
            "rotate-tiers": {"task": "cairn.rotate_tiers", "schedule": 3600.0},
            "end-idle-sessions": {
                "task": "cairn.end_idle_sessions",
                "schedule": max(settings.beat_interval, 300.0),
            },
        },
    )
    return app


# `cairn` commands report a bad setting themselves; a bare `celery -A` run fails later with the
# same message when it first needs a setting.
with contextlib.suppress(ConfigError):
    configure_celery(get_settings())
