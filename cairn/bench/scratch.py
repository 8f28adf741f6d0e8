"""A runtime of a benchmark's own, so that no bench reads or writes CAIRN_HOME's data."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from cairn.core.errors import CairnError
from cairn.core.settings import load_settings
from cairn.runtime import Runtime, build_runtime
from cairn.sessions.events import ChatEvent
from cairn.sessions.ingest import Admission, Ingested, ingest
from cairn.sessions.log import EventLog
from cairn.workers.turn import handle_pending

__all__ = ["PEOPLE", "PUBLIC_CHANNEL", "TENANT", "handled", "said_in_public", "scratch_runtime"]

TENANT = "bench"
PUBLIC_CHANNEL = "C-bench-public"
# Who speaks in turn in the benches' public channel.
PEOPLE = ("ann", "bob", "cat", "dan", "eve")


@contextmanager
def scratch_runtime(name: str, *, home: Path | None = None, **overrides: Any) -> Iterator[Runtime]:
    """A runtime on SQLite and the embedded vector index in a temporary folder, in-process
    and offline, with agent ``cairn``; ``overrides`` are further settings by variable name.

    With ``home``, the data goes to that folder instead, and stays there once the runtime is
    closed (the caller removes it), so that what it left on disk can be read.
    """
    with ExitStack() as stack:
        if home is None:
            home = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix=f"cairn-bench-{name}-"))
            )
        settings = load_settings(
            CAIRN_HOME=str(home),
            CAIRN_DATABASE_URL=f"sqlite:///{home / 'bench.db'}",
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


def said_in_public(
    rt: Runtime, thread: str, user: str, text: str, *, event_id: str | None = None
) -> Ingested:
    """``text`` said by ``user`` in ``thread`` of a public channel of tenant ``bench`` (the
    worst case: what is remembered there is team memory), handled as :func:`handled` does,
    within the runtime's CAIRN_MAX_MESSAGE_CHARS.

    Raises InvalidInput when ingest refuses the message (nothing is written), CairnError when
    it is not queued (a repeated ``event_id``, by default ``e-<thread>``).
    """
    event = ChatEvent(
        "bench",
        TENANT,
        PUBLIC_CHANNEL,
        thread,
        user,
        text=text,
        event_id=event_id or f"e-{thread}",
        private=False,
    )
    return handled(rt, event, max_chars=rt.settings.max_message_chars)
