"""The Celery application: ``celery -A cairn.workers.celery_app worker`` (or ``cairn worker``).

Without CAIRN_BROKER_URL the same tasks run in-process (see :mod:`cairn.workers.dispatch`).
"""

from __future__ import annotations

import contextlib
import logging
import os

from celery import Celery
from celery.signals import worker_process_init, worker_process_shutdown

from cairn.core.errors import ConfigError
from cairn.core.settings import Settings, get_settings
from cairn.workers.broker import is_redis_url
from cairn.workers.upkeep import beat_schedule

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
        # kombu's Redis transport, minus a client built per message (see cairn.workers.broker).
        broker_transport=(
            "cairn.workers.broker:Transport" if is_redis_url(settings.broker_url) else None
        ),
        # Exactly one beat schedules, however many run (see cairn.workers.beat).
        beat_scheduler="cairn.workers.beat:OneScheduler",
        beat_schedule=beat_schedule(settings),  # the one upkeep schedule (cairn.workers.upkeep)
    )
    return app


@worker_process_init.connect  # type: ignore[untyped-decorator,unused-ignore]
def _warm_up(**_: object) -> None:
    """Build a forked pool child's runtime (model, stores) before it takes its first task."""
    from cairn.runtime import get_runtime

    try:
        get_runtime()
    except Exception:  # the first task raises it again, where it is reported and retried
        logging.getLogger(__name__).exception("could not prepare this worker's runtime")


@worker_process_shutdown.connect  # type: ignore[untyped-decorator,unused-ignore]
def _exited(pid: int | None = None, **_: object) -> None:
    """Let /metrics drop a pool child's live-only series (multiprocess mode)."""
    from cairn.core.metrics import process_exited

    process_exited(pid or os.getpid())


# `cairn` commands report a bad setting themselves; a bare `celery -A` run fails later with the
# same message when it first needs a setting.
with contextlib.suppress(ConfigError):
    configure_celery(get_settings())
