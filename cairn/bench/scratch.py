"""A runtime of a benchmark's own, so that no bench reads or writes CAIRN_HOME's data."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cairn.core.errors import CairnError
from cairn.core.settings import load_settings
from cairn.runtime import Runtime, build_runtime
from cairn.sessions.events import ChatEvent
from cairn.sessions.ingest import Admission, Ingested, ingest
from cairn.sessions.log import EventLog
from cairn.workers.turn import handle_pending

__all__ = ["handled", "scratch_runtime"]


@contextmanager
def scratch_runtime(name: str, **overrides: Any) -> Iterator[Runtime]:
    """A runtime on SQLite and the embedded vector index in a temporary folder, in-process
    and offline, with agent ``cairn``; ``overrides`` are further settings by variable name."""
    with tempfile.TemporaryDirectory(prefix=f"cairn-bench-{name}-") as tmp:
        settings = load_settings(
            CAIRN_HOME=tmp,
            CAIRN_DATABASE_URL=f"sqlite:///{Path(tmp) / 'bench.db'}",
            CAIRN_QDRANT_URL=None,
            CAIRN_BROKER_URL=None,
            CAIRN_REDIS_URL=None,
            CAIRN_LLM="offline",
            CAIRN_AGENT="cairn",
            CAIRN_UNTRUSTED_USERS=[],
            **overrides,
        )
        rt = build_runtime(settings)
        try:
            yield rt
        finally:
            rt.close()


def handled(rt: Runtime, event: ChatEvent, *, max_chars: int = 4000) -> Ingested:
    """``event`` taken in and handled by the worker's turn or feedback path, as a person's
    message or reaction is; raises CairnError when ingest does not queue it."""
    result = ingest(EventLog(rt.db), event, agent=rt.settings.agent, max_chars=max_chars)
    if result.admission is not Admission.QUEUED or result.session_id is None:
        raise CairnError(f"the bench event {event.event_id} was not taken in: {result.admission}")
    handle_pending(rt, result.session_id)
    return result
