"""The context benchmark: one generated ops thread through the engine and classic mode.

Both modes compile every turn's prompt from the same event log on a real (temporary SQLite)
database, with no model calls: the generated agent's tool calls and replies are appended as the
agent loop would log them. The figures are measured, never asserted here.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from cairn.bench.opsgen import Fact, GeneratedTurn, generate_thread
from cairn.core.settings import ContextSettings
from cairn.core.stats import percentiles
from cairn.db import Database
from cairn.db.models import EventKind, EventStatus
from cairn.llm.types import ToolSpec
from cairn.memory.context.classic import ClassicCompiler
from cairn.memory.context.engine import ContextEngine, TurnContext, tools_tokens
from cairn.sessions.log import EventLog, ThreadRef

__all__ = ["CHECKPOINTS", "ModeFigures", "bench_context", "finish_turn", "run_benchmark"]

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
    config = ContextSettings(budget=budget)
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


@click.command("context")
@click.option("--turns", default=300, show_default=True, type=click.IntRange(50, 5000),
              help="Messages in the generated thread.")  # fmt: skip
@click.option("--budget", default=30000, show_default=True, type=click.IntRange(1000, 1_000_000),
              help="Token budget of each prompt.")  # fmt: skip
@click.option("--seed", default=7, show_default=True, help="Seed of the generated thread.")
@click.option("--json", "as_json", is_flag=True, help='Print {"engine": ..., "classic": ...}.')
def bench_context(turns: int, budget: int, seed: int, as_json: bool) -> None:
    """Drive a generated ops thread through the context engine and classic mode.

    \b
    The thread (a deterministic generator: incidents, pasted logs, diffs, test failures,
    type-checker errors, stack traces, constraints and decisions stated early, look-back
    questions later) is written to a temporary SQLite database and each turn's prompt is
    compiled in both modes, with no model calls. Per mode it prints the prompt tokens at
    turns 50 / 100 / 300, the maximum, whether the budget was ever exceeded, the share of
    constraints and decisions present in every later prompt, the share of look-back questions
    whose fact is in the prompt answering them, and compile time p50 / p95.
    \b
    Examples:
      cairn bench context
      cairn bench context --turns 100 --budget 20000 --json
    """
    from cairn.commands.common import cli_errors
    from cairn.workers.tools import CONTEXT_TOOL_SPECS, TOOL_SPECS
    from cairn.workers.turn import SYSTEM_FRAME

    with cli_errors():
        figures = run_benchmark(
            turns=turns,
            budget=budget,
            system=SYSTEM_FRAME.format(agent="cairn"),
            tools=TOOL_SPECS + CONTEXT_TOOL_SPECS,
            seed=seed,
        )
        result = {name: fig.as_json() for name, fig in figures.items()}
        if as_json:
            click.echo(json.dumps(result))
            return
        click.echo(f"context benchmark: {turns} turns, budget {budget} tokens, seed {seed}")
        rows = [
            ("prompt tokens at turn 50", "tokens_at", "50"),
            ("prompt tokens at turn 100", "tokens_at", "100"),
            ("prompt tokens at turn 300", "tokens_at", "300"),
            ("max prompt tokens", "max_prompt_tokens", None),
            ("budget exceeded", "budget_exceeded", None),
            ("constraints+decisions retained", "constraints_retained", None),
            ("look-back facts present", "lookback_present", None),
            ("compile ms p50", "compile_ms", "p50"),
            ("compile ms p95", "compile_ms", "p95"),
        ]
        click.echo(f"{'':34}{'engine':>14}{'classic':>14}")
        for label, key, sub in rows:
            cells = []
            for mode in ("engine", "classic"):
                value = result[mode][key]
                value = value[sub] if sub else value
                cells.append(f"{value:>14.3f}" if isinstance(value, float) else f"{value!s:>14}")
            click.echo(f"{label:34}{''.join(cells)}")
        engine, classic = result["engine"], result["classic"]
        share = engine["tokens_at"]["300"] / max(1, classic["tokens_at"]["300"])
        prepare = sorted(figures["engine"].prepare_ms)
        click.echo(f"engine tokens at the last checkpoint turn: {share:.1%} of classic's")
        click.echo(
            "engine resume + distil of the new message, ms p50 / p95: "
            f"{statistics.median(prepare):.1f} / {prepare[int(len(prepare) * 0.95) - 1]:.1f}"
        )
