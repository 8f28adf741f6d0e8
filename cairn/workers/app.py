"""The Celery application. ``celery -A cairn.workers.app worker`` (or ``cairn worker``) runs it.

Without CAIRN_BROKER_URL the same tasks run in-process (see :mod:`cairn.workers.dispatch`).
"""

from __future__ import annotations

from celery import Celery

from cairn.config import Settings, get_settings

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
    )
    return app


configure_celery(get_settings())
