"""The context engine on LoCoMo: each conversation replayed as one long thread.

Every turn of a conversation (both speakers are people of the thread, each turn at its
session's date) is appended to a session's event log on a scratch database, as a message the
bot overhears, and stored as an episodic memory as ``cairn bench recall`` stores it. At every
turn each mode's prompt is compiled at each budget and priced through the prompt cache; after
the last turn, each question of categories 1-4 is asked in the thread and the share of its
evidence turns present in the prompt is measured:

- ``engine``: the real context engine with the memories the pipeline recalls for it (its
  ``memory_pool``: the compiler shows the best that fit);
  a turn counts when the form the engine keeps of it (its unit's text, verbatim in the
  recent window, among the selected earlier turns or as a one-line digest that holds it
  whole; a card when it was a paste) is in the prompt, when a state item made from it is, or
  when its memory is among the recalled memories the prompt shows;
- ``classic``: the newest transcript cut to the budget, a turn counting when its line is in it;
- ``recall``: recalled memories alone, as many as fit the budget.

Each question is taken back out of the log once measured, so the next one sees the thread as
it was. Provenance is exact: every event carries its turn's ``dia_id``, every memory its
``dia_id`` as its source message.

What keeps the whole set to minutes: each turn resumes the engine once and compiles that state
at every budget (scores of its units are remembered across the budgets); every text the
replay embeds is embedded up front in batches; classic mode reads the transcript the replay
appended rather than the database at each compile.
"""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import delete
from sqlmodel import col

from cairn.bench.cost import CacheRules, CostLedger, Prices
from cairn.bench.locomo import _scratch_store, _turns, evidence_of, questions_of
from cairn.core.errors import InvalidInput
from cairn.core.settings import ContextSettings, MemorySettings
from cairn.db.models import AgentSession, EventKind, SessionEvent
from cairn.llm.types import ToolSpec
from cairn.memory.context.bands import memories_band
from cairn.memory.context.classic import ClassicCompiler
from cairn.memory.context.compiler import CompiledPrompt, speaker_line
from cairn.memory.context.engine import ContextEngine, TurnContext, tools_tokens
from cairn.memory.context.relevance import cached_tokens
from cairn.memory.embed import CachedEmbedder, Embedder
from cairn.memory.recall import Recalled
from cairn.memory.scope import Scope, Source, Visibility
from cairn.memory.store import MemoryStore
from cairn.sessions.log import EventLog, ThreadRef

__all__ = ["MODES", "LocomoReport", "run_locomo"]

MODES = ("engine", "classic", "recall")
_ASKER = "asker"  # who asks the questions: a third person of the thread
_RECALL_POOL = 200  # memories recall-alone ranks before filling its budget


