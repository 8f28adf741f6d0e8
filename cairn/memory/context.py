"""The context engine: compiles a session's prompt for one turn within a token budget.

This first engine keeps the current request verbatim, adds recalled long-term memories, and
fills the rest of the budget with the newest earlier turns of the thread (classic transcript
mode, truncated from the oldest end). It reads only the session's durable event log.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlmodel import col, select

from cairn.db import Database
from cairn.db.models import EventKind, EventStatus, SessionEvent
from cairn.memory.store import Recalled
from cairn.tokens import count_tokens
from cairn.workers.llm.base import Message, TextBlock

__all__ = ["CompiledPrompt", "ContextEngine", "speaker_line"]

# Room kept for the model's framing of messages and tool definitions.
_OVERHEAD = 400


@dataclass(frozen=True, slots=True)
class CompiledPrompt:
    """The messages and per-turn context of one model call, with tokens per band."""

    messages: tuple[Message, ...]
    context: str
    tokens: dict[str, int] = field(default_factory=dict)


def speaker_line(user: str, text: str) -> str:
    """How a person's message appears to the model: who said it, then what they said."""
    return f"{user}: {text}" if user else text


class ContextEngine:
    """Compiles prompts from a session's event log."""

    def __init__(self, db: Database, *, budget: int) -> None:
        self.db = db
        self.budget = budget

    def compile(
        self,
        session_id: int,
        current: SessionEvent,
        *,
        system: str,
        recalled: list[Recalled],
    ) -> CompiledPrompt:
        """The prompt for answering ``current``, never over the budget.

        The system frame and the current request always go in (a request over budget is
        refused earlier, at ingest); memories and then earlier turns fill what remains.
        """
        request = speaker_line(current.user, current.text)
        used = {"system": count_tokens(system), "request": count_tokens(request)}
        remaining = self.budget - used["system"] - used["request"] - _OVERHEAD

        memory_lines: list[str] = []
        for found in recalled:
            line = f"- #{found.memory.id} [{found.memory.kind}] {found.memory.text}"
            cost = count_tokens(line)
            if cost > remaining // 2:
                break
            memory_lines.append(line)
            remaining -= cost
        context = ""
        if memory_lines:
            context = "Long-term memories that may be relevant:\n" + "\n".join(memory_lines)
        used["memories"] = count_tokens(context)

        history: list[tuple[str, str]] = []
        spent = 0
        for event in self._earlier(session_id, current.seq):
            role = "assistant" if event.kind == EventKind.REPLY else "user"
            text = event.text if role == "assistant" else speaker_line(event.user, event.text)
            cost = count_tokens(text) + 4
            if spent + cost > remaining:
                break
            history.append((role, text))
            spent += cost
        used["history"] = spent
        history.reverse()
        history.append(("user", request))
        return CompiledPrompt(_alternating(history), context, used)

    def _earlier(self, session_id: int, before_seq: int) -> list[SessionEvent]:
        """Earlier messages and replies, newest first."""
        with self.db.session() as s:
            rows = s.exec(
                select(SessionEvent)
                .where(
                    SessionEvent.session_id == session_id,
                    col(SessionEvent.seq) < before_seq,
                    col(SessionEvent.kind).in_([EventKind.MESSAGE, EventKind.REPLY]),
                    col(SessionEvent.status) != EventStatus.FAILED,
                )
                .order_by(col(SessionEvent.seq).desc())
                .limit(500)
            ).all()
            return list(rows)


def _alternating(turns: list[tuple[str, str]]) -> tuple[Message, ...]:
    """Merge consecutive turns of one role; start with a person's turn, as the API requires."""
    merged: list[tuple[str, list[str]]] = []
    for role, text in turns:
        if merged and merged[-1][0] == role:
            merged[-1][1].append(text)
        else:
            merged.append((role, [text]))
    while merged and merged[0][0] != "user":
        merged.pop(0)
    return tuple(
        Message("user" if role == "user" else "assistant", (TextBlock("\n\n".join(texts)),))
        for role, texts in merged
    )
