"""The context benchmark: one generated ops thread through the engine and classic mode.

Both modes compile every turn's prompt from the same event log on a real (temporary SQLite)
database, with no model calls: the generated agent's tool calls and replies are appended as the
agent loop would log them. The figures are measured, never asserted here.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairn.db import Database
from cairn.db.models import EventKind, EventStatus
from cairn.memory.context.classic import ClassicCompiler
from cairn.memory.context.config import EngineConfig
from cairn.memory.context.engine import ContextEngine, TurnContext, tools_tokens
from cairn.memory.context.opsgen import Fact, GeneratedTurn, generate_thread
from cairn.memory.events import EventLog, ThreadRef
from cairn.stats import percentiles
from cairn.workers.llm.base import ToolSpec

__all__ = ["CHECKPOINTS", "ModeFigures", "finish_turn", "run_benchmark"]

CHECKPOINTS = (50, 100, 300)


@dataclass(slots=True)
class ModeFigures:
    """What one mode did over the thread."""

    budget: int
    tokens: list[int] = field(default_factory=list)
    compile_ms: list[float] = field(default_factory=list)
    prepare_ms: list[float] = field(default_factory=list)
    retained: dict[int, bool] = field(default_factory=dict)  # fact index -> in every later prompt
    lookback: list[bool] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` shape of one mode."""
        at = {str(n): self.tokens[min(n, len(self.tokens)) - 1] for n in CHECKPOINTS}
        ms = sorted(self.compile_ms)
        return {
            "budget": self.budget,
            "max_prompt_tokens": max(self.tokens),
            "budget_exceeded": max(self.tokens) > self.budget,
            "tokens_at": at,
            "constraints_retained": _share(list(self.retained.values())),
            "lookback_present": _share(self.lookback),
            "compile_ms": percentiles(ms),
        }


def finish_turn(log: EventLog, context: TurnContext, turn: GeneratedTurn) -> None:
    """Log the rest of a generated turn as the agent loop would: each state tool call, run for
    real against the turn (so ids come from the session's state), its result, then the reply."""
    session_id, tenant = context.session_id, context.session.tenant_id
    for tool in turn.tools:
        log.append(session_id, tenant, EventKind.TOOL_CALL, text=tool.name,
                   data={"input": tool.input})  # fmt: skip
        item = context.add_item(
            tool.name.removeprefix("add_"), tool.input["text"], tool.input.get("rationale", "")
        )
        log.append(session_id, tenant, EventKind.TOOL_RESULT,
                   text=json.dumps({"status": "added", "item": item.to_json()}),
                   data={"tool": tool.name, "is_error": False})  # fmt: skip
    log.append(session_id, tenant, EventKind.REPLY, text=turn.reply,
               data={"cause": context.current.id})  # fmt: skip


def _share(flags: Sequence[bool]) -> float:
    return round(sum(flags) / len(flags), 4) if flags else 1.0


def run_benchmark(
    *,
    turns: int,
    budget: int,
    system: str,
    tools: Sequence[ToolSpec],
    seed: int = 7,
    folder: Path | None = None,
) -> dict[str, ModeFigures]:
    """Drive a generated thread of ``turns`` messages through both modes; figures per mode."""
    thread, facts = generate_thread(turns, seed)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        db = Database(f"sqlite:///{Path(tmp) / 'bench.db'}")
        db.migrate()
        try:
            return _drive(db, thread, facts, budget, system, tools)
        finally:
            db.dispose()


def _drive(
    db: Database,
    thread: Sequence[GeneratedTurn],
    facts: Sequence[Fact],
    budget: int,
    system: str,
    tools: Sequence[ToolSpec],
) -> dict[str, ModeFigures]:
    log = EventLog(db)
    session = log.open_session(ThreadRef("bench", "bench", "ops", "incident"), "cairn")
    assert session.id is not None
    config = EngineConfig(budget=budget)
    engine = ContextEngine(db, config)
    classic = ClassicCompiler(db, budget=budget, truncate=False)
    extra = tools_tokens(tools)
    figures = {"engine": ModeFigures(budget), "classic": ModeFigures(budget)}
    stated = [(i, f) for i, f in enumerate(facts) if f.kind in {"constraint", "decision"}]
    for turn in thread:
        event = log.append(
            session.id,
            "bench",
            EventKind.MESSAGE,
            text=turn.text,
            user=turn.user,
            status=EventStatus.PENDING,
            data={"addressed": True},
        )
        context = engine.begin(session, event)
        compiled = context.compile(system=system, tools=tools)
        engine_ms = context.compile_ms
        figures["engine"].prepare_ms.append(context.prepare_ms)
        started = time.perf_counter()
        baseline = classic.compile(session.id, event, system=system, tools_tokens=extra)
        classic_ms = (time.perf_counter() - started) * 1000
        for name, prompt, ms in (
            ("engine", compiled, engine_ms),
            ("classic", baseline, classic_ms),
        ):
            fig = figures[name]
            text = prompt.text().casefold()
            fig.tokens.append(prompt.prompt_tokens)
            fig.compile_ms.append(ms)
            for index, fact in stated:
                if fact.turn < turn.number and fig.retained.get(index, True):
                    fig.retained[index] = fact.key.casefold() in text
            if turn.asks_about is not None:
                fig.lookback.append(turn.asks_about.key.casefold() in text)
        finish_turn(log, context, turn)
    return figures
