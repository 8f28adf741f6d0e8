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

from cairn.bench.cost import (
    CacheRules,
    CacheUsage,
    CostLedger,
    Prices,
    cache_rules,
)
from cairn.bench.opsgen import Fact, GeneratedTurn, generate_thread
from cairn.bench.plots import plot_locomo, plot_thread, require_plotting
from cairn.commands.common import IntList
from cairn.core.settings import ContextSettings, LlmSettings, Settings
from cairn.core.stats import percentiles
from cairn.core.tokens import count_tokens
from cairn.db import Database
from cairn.db.models import EventKind, EventStatus
from cairn.llm.types import ToolSpec
from cairn.memory.context.classic import ClassicCompiler
from cairn.memory.context.engine import ContextEngine, TurnContext, tools_tokens
from cairn.sessions.log import EventLog, ThreadRef

__all__ = [
    "CHECKPOINTS",
    "TURN_SECONDS",
    "ModeFigures",
    "bench_context",
    "default_prices",
    "finish_turn",
    "run_benchmark",
]

CHECKPOINTS = (50, 100, 300)
TURN_SECONDS = 60.0
"""The generated thread's pace for the cache: one turn a minute."""


def default_prices() -> Prices:
    """The prices of the default model (CAIRN_MODEL's default) in the default ``llm_prices``."""
    model = LlmSettings.model_fields["model"].default
    return Prices.of(model, Settings.model_fields["llm_prices"].default)


@dataclass(slots=True)
class ModeFigures:
    """What one mode did over the thread."""

    budget: int
    tokens: list[int] = field(default_factory=list)
    compile_ms: list[float] = field(default_factory=list)
    prepare_ms: list[float] = field(default_factory=list)
    retained: dict[int, bool] = field(default_factory=dict)  # fact index -> in every later prompt
    lookback: list[bool] = field(default_factory=list)
    usage: list[CacheUsage] = field(default_factory=list)

    def cost(self, prices: Prices) -> CostLedger:
        """The per-turn usage priced at ``prices``."""
        ledger = CostLedger(prices)
        ledger.extend(self.usage)
        return ledger

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
    rules: CacheRules | None = None,
) -> dict[str, ModeFigures]:
    """Drive a generated thread of ``turns`` messages through both modes; figures per mode.

    Each mode's prompts also go through its own replay of the provider's prompt cache
    (``rules``; Anthropic's for the default model when None), one turn a minute, each reply's
    tokens as the output.
    """
    thread, facts = generate_thread(turns, seed)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        db = Database(f"sqlite:///{Path(tmp) / 'bench.db'}")
        db.migrate()
        try:
            rules = rules or cache_rules("anthropic", default_prices().model)
            return _drive(db, thread, facts, budget, system, tools, rules)
        finally:
            db.dispose()


def _drive(
    db: Database,
    thread: Sequence[GeneratedTurn],
    facts: Sequence[Fact],
    budget: int,
    system: str,
    tools: Sequence[ToolSpec],
    rules: CacheRules,
) -> dict[str, ModeFigures]:
    log = EventLog(db)
    session = log.open_session(ThreadRef("bench", "bench", "ops", "incident"), "cairn")
    assert session.id is not None
    config = ContextSettings(budget=budget)
    engine = ContextEngine(db, config)
    classic = ClassicCompiler(db, budget=budget, truncate=False)
    extra = tools_tokens(tools)
    figures = {"engine": ModeFigures(budget), "classic": ModeFigures(budget)}
    caches = {name: rules.cache() for name in figures}
    stated = [(i, f) for i, f in enumerate(facts) if f.kind in {"constraint", "decision"}]
    for number, turn in enumerate(thread):
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
            blocks = rules.blocks(prompt.system, prompt.context, prompt.messages, tools)
            fig.usage.append(
                caches[name].send(blocks, number * TURN_SECONDS, count_tokens(turn.reply))
            )
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
@click.option("--budget", "budgets", default=None, type=IntList("a token budget", 1000, 1_000_000),
              help="Token budget of each prompt; comma-separated with --locomo "
                   "[default: 30000, or 4000,8000,16000 with --locomo].")  # fmt: skip
@click.option("--seed", default=7, show_default=True, type=click.IntRange(0, 2**32 - 1),
              help="Seed of the generated thread.")  # fmt: skip
@click.option("--locomo", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None,
              help="Replay the LoCoMo conversations in this folder instead.")  # fmt: skip
