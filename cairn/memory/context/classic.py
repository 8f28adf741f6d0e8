"""Classic mode: the plain verbatim transcript, kept as the baseline the engine is measured by.

With ``truncate`` (the live setting, CAIRN_CONTEXT_MODE=classic) it is Cairn's first
behaviour: the request, recalled memories, and the newest earlier turns that fit the budget.
Without it (the benchmark's baseline) it is the full transcript, however long.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import col, select

from cairn.core.tokens import image_tokens
from cairn.db import Database
from cairn.db.models import EventKind, EventStatus, SessionEvent
from cairn.llm.types import ImageBlock
from cairn.memory.context.bands import render_memories
from cairn.memory.context.compiler import CompiledPrompt, alternating, speaker_line, with_images
from cairn.memory.context.relevance import cached_tokens
from cairn.memory.recall import Recalled

__all__ = ["ClassicCompiler"]

# Room kept for the model's framing of messages and tool definitions.
_OVERHEAD = 400


class ClassicCompiler:
    """Compiles the verbatim transcript of a session from its event log."""

    def __init__(self, db: Database, *, budget: int, truncate: bool = True) -> None:
        self.db = db
        self.budget = budget
        self.truncate = truncate

    def compile(
        self,
        session_id: int,
        current: SessionEvent,
        *,
        system: str,
        tools_tokens: int = 0,
        recalled: Sequence[Recalled] = (),
        images: Sequence[ImageBlock] = (),
    ) -> CompiledPrompt:
        """The transcript prompt answering ``current``, with the ``images`` attached to it in
        its turn.

        Truncating, it stays within the budget when the request fits (a request over budget is
        refused earlier, at ingest); otherwise every earlier turn is included.
        """
        request = speaker_line(current.user, current.text)
        asked = cached_tokens(request) + sum(image_tokens(i.width, i.height) for i in images)
        used = {"frame": cached_tokens(system) + tools_tokens, "request": asked}
        remaining = self.budget - used["frame"] - used["request"] - _OVERHEAD
        context = render_memories(recalled)
        if self.truncate and cached_tokens(context) > remaining // 2:
            context = ""
        used["memories"] = cached_tokens(context)
        remaining -= used["memories"]
        history: list[tuple[str, str]] = []
        spent = 0
        for event in self._earlier(session_id, current.seq):
            role = "assistant" if event.kind == EventKind.REPLY else "user"
            text = event.text if role == "assistant" else speaker_line(event.user, event.text)
            cost = cached_tokens(text) + 4
            if self.truncate and spent + cost > remaining:
                break
            history.append((role, text))
            spent += cost
        history.reverse()
        history.append(("user", request))
        messages = with_images(alternating(history), images)
        used["recent"] = spent
        used["total"] = used["frame"] + used["memories"] + spent + used["request"] + 4
        shown = tuple(r.memory.id for r in recalled) if context else ()
        return CompiledPrompt(messages, context, used, system=system, memory_ids=shown)

    def _earlier(self, session_id: int, before_seq: int) -> list[SessionEvent]:
        """Earlier messages and replies, newest first."""
        with self.db.session() as s:
            query = (
                select(SessionEvent)
                .where(
                    SessionEvent.session_id == session_id,
                    col(SessionEvent.seq) < before_seq,
                    col(SessionEvent.kind).in_([EventKind.MESSAGE, EventKind.REPLY]),
                    col(SessionEvent.status) != EventStatus.FAILED,
                )
                .order_by(col(SessionEvent.seq).desc())
            )
            if self.truncate:
                query = query.limit(500)
            return list(s.exec(query).all())