@dataclass(slots=True)
class LocomoReport:
    """Evidence shares per budget and mode, with per-turn prompt tokens and cost."""

    budgets: tuple[int, ...]
    prices: Prices
    conversations: int = 0
    turns: int = 0
    shares: dict[tuple[int, str], list[float]] = field(default_factory=dict)
    categories: dict[tuple[int, int], list[float]] = field(default_factory=dict)
    tokens: dict[tuple[int, str], list[int]] = field(default_factory=dict)
    costs: dict[tuple[int, str], CostLedger] = field(default_factory=dict)

    def ledger(self, budget: int, mode: str) -> CostLedger:
        """The cost ledger of ``mode`` at ``budget``."""
        return self.costs.setdefault((budget, mode), CostLedger(self.prices))

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` shape."""
        out: dict[str, Any] = {
            "conversations": self.conversations,
            "turns": self.turns,
            "questions": len(self.shares.get((self.budgets[0], "engine"), [])),
            "prices": {"model": self.prices.model, "usd_per_mtok": _price_row(self.prices)},
            "budgets": {},
        }
        for budget in self.budgets:
            row: dict[str, Any] = {
                mode: _mean(self.shares.get((budget, mode), [])) for mode in MODES
            }
            row["engine_by_category"] = {
                str(c): _mean(v) for (b, c), v in sorted(self.categories.items()) if b == budget
            }
            row["prompt_tokens_mean"] = {
                mode: round(statistics.fmean(v), 1) if (v := self.tokens.get((budget, mode))) else 0
                for mode in ("engine", "classic")
            }
            row["cost"] = {
                mode: self.ledger(budget, mode).as_json() for mode in ("engine", "classic")
            }
            out["budgets"][str(budget)] = row
        return out


def _price_row(prices: Prices) -> dict[str, float]:
    return {
        "input": prices.input,
        "output": prices.output,
        "cache_read": prices.cache_read,
        "cache_write": prices.cache_write,
    }


def _mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 4) if values else 0.0


@dataclass(slots=True)
class _Replay:
    """One conversation's thread: its events, memories and what each turn became."""

    log: EventLog
    store: MemoryStore
    scope: Scope
    session: AgentSession
    seq_of: dict[str, int] = field(default_factory=dict)  # dia_id -> event seq
    line_of: dict[str, tuple[str, str]] = field(default_factory=dict)  # dia_id -> (user, text)
    memory_of: dict[int, str] = field(default_factory=dict)  # memory id -> dia_id


class _ReplayedClassic(ClassicCompiler):
    """Classic mode reading the earlier transcript from the replay's own list of the events it
    appended (the same rows the log holds, newest first), not from the database at every
    compile: the compilers of all the budgets share it, and it grows by one event a turn."""

    def __init__(self, db: Any, *, budget: int, earlier: list[SessionEvent]) -> None:
        super().__init__(db, budget=budget)
        self._appended = earlier  # oldest first

    def _earlier(self, session_id: int, before_seq: int) -> list[SessionEvent]:
        older = [e for e in self._appended if e.seq < before_seq]
        older.reverse()
        return older


def run_locomo(
    data: Path,
    budgets: Sequence[int],
    *,
    system: str,
    tools: Sequence[ToolSpec],
    embedder: Embedder | None,
    prices: Prices,
    rules: CacheRules,
    weights: MemorySettings | None = None,
    context: ContextSettings | None = None,
    recall_k: int = 5,
    questions: int | None = None,
    conversations: int | None = None,
    seed: int = 7,
    progress: Callable[[str], None] | None = None,
) -> LocomoReport:
    """Replay every LoCoMo conversation in ``data`` and measure each question at each budget.

    ``context`` is the engine's settings (the defaults when None), its budget replaced by each
    of ``budgets``. ``questions`` samples that many questions per conversation (all by
    default), with ``seed``; ``conversations`` keeps the first files only. Raises InvalidInput
    when ``data`` holds no conversation files.
    """
    files = sorted(p for p in data.glob("*.json") if p.is_file())[:conversations]
    if not files:
        raise InvalidInput(f"no LoCoMo conversation files (*.json) in {data}")
    report = LocomoReport(tuple(sorted(budgets)), prices)
    rng = random.Random(seed)
    for path in files:
        record = json.loads(path.read_text())
        conversation = record.get("conversation", record)
        asked = questions_of(record)
        if questions is not None and questions < len(asked):
            asked = rng.sample(asked, questions)
        warm = _warmed(embedder, conversation, asked)
        with _scratch_store(warm, weights) as store:
            _conversation(
                store, path.stem, conversation, asked, report,
                system=system, tools=tools, recall_k=recall_k, context=context or ContextSettings(),
                rules=rules, progress=progress,
            )  # fmt: skip
        report.conversations += 1
    return report


_EMBED_BATCH = 32


def _warmed(
    embedder: Embedder | None, conversation: dict[str, Any], asked: list[dict[str, Any]]
) -> Embedder | None:
    """``embedder`` behind a cache that already holds every text the replay of
    ``conversation`` embeds (each turn's line and text, each question), embedded in batches of
    similar length: one forward pass per batch instead of one per text."""
    if embedder is None:
        return None
    texts = set()
    for _, line, *_ in _turns(conversation):
        texts |= {line, line.split(": ", 1)[1]}
    texts |= {str(item["question"]) for item in asked}
    ordered = sorted(texts, key=len)
    cached = CachedEmbedder(embedder, size=len(ordered) + 16)
    for start in range(0, len(ordered), _EMBED_BATCH):
        cached.embed(ordered[start : start + _EMBED_BATCH])
    return cached


def _conversation(
    store: MemoryStore,
    name: str,
    conversation: dict[str, Any],
    asked: list[dict[str, Any]],
    report: LocomoReport,
    *,
    system: str,
    tools: Sequence[ToolSpec],
    recall_k: int,
    context: ContextSettings,
    rules: CacheRules,
    progress: Callable[[str], None] | None,
) -> None:
    log = EventLog(store.db)
    session = log.open_session(ThreadRef("locomo", f"locomo:{name}", "locomo", name), "cairn")
    assert session.id is not None
    sid = session.id
    replay = _Replay(log, store, Scope(f"locomo:{name}", "cairn"), session)
    engines = {
        b: ContextEngine(store.db, context.model_copy(update={"budget": b})) for b in report.budgets
    }
    appended: list[SessionEvent] = []
    classics = {b: _ReplayedClassic(store.db, budget=b, earlier=appended)
                for b in report.budgets}  # fmt: skip
    caches = {(b, m): rules.cache() for b in report.budgets for m in ("engine", "classic")}
    extra = tools_tokens(tools)
    pool_k = engines[report.budgets[0]].recall_size(recall_k)  # as the pipeline recalls
    turns = list(_turns(conversation))
    last = datetime.min.replace(tzinfo=UTC)
    for number, (dia_id, line, when, session_name, _speaker) in enumerate(turns, 1):
        user, text = line.split(": ", 1)
        event = log.append(
            sid, session.tenant_id, EventKind.MESSAGE, text=text, user=user,
            data={"addressed": False, "dia_id": dia_id},
        )  # fmt: skip
        appended.append(event)
        replay.seq_of[dia_id] = event.seq
        replay.line_of[dia_id] = (user, text)
        # The bot answering this turn, as the pipeline would prompt it: recall, then compile.
        recalled = store.recall(text, replay.scope, pool_k, now=when, touch=False)
        turn = engines[report.budgets[0]].begin(session, event, deferred=True)
        for budget in report.budgets:
            for mode, prompt in (
                ("engine", _engine_prompt(turn, engines[budget], system, tools, recalled)),
                ("classic", classics[budget].compile(sid, event, system=system,
                                                     tools_tokens=extra)),
            ):  # fmt: skip
                blocks = rules.blocks(prompt.system, prompt.context, prompt.messages, tools)
                usage = caches[(budget, mode)].send(blocks, when.timestamp())
                report.ledger(budget, mode).add(usage)
                report.tokens.setdefault((budget, mode), []).append(usage.input_tokens)
        with store.db.session() as s:
            turn.save_in(s)
        written = store.remember(
            line, replay.scope, kind="episode", visibility=Visibility.TEAM,
            source=Source(platform="locomo", thread=f"{name}/{session_name}", message=dia_id),
            created_at=when, flush=False,
        )  # fmt: skip
        for memory in written.parts or (written.memory,):  # a long turn is kept in parts
            replay.memory_of[memory.id] = dia_id
        store.flush_outbox()
        last = max(last, when)
        if progress and number % 100 == 0:
            progress(f"{name}: turn {number}/{len(turns)}")
    report.turns += len(turns)
    store.optimize_index()
    asked_at = last + timedelta(days=1)
    for n, item in enumerate(asked, 1):
        _question(replay, item, asked_at, report, engines, classics, system, tools, pool_k)
        if progress and n % 50 == 0:
            progress(f"{name}: question {n}/{len(asked)}")
    if progress:
        progress(f"{name}: {len(turns)} turns, {len(asked)} questions")


def _engine_prompt(
    turn: TurnContext,
    engine: ContextEngine,
    system: str,
    tools: Sequence[ToolSpec],
    recalled: Sequence[Recalled],
) -> CompiledPrompt:
    """The turn's prompt at ``engine``'s budget: the same resumed state, compiled by the
    engine of that budget (the engines differ in their settings only)."""
    turn.engine = engine
    return turn.compile(system=system, tools=tools, recalled=recalled)


def _question(
    replay: _Replay,
    item: dict[str, Any],
    asked_at: datetime,
    report: LocomoReport,
    engines: dict[int, ContextEngine],
    classics: dict[int, _ReplayedClassic],
    system: str,
    tools: Sequence[ToolSpec],
    pool_k: int,
) -> None:
    question = str(item["question"])
    evidence = evidence_of(item)
    session = replay.session
    sid = session.id or 0
    event = replay.log.append(
        sid, session.tenant_id, EventKind.MESSAGE, text=question, user=_ASKER,
        data={"addressed": True},
    )  # fmt: skip
    try:
        recalled = replay.store.recall(question, replay.scope, pool_k, now=asked_at, touch=False)
        pool = replay.store.recall(question, replay.scope, _RECALL_POOL, now=asked_at, touch=False)
        turn = engines[report.budgets[0]].begin(session, event, deferred=True)
        extra = tools_tokens(tools)
        frame = cached_tokens(system) + extra + cached_tokens(speaker_line(_ASKER, question))
        for budget in report.budgets:
            engine = _engine_prompt(turn, engines[budget], system, tools, recalled)
            classic = classics[budget].compile(sid, event, system=system, tools_tokens=extra)
            _, shown = memories_band(pool, budget - frame - 50)
            present = {
                "engine": _in_engine(replay, turn, engine, evidence),
                "classic": _in_transcript(replay, classic.text(), evidence),
                "recall": {replay.memory_of[m] for m in shown if m in replay.memory_of},
            }
            for mode, found in present.items():
                share = len(evidence & found) / len(evidence)
                report.shares.setdefault((budget, mode), []).append(share)
                if mode == "engine":
                    category = int(item["category"])
                    report.categories.setdefault((budget, category), []).append(share)
    finally:
        # Taken back out, so that the next question sees the thread as it was.
        with replay.store.db.session() as s:
            s.connection().execute(delete(SessionEvent).where(col(SessionEvent.id) == event.id))


def _in_transcript(replay: _Replay, text: str, wanted: set[str]) -> set[str]:
    """The turns of ``wanted`` whose line ("Speaker: text") is in ``text``."""
    lines = {dia: replay.line_of[dia] for dia in wanted if dia in replay.line_of}
    return {dia for dia, (user, said) in lines.items() if speaker_line(user, said) in text}


def _in_engine(
    replay: _Replay, turn: TurnContext, prompt: CompiledPrompt, wanted: set[str]
) -> set[str]:
    """The turns of ``wanted`` the engine's prompt carries, in whatever form it keeps them."""
    text = prompt.text()
    by_seq = {unit.seq: unit for unit in turn.state.units}
    seqs = {dia: replay.seq_of[dia] for dia in wanted if dia in replay.seq_of}
    by_turn = {unit.turn: dia for dia, seq in seqs.items() if (unit := by_seq.get(seq))}
    found = {replay.memory_of[m] for m in prompt.memory_ids if m in replay.memory_of}
    for dia, seq in seqs.items():
        unit = by_seq.get(seq)
        if unit is None:
            continue
        # The forms a unit takes: a transcript line, a selected earlier turn, a digest.
        forms = (speaker_line(unit.user, unit.text), f"· {unit.user}] {unit.text}")
        if any(form in text for form in forms):
            found.add(dia)
    for state_item in turn.state.items.values():
        origin = by_turn.get(state_item.created_turn)
        if origin is not None and state_item.source == "message" and state_item.text in text:
            found.add(origin)
    return found
