"""``cairn bench updates``: facts that change, and whether recall answers with the current one.

A generated ops history: on-calls, owners, versions, database hosts, freeze dates and policies
of many services, each changing one to three times at distinct days, with facts about other
things mixed in. Every statement is written in time order through the real
:meth:`~cairn.memory.store.MemoryStore.remember` into a scratch store (SQLite and the embedded
vector index in a temporary folder), then recall is asked about the current value of each
thing, and about its value on a past date. Facts and questions are phrased in several ways,
never the same template for both, so the figures are not a lexical echo.

The same history is also run with supersession off (``CAIRN_MEMORY_SUPERSEDE=false``, what Cairn
did before), so that the gain is visible.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import click

from cairn.core.settings import MemorySettings
from cairn.db import Database
from cairn.memory.embed import Embedder, build_embedder
from cairn.memory.index import embedded_index
from cairn.memory.scope import Scope, Visibility
from cairn.memory.store import MemoryStore

__all__ = ["Figures", "History", "generate", "run_updates", "updates_command"]

K = 5  # memories recalled per question
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

_SERVICES = (  # noqa: SIM905 - a word list reads best as one string
    "payments billing checkout search ledger invoices notifications auth gateway reporting "
    "inventory shipping pricing catalog refunds onboarding identity messaging scheduler "
    "analytics recommendations fraud payouts subscriptions wallet loyalty tax exports "
    "imports webhooks ingest warehouse mailer sms media thumbnails geocoding quotes "
    "contracts audit settlements"
).split()
_PEOPLE = (  # noqa: SIM905
    "Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Mallory Niaj Olivia Peggy Rupert "
    "Sybil Trent Victor Walter Yusuf Zoe Amara Bruno Chen Dmitri Elena Farid Greta Hugo Ines "
    "Jonas Keiko Lars Maya Nadia Omar Priya Quinn Rosa Stefan Tariq Uma Vera Wen Xavier Yara"
).split()
_TEAMS = (
    "the platform team",
    "the data team",
    "the core team",
    "the growth team",
    "the infra team",
    "the SRE team",
    "the mobile team",
    "the risk team",
)
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
_MONTHS = ("March", "April", "May", "June", "July", "September", "October", "November")
_APPROVALS = ("one approval", "two approvals", "three approvals", "four approvals")
_RETENTION = ("7 days", "14 days", "30 days", "60 days", "90 days", "180 days", "1 year")

# Per kind of thing: how a first value is stated, how a change is stated, how the current
# value is asked for, and how a past one is (``{when}`` is a date with its year).
_KINDS: dict[str, dict[str, tuple[str, ...]]] = {
    "on-call": {
        "first": (
            "The on-call for {s} is {v}",
            "{v} is the {s} on-call",
            "{s} on-call: {v}",
        ),
        "change": (
            "{v} is now the on-call for {s}",
            "The {s} on-call was changed to {v}",
            "Update: the on-call for {s} is {v} from now on",
            "{v} took over the {s} on-call",
        ),
        "ask": (
            "who is on call for {s}?",
            "who's covering the {s} on-call right now?",
            "who's the current {s} on-call person?",
        ),
        "ask_then": (
            "who was the {s} on-call on {when}?",
            "on {when}, who was on call for {s}?",
        ),
    },
    "owner": {
        "first": (
            "{v} owns {s}",
            "The {s} service is owned by {v}",
            "The owner of {s} is {v}",
        ),
        "change": (
            "{s} is now owned by {v}",
            "{v} took over {s}",
            "Ownership of {s} moved to {v}",
        ),
        "ask": (
            "who owns {s}?",
            "which team is responsible for the {s} service?",
            "who is the owner of {s} these days?",
        ),
        "ask_then": (
            "who owned {s} on {when}?",
            "on {when}, which team was the owner of {s}?",
        ),
    },
    "version": {
        "first": (
            "{s} runs v{v}",
            "The {s} service is on version {v}",
            "{s} version: {v}",
        ),
        "change": (
            "{s} was bumped to v{v}",
            "{s} is now running v{v}",
            "We upgraded {s} to {v}",
        ),
        "ask": (
            "what version is {s} running?",
            "which release of {s} is deployed in production?",
            "what's the current {s} version?",
        ),
        "ask_then": (
            "what version was {s} on {when}?",
            "which {s} release was running on {when}?",
        ),
    },
    "host": {
        "first": (
            "The {s} database runs on {v}",
            "The {s} DB host is {v}",
            "{s} database host: {v}",
        ),
        "change": (
            "The {s} database moved to {v}",
            "We migrated the {s} database to {v}",
            "The {s} DB now lives on {v}",
        ),
        "ask": (
            "where does the {s} database live?",
            "what host is the {s} DB on?",
            "which server runs the {s} database now?",
        ),
        "ask_then": (
            "which host was the {s} database on on {when}?",
            "where did the {s} DB live on {when}?",
        ),
    },
    "freeze": {
        "first": (
            "The {s} code freeze starts on {v}",
            "The {s} freeze begins {v}",
            "{s} freeze date: {v}",
        ),
        "change": (
            "The {s} freeze moved to {v}",
            "The {s} freeze now starts on {v}",
            "The {s} freeze was pushed to {v}",
        ),
        "ask": (
            "when does the {s} freeze start?",
            "what day is the {s} code freeze?",
            "when is the {s} freeze planned?",
        ),
        "ask_then": (
            "when was the {s} freeze planned to start, as of {when}?",
            "on {when}, what day was the {s} code freeze?",
        ),
    },
    "approvals": {
        "first": (
            "Production deploys of {s} require {v}",
            "{s} prod deploys need {v}",
        ),
        "change": (
            "Production deploys of {s} now require {v}",
            "{s} production deploys need {v} from now on",
        ),
        "ask": (
            "how many approvals does a {s} production deploy need?",
            "what does it take to deploy {s} to prod?",
        ),
        "ask_then": ("how many approvals did a {s} prod deploy need on {when}?",),
    },
    "retention": {
        "first": (
            "The {s} log retention is {v}",
            "{s} log retention policy: {v}",
        ),
        "change": (
            "The {s} log retention was changed to {v}",
            "The {s} log retention policy is now {v}",
        ),
        "ask": (
            "how long is the {s} log retention these days?",
            "what's the log retention for {s}?",
        ),
        "ask_then": ("what was the {s} log retention on {when}?",),
    },
}
# Facts about other things, which never change: they compete for the same questions.
_DISTRACTORS = (
    "The {s} runbook lives in the ops wiki",
    "{p} is on vacation next week",
    "The {s} on-call is reachable on the pager",
    "{p} prefers to be paged by phone",
    "The {s} dashboard is slow in the mornings",
    "Alerts for {s} go to the {s}-alerts channel",
    "{p} is the {s} expert for card disputes questions",
    "The {s} database is backed up nightly",
)


@dataclass(frozen=True, slots=True)
class Statement:
    """One memory to write: its text, when, and (for a changing fact) which thing and value."""

    text: str
    when: datetime
    thing: int | None = None  # index into History.things
    value: int = 0  # index into the thing's values


@dataclass(frozen=True, slots=True)
class Thing:
    """A thing whose value changes: its kind, service, values and when each was stated."""

    kind: str
    service: str
    values: tuple[str, ...]
    times: tuple[datetime, ...]


@dataclass(frozen=True, slots=True)
class Question:
    """A question about ``thing``: its current value (``at`` None) or its value at ``at``."""

    text: str
    thing: int
    at: datetime | None


@dataclass
class History:
    """A generated history: the statements in time order, the things and the questions."""

    statements: list[Statement] = field(default_factory=list)
    things: list[Thing] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def _values(kind: str, service: str, n: int, rng: random.Random) -> tuple[str, ...]:
    if kind == "on-call":
        return tuple(rng.sample(_PEOPLE, n))
    if kind == "owner":
        return tuple(rng.sample(list(_TEAMS) + _PEOPLE, n))
    if kind == "version":
        major, minor = rng.randint(1, 9), rng.randint(0, 5)
        found = []
        for _ in range(n):
            found.append(f"{major}.{minor}")
            minor += rng.randint(1, 3)
        return tuple(found)
    if kind == "host":
        shapes = ("pg-{n}", "db-{n}.internal", "pg{n}-eu", "{s}-db-{n}")
        numbers = rng.sample(range(1, 99), n)
        return tuple(rng.choice(shapes).format(n=k, s=service) for k in numbers)
    if kind == "freeze":
        days = rng.sample(range(1, 29), n)
        return tuple(f"{rng.choice(_WEEKDAYS)} {d} {rng.choice(_MONTHS)}" for d in days)
    if kind == "approvals":
        return tuple(rng.sample(_APPROVALS, n))
    return tuple(rng.sample(_RETENTION, n))


def _date(when: datetime, rng: random.Random) -> str:
    """``when`` as people write a date, year included (a date without one is ambiguous)."""
    shape = rng.choice(("{d} {m} {y}", "{m} {d}, {y}", "{iso}"))
    return shape.format(d=when.day, m=when.strftime("%B"), y=when.year, iso=when.date())


def generate(facts: int = 300, seed: int = 20) -> History:
    """A history of at least ``facts`` statements of changing facts, each thing changing one
    to three times on distinct days, with distractors (a fifth as many) mixed in; and one
    question about the current value of each thing and one about a past value."""
    rng = random.Random(seed)
    history = History()
    pairs = [(kind, service) for service in _SERVICES for kind in _KINDS]
    rng.shuffle(pairs)
    horizon = 300  # days over which the history spreads
    written = 0
    for kind, service in pairs:
        if written >= facts:
            break
        n = rng.randint(2, 4)  # a first value and one to three changes
        days = sorted(rng.sample(range(horizon), n))
        if any(b - a < 6 for a, b in pairwise(days)):
            days = [d * 2 // 3 + 6 * i for i, d in enumerate(days)]  # a few days apart at least
        times = tuple(START + timedelta(days=d, minutes=rng.randint(0, 600)) for d in days)
        values = _values(kind, service, n, rng)
        thing = len(history.things)
        history.things.append(Thing(kind, service, values, times))
        shapes = _KINDS[kind]
        for i, (value, when) in enumerate(zip(values, times, strict=True)):
            template = rng.choice(shapes["first"] if i == 0 else shapes["change"])
            text = template.format(s=service, v=value)
            history.statements.append(Statement(text[0].upper() + text[1:], when, thing, i))
            written += 1
        history.questions.append(Question(rng.choice(shapes["ask"]).format(s=service), thing, None))
        # A past value: the middle of an earlier value's days, asked about by date.
        past = rng.randrange(n - 1)
        middle = times[past] + (times[past + 1] - times[past]) / 2
        asked = rng.choice(shapes["ask_then"]).format(s=service, when=_date(middle, rng))
        history.questions.append(Question(asked, thing, middle))
    for _ in range(max(1, written // 5)):
        text = rng.choice(_DISTRACTORS).format(s=rng.choice(_SERVICES), p=rng.choice(_PEOPLE))
        when = START + timedelta(days=rng.randrange(horizon), minutes=rng.randint(0, 600))
        history.statements.append(Statement(text, when))
    history.statements.sort(key=lambda st: st.when)
    return history


@dataclass
class Figures:
    """What one run measured (see :func:`updates_command` for what each figure means)."""

    current_top1: float
    stale_above_current: float
    as_of_correct: float
    current_questions: int
    as_of_questions: int
    facts: int
    changes: int
    superseded: int

    def as_dict(self) -> dict[str, Any]:
        """The figures, rounded, in the order ``--json`` prints them."""
        return {
            "current_top1": round(self.current_top1, 4),
            "stale_above_current": round(self.stale_above_current, 4),
            "as_of_correct": round(self.as_of_correct, 4),
            "current_questions": self.current_questions,
            "as_of_questions": self.as_of_questions,
            "facts": self.facts,
            "changes": self.changes,
            "superseded": self.superseded,
        }


@contextmanager
def _scratch_store(embedder: Embedder | None, weights: MemorySettings) -> Iterator[MemoryStore]:
    with tempfile.TemporaryDirectory(prefix="cairn-bench-updates-") as tmp:
        db = Database(f"sqlite:///{tmp}/bench.db")
        db.migrate()
        index = embedded_index(Path(tmp) / "qdrant", embedder.dim if embedder else None)
        try:
            yield MemoryStore(db, index, embedder=embedder, weights=weights)
        finally:
            index.close()
            db.dispose()


def run_updates(
    history: History,
    embedder: Embedder | None,
    weights: MemorySettings,
    progress: Callable[[str], None] | None = None,
) -> Figures:
    """Write ``history`` into a scratch store with ``weights`` and ask its questions."""
    scope = Scope("bench:updates", "bench")
    of: dict[int, tuple[int, int]] = {}  # memory id -> (thing, value)
    superseded = 0
    with _scratch_store(embedder, weights) as store:
        for count, st in enumerate(history.statements, 1):
            written = store.remember(
                st.text, scope, visibility=Visibility.TEAM, created_at=st.when, flush=False
            )
            superseded += len(written.superseded)
            if st.thing is not None:
                of[written.memory.id] = (st.thing, st.value)
            if count % 200 == 0:
                store.flush_outbox()
        store.flush_outbox()
        store.optimize_index()
        if progress:
            progress(f"{len(history.statements)} memories written, {superseded} superseded")
        now = max(st.when for st in history.statements) + timedelta(days=1)
        current_hits = stale = asked_current = as_of_hits = asked_then = 0
        for q in history.questions:
            thing = history.things[q.thing]
            found = store.recall(q.text, scope, K, now=now, touch=False)
            ranked = [of.get(r.memory.id) for r in found]
            if q.at is None:
                asked_current += 1
                latest = len(thing.values) - 1
                current_hits += bool(ranked) and ranked[0] == (q.thing, latest)
                stale += _stale_first(ranked, q.thing, latest)
            else:
                asked_then += 1
                held = max(i for i, t in enumerate(thing.times) if t <= q.at)
                as_of_hits += bool(ranked) and ranked[0] == (q.thing, held)
    changes = sum(len(t.values) - 1 for t in history.things)
    return Figures(
        current_top1=current_hits / max(asked_current, 1),
        stale_above_current=stale / max(asked_current, 1),
        as_of_correct=as_of_hits / max(asked_then, 1),
        current_questions=asked_current,
        as_of_questions=asked_then,
        facts=sum(1 for st in history.statements if st.thing is not None),
        changes=changes,
        superseded=superseded,
    )


def _stale_first(ranked: list[tuple[int, int] | None], thing: int, latest: int) -> bool:
    """Whether an older value of ``thing`` ranks above its current one (or is recalled while
    the current one is not)."""
    for entry in ranked:
        if entry == (thing, latest):
            return False
        if entry is not None and entry[0] == thing:
            return True
    return False


@click.command("updates")
@click.option("--facts", default=300, show_default=True, type=click.IntRange(1, 100_000),
              help="Statements of changing facts.")  # fmt: skip
@click.option("--seed", default=20, show_default=True, type=click.IntRange(0, 2**32 - 1),
              help="Seed of the generated history.")  # fmt: skip
@click.option(
    "--baseline/--no-baseline",
    default=True,
    show_default=True,
    help="Also run with supersession off (what Cairn did before), for comparison.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def updates_command(facts: int, seed: int, baseline: bool, as_json: bool) -> None:
    """Facts that change: is the current value recalled first, and the past one when asked?

    \b
    Generates an ops history of at least --facts statements: on-calls, owners, versions,
    database hosts, freeze dates and policies of many services, each changing one to three
    times on distinct days, with facts about other things mixed in (a fifth as many). Each is
    written in time order through the memory store into a scratch store, phrased in one of
    several ways the rule of cairn/memory/claims reads. Then, a day after the last one,
    recall (top 5) is asked about each thing, in other words than the facts but naming it
    (its service, and on-call, owner, version...):
    \b
      current_top1         share of questions about the current value ("who is on call for
                           payments?") whose top memory states the current value
      stale_above_current  share of those where a replaced value ranks above the current one
                           (or is recalled without it)
      as_of_correct        share of questions about a past date ("who was the payments on-call
                           on 3 November 2026?") whose top memory states the value held then
    \b
    Targets: current_top1 >= 0.95, stale_above_current <= 0.02. "superseded" counts the
    memories a newer value ended, of "changes" in the history. With --baseline (the default)
    the same history is also run with supersession off, shown as "baseline".
    \b
    Example:
      cairn bench updates --json
    """
    from cairn.commands.common import cli_errors, load_settings

    with cli_errors():
        settings = load_settings()
        history = generate(max(facts, 10), seed)
        embedder = build_embedder(settings.memory.embeddings, settings.memory.embedding_engine)
        log = None if as_json else (lambda line: click.echo(line, err=True))
        weights = settings.memory.model_copy(update={"supersede": True})
        result = run_updates(history, embedder, weights, log).as_dict()
        if baseline:
            before = settings.memory.model_copy(update={"supersede": False})
            result["baseline"] = run_updates(history, embedder, before, log).as_dict()
        if as_json:
            click.echo(json.dumps(result))
            return
        click.echo(f"embeddings: {embedder.name if embedder else 'none (lexical only)'}")
        click.echo(
            f"{result['facts']} facts ({result['changes']} changes) about "
            f"{len(history.things)} things, {len(history.statements) - result['facts']} "
            f"distractors; {result['superseded']} memories superseded"
        )
        rows = [("", "cairn", "baseline" if baseline else "")]
        for name in ("current_top1", "stale_above_current", "as_of_correct"):
            old = f"{result['baseline'][name]:.3f}" if baseline else ""
            rows.append((name, f"{result[name]:.3f}", old))
        for name, now, old in rows:
            click.echo(f"{name:<21} {now:>8} {old:>9}")
        click.echo(
            f"({result['current_questions']} current-value and {result['as_of_questions']} "
            "past-date questions; targets: current_top1 >= 0.95, stale_above_current <= 0.02)"
        )