@click.option("--questions", type=click.IntRange(1, 10_000), default=None,
              help="With --locomo: sample N questions per conversation (default all).")  # fmt: skip
@click.option("--conversations", type=click.IntRange(1, 1000), default=None,
              help="With --locomo: replay only the first N conversation files.")  # fmt: skip
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also draw the figures into this PNG (needs the plot extra).")  # fmt: skip
@click.option("--provider", type=click.Choice(["anthropic", "openai"]), default=None,
              help="Whose prompt cache to price: Anthropic's breakpoints, or OpenAI's "
                   "automatic prefix cache [default: openai with CAIRN_LLM=openai, else "
                   "anthropic].")  # fmt: skip
@click.option("--model", default=None,
              help="The model whose prices (llm_prices) apply [default: CAIRN_MODEL].")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help='Print {"engine": ..., "classic": ...}.')
def bench_context(
    turns: int,
    budgets: tuple[int, ...] | None,
    seed: int,
    locomo: Path | None,
    questions: int | None,
    conversations: int | None,
    plot: Path | None,
    provider: str | None,
    model: str | None,
    as_json: bool,
) -> None:
    """Drive a generated ops thread (or LoCoMo conversations) through the context engine and
    classic mode, and price every turn's prompt as its provider bills it, prompt caching included.

    \b
    The thread (a deterministic generator: incidents, pasted logs, diffs, test failures,
    type-checker errors, stack traces, constraints and decisions stated early, look-back
    questions later) is written to a temporary SQLite database and each turn's prompt is
    compiled in both modes, with no model calls. Per mode it prints the prompt tokens at
    turns 50 / 100 / 300, the maximum, whether the budget was ever exceeded, the share of
    constraints and decisions present in every later prompt, the share of look-back questions
    whose fact is in the prompt answering them, compile time p50 / p95, and the cost: each
    turn's request (tools, system, messages, with the Anthropic adapter's cache breakpoints)
    through a simulation of prompt caching (minimum cacheable length of the default model,
    5-minute lifetime refreshed on each read, one turn a minute), at the default model's prices
    in llm_prices. With --provider openai, the request is the OpenAI-compatible adapter's, and
    the cache OpenAI's own: any prefix of 1,024 tokens or more seen in the last five minutes is
    read, in steps of 128 tokens, and writing it costs nothing.
    \b
    With --locomo DIR each conversation is replayed as one thread (both speakers, at their
    session dates, each turn also stored as an episodic memory); every question of categories
    1-4 is then asked at each budget and the share of its evidence turns in the prompt is
    printed for the engine, classic (the newest transcript cut to the budget) and recalled
    memories alone. The replay sends no tool definitions (they would take 2,300 tokens of a
    4,000-token budget).
    \b
    Examples:
      cairn bench context
      cairn bench context --turns 100 --budget 20000 --json --plot context.png
      cairn bench context --locomo ../shared/data/locomo --budget 4000,8000,16000 --json
    """
    from cairn.commands.common import cli_errors, load_settings
    from cairn.core.errors import InvalidInput
    from cairn.workers.tools import CONTEXT_TOOL_SPECS, TOOL_SPECS
    from cairn.workers.turn import SYSTEM_FRAME

    with cli_errors():
        settings = load_settings()
        if plot is not None:
            require_plotting()
        provider = provider or ("openai" if settings.llm.provider == "openai" else "anthropic")
        model = model or settings.llm.model
        try:
            prices = Prices.of(model, settings.llm_prices)
        except KeyError as exc:
            raise InvalidInput(f"{exc.args[0]}; name one with --model") from None
        rules = cache_rules(provider, model)
        system = SYSTEM_FRAME.format(agent="cairn")
        if locomo is not None:
            _locomo_command(
                locomo, budgets or (4000, 8000, 16000), system, prices, rules,
                questions, conversations, plot, as_json,
            )  # fmt: skip
            return
        budgets = budgets or (30000,)
        if len(budgets) > 1:
            raise InvalidInput("the generated thread takes one --budget (several with --locomo)")
        budget = budgets[0]
        figures = run_benchmark(
            turns=turns,
            budget=budget,
            system=system,
            tools=TOOL_SPECS + CONTEXT_TOOL_SPECS,
            seed=seed,
            rules=rules,
        )
        ledgers = {name: fig.cost(prices) for name, fig in figures.items()}
        result: dict[str, Any] = {name: fig.as_json() for name, fig in figures.items()}
        for name, ledger in ledgers.items():
            result[name]["cost"] = ledger.as_json(at=CHECKPOINTS)
        if plot is not None:
            plot_thread(
                plot,
                {name: fig.tokens for name, fig in figures.items()},
                {name: ledger.usd for name, ledger in ledgers.items()},
                budget,
            )
        if as_json:
            click.echo(json.dumps(result))
            return
        _print_thread(result, figures, ledgers, turns, budget, seed, prices, rules)


