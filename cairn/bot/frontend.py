"""Running chat frontends side by side: the protocol each platform adapter implements.

An adapter (``cairn.bot.slack.SlackFrontend``, ``cairn.bot.matrix.MatrixFrontend``) is built
with the shared :class:`~cairn.bot.pipeline.Pipeline` and the settings, turns its platform's
events into ChatEvents for ``pipeline.accept``, and posts what the outbox holds for its
platform. ``cairn run`` starts every configured adapter in its own thread.
"""

from __future__ import annotations

import importlib
import logging
import threading
from operator import attrgetter
from typing import Protocol

from cairn.bot.pipeline import Pipeline
from cairn.core.errors import CairnError
from cairn.core.settings import Settings

__all__ = ["Frontend", "configured_frontends", "serve"]

log = logging.getLogger(__name__)


class Frontend(Protocol):
    """A chat platform adapter."""

    name: str

    def run(self, stop: threading.Event) -> None:
        """Receive events and post replies until ``stop`` is set; reconnects on its own."""
        ...

    def healthy(self) -> bool:
        """Whether the platform connection is alive right now."""
        ...


# (settings attribute that enables it, module, class) for each platform adapter.
_ADAPTERS = (
    ("slack.enabled", "cairn.bot.slack", "SlackFrontend"),
    ("matrix.homeserver", "cairn.bot.matrix", "MatrixFrontend"),
)


def configured_frontends(pipeline: Pipeline, settings: Settings) -> list[Frontend]:
    """The adapters the settings configure (empty: use the console)."""
    frontends: list[Frontend] = []
    for attribute, module_name, class_name in _ADAPTERS:
        if not attrgetter(attribute)(settings):
            continue
        module = importlib.import_module(module_name)
        frontends.append(getattr(module, class_name)(pipeline, settings))
    return frontends


def serve(frontends: list[Frontend], stop: threading.Event) -> None:
    """Run each frontend in a thread until ``stop`` is set or one of them dies.

    Raises the CairnError a frontend stopped with (rejected credentials, a second frontend of
    one Matrix account), so that ``cairn run`` says why and exits with an error.
    """
    failures: list[CairnError] = []
    threads = []
    for frontend in frontends:
        thread = threading.Thread(
            target=_guarded,
            args=(frontend, stop, failures),
            name=f"frontend-{frontend.name}",
            daemon=True,
        )
        thread.start()
        threads.append(thread)
    while not stop.wait(0.5):
        if not all(t.is_alive() for t in threads):
            stop.set()
    for thread in threads:
        thread.join(timeout=30)
    if failures:
        raise failures[0]


def _guarded(frontend: Frontend, stop: threading.Event, failures: list[CairnError]) -> None:
    try:
        frontend.run(stop)
    except CairnError as exc:
        log.error("the %s frontend stopped: %s", frontend.name, exc)
        failures.append(exc)
        stop.set()
    except Exception as exc:
        log.exception("the %s frontend stopped with an error", frontend.name)
        failures.append(CairnError(f"the {frontend.name} frontend stopped: {exc}"))
        stop.set()