def _print_thread(
    result: dict[str, Any],
    figures: dict[str, ModeFigures],
    ledgers: dict[str, CostLedger],
    turns: int,
    budget: int,
    seed: int,
    prices: Prices,
    rules: CacheRules,
) -> None:
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
    last = min(turns, CHECKPOINTS[-1])
    cost_rows: list[tuple[str, Any]] = [
        (f"turn {last}: cache read tokens", lambda j: j["at"][str(last)]["cache_read"]),
        (f"turn {last}: cache write tokens", lambda j: j["at"][str(last)]["cache_write"]),
        (f"turn {last}: uncached tokens", lambda j: j["at"][str(last)]["uncached"]),
        (f"turn {last}: USD", lambda j: f"{j['at'][str(last)]['usd']:.4f}"),
        ("USD per 100 turns", lambda j: f"{j['usd_per_100_turns']:.3f}"),
    ]
    for label, cell in cost_rows:
        shown = "".join(f"{cell(result[mode]['cost'])!s:>14}" for mode in ("engine", "classic"))
        click.echo(f"{label:34}{shown}")
    engine, classic = result["engine"], result["classic"]
    share = engine["tokens_at"]["300"] / max(1, classic["tokens_at"]["300"])
    prepare = sorted(figures["engine"].prepare_ms)
    click.echo(f"engine tokens at the last checkpoint turn: {share:.1%} of classic's")
    usd = ledgers["engine"].usd[last - 1] / max(1e-12, ledgers["classic"].usd[last - 1])
    click.echo(
        f"engine cost at turn {last}: {usd:.1%} of classic's (prompt caching counted for both; "
        f"{prices.model} at ${prices.input:g} / ${prices.output:g} / ${prices.cache_read:g} / "
        f"${prices.cache_write:g} per MTok input / output / cache read / cache write; "
        f"{rules.provider}'s cache, from {rules.minimum} tokens)"
    )
    click.echo(
        "engine resume + distil of the new message, ms p50 / p95: "
        f"{statistics.median(prepare):.1f} / {prepare[int(len(prepare) * 0.95) - 1]:.1f}"
    )


def _locomo_command(
    folder: Path,
    budgets: tuple[int, ...],
    system: str,
    prices: Prices,
    rules: CacheRules,
    questions: int | None,
    conversations: int | None,
    plot: Path | None,
    as_json: bool,
) -> None:
    from cairn.bench.context_locomo import MODES, run_locomo
    from cairn.commands.common import load_settings
    from cairn.memory.embed import build_embedder

    settings = load_settings()
    embedder = build_embedder(settings.memory.embeddings, settings.memory.embedding_engine)
    report = run_locomo(
        folder,
        budgets,
        system=system,
        tools=(),
        embedder=embedder,
        prices=prices,
        rules=rules,
        weights=settings.memory,
        context=settings.context,
        recall_k=settings.memory.recall_k,
        questions=questions,
        conversations=conversations,
        progress=lambda line: click.echo(line, err=True),
    )
    result = report.as_json()
    if plot is not None:
        plot_locomo(plot, result)
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(
        f"LoCoMo replay: {result['conversations']} conversations, {result['turns']} turns, "
        f"{result['questions']} questions; embeddings: {embedder.name if embedder else 'none'}"
    )
    click.echo("evidence turns present in the prompt (share):")
    click.echo(f"{'budget':>8}" + "".join(f"{m:>10}" for m in MODES))
    for budget, row in result["budgets"].items():
        click.echo(f"{budget:>8}" + "".join(f"{row[m]:>10.3f}" for m in MODES))
    click.echo(f"cost per 100 turns, USD ({prices.model}, prompt caching counted):")
    click.echo(f"{'budget':>8}{'engine':>10}{'classic':>10}{'tokens':>16}")
    for budget, row in result["budgets"].items():
        cost = row["cost"]
        mean = row["prompt_tokens_mean"]
        click.echo(
            f"{budget:>8}{cost['engine']['usd_per_100_turns']:>10.3f}"
            f"{cost['classic']['usd_per_100_turns']:>10.3f}"
            f"{mean['engine']:>8.0f}/{mean['classic']:<7.0f}"
        )
