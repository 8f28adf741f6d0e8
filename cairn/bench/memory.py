"""Benchmarks of long-term memory: recall on LoCoMo conversations, and latency at scale.

Both are commands that print figures (``cairn bench recall``, ``cairn bench scale``); they pass
or fail nothing. Each run builds its own store in a temporary folder, so it never touches the
data in CAIRN_HOME.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from cairn.bench.locomo import (
    CATEGORIES,
    _scratch_store,
    conversation_files,
    default_sets,
    evidence_of,
    store_conversation,
)
from cairn.commands.common import IntList
from cairn.core.errors import InvalidInput
from cairn.core.settings import MemorySettings
from cairn.core.stats import percentiles
from cairn.memory.embed import Embedder, build_embedder
from cairn.memory.scope import Scope
from cairn.memory.store import MemoryStore
from cairn.memory.terms import terms

__all__ = ["RecallReport", "bench_recall", "bench_scale", "run_recall", "run_scale"]

METHODS = ("cairn", "bm25", "dense", "palaia", "pranor")
PLOT_KS = 20  # --plot draws recall@k for k = 1..PLOT_KS
_DATE = "%I:%M %p on %d %B, %Y"


@dataclass
class RecallReport:
    """Recall@k per method, averaged over questions (in all, per set and per category), and
    the latency of cairn's recall."""

    ks: tuple[int, ...]
    hits: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)
    # (set, category name) of each question, in the order its hits were added
    asked: list[tuple[str, str]] = field(default_factory=list)

    def add(self, method: str, k: int, value: float) -> None:
        """Record the recall of one question by ``method`` at ``k``."""
        self.hits.setdefault(method, {}).setdefault(k, []).append(value)

    def _methods(self, which: list[int] | None) -> dict[str, dict[str, float | int]]:
        methods: dict[str, dict[str, float | int]] = {}
        for method in METHODS:
            per_k = self.hits.get(method, {})
            entry: dict[str, float | int] = {}
            for k in self.ks:
                values = per_k.get(k, [])
                if which is not None:
                    values = [values[i] for i in which if i < len(values)]
                entry[f"recall@{k}"] = round(statistics.fmean(values), 4) if values else 0.0
            entry["n"] = len(per_k.get(self.ks[0], [])) if which is None else len(which)
            methods[method] = entry
        return methods

    def as_dict(self) -> dict[str, Any]:
        """The shape ``--json`` prints: every method in all, then per set (the folder's name)
        and per category of that set."""
        sets: dict[str, Any] = {}
        for name in dict.fromkeys(s for s, _ in self.asked):
            mine = [i for i, (s, _) in enumerate(self.asked) if s == name]
            categories = dict.fromkeys(self.asked[i][1] for i in mine)
            sets[name] = {
                "methods": self._methods(mine),
                "by_category": {
                    c: self._methods([i for i in mine if self.asked[i][1] == c]) for c in categories
                },
            }
        return {
            "methods": self._methods(None),
            "sets": sets,
            "latency_ms": percentiles(self.latencies_ms),
        }


def run_recall(
    data: Path | Sequence[Path],
    ks: tuple[int, ...],
    embedder: Embedder | None,
    weights: MemorySettings | None = None,
    progress: Callable[[str], None] | None = None,
) -> RecallReport:
    """Score cairn and the baselines on every conversation file in ``data`` (a folder, or
    several: one set each).

    Raises InvalidInput when a folder holds no conversation files.
    """
    files = conversation_files([data] if isinstance(data, Path) else data)
    report = RecallReport(ks=ks)
    top = max(ks)
    with _scratch_store(embedder, weights) as store:
        for name, path in files:
            stored = store_conversation(store, path)
            scope, dia_of, created = stored.scope, stored.dia_of, stored.created
            asked_at, questions = stored.asked_at, stored.questions
            if progress:
                progress(f"{name}/{path.name}: {len(dia_of)} turns, {len(questions)} questions")
            texts = {mid: set(terms(t)) for mid, t in _texts(store, scope).items()}
            for item in questions:
                category = CATEGORIES[stored.format][int(item["category"])]
                report.asked.append((name, category))
                _score_question(
                    store, scope, str(item["question"]), evidence_of(item), asked_at,
                    dia_of, created, texts, report, top,
                )  # fmt: skip
    return report


def _texts(store: MemoryStore, scope: Scope) -> dict[int, str]:
    return {m.id: m.text for m in store.newest(scope, limit=1_000_000)}


def _score_question(
    store: MemoryStore,
    scope: Scope,
    question: str,
    evidence: set[str],
    asked_at: datetime,
    dia_of: dict[int, str],
    created: dict[int, datetime],
    texts: dict[int, set[str]],
    report: RecallReport,
    top: int,
) -> None:
    started = time.perf_counter()
    recalled = store.recall(question, scope, top, now=asked_at, touch=False)
    report.latencies_ms.append((time.perf_counter() - started) * 1000)
    found = store.candidates(question, scope, max(top, 100))
    rankings: dict[str, list[int]] = {
        "cairn": [r.memory.id for r in recalled],
        "bm25": [mid for mid, _ in found.lexical],
        "dense": [mid for mid, _ in found.dense],
        "palaia": _palaia(found.lexical, found.dense),
        "pranor": _pranor(question, asked_at, created, texts),
    }
    for method, ids in rankings.items():
        for k in report.ks:
            got = {dia_of.get(mid) for mid in ids[:k]}
            report.add(method, k, len(evidence & got) / len(evidence))


def _minmax(pairs: list[tuple[int, float]]) -> dict[int, float]:
    if not pairs:
        return {}
    low, high = min(s for _, s in pairs), max(s for _, s in pairs)
    span = high - low
    return {mid: (s - low) / span if span > 0 else 1.0 for mid, s in pairs}


def _palaia(lexical: list[tuple[int, float]], dense: list[tuple[int, float]]) -> list[int]:
    """palaia's hybrid: 0.4 x BM25 + 0.6 x dense, each min-max normalised."""
    bm25, cos = _minmax(lexical), _minmax(dense)
    scores = {mid: 0.4 * bm25.get(mid, 0.0) + 0.6 * cos.get(mid, 0.0) for mid in {*bm25, *cos}}
    return sorted(scores, key=lambda mid: (-scores[mid], mid))


def _pranor(
    question: str, asked_at: datetime, created: dict[int, datetime], texts: dict[int, set[str]]
) -> list[int]:
    """Pranor's ranking: keyword matches x 1 / (1 + hours since the memory was created)."""
    wanted = set(terms(question))
    scores: dict[int, float] = {}
    for mid, words in texts.items():
        matches = len(wanted & words)
        if matches:
            hours = max(0.0, (asked_at - created[mid]).total_seconds() / 3600)
            scores[mid] = matches / (1.0 + hours)
    return sorted(scores, key=lambda mid: (-scores[mid], mid))


@click.command("recall")
@click.option(
    "--data",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    multiple=True,
    help="Folder of conversation files, LoCoMo or realchat format; repeat for several sets "
    "(default: ../shared/data/locomo and ../shared/data/realchat, those that are there).",
)
@click.option("--k", "ks", default="5,10", show_default=True, type=IntList("a cut-off", 1, 1000),
              help="Comma-separated cut-offs.")  # fmt: skip
@click.option(
    "--cv",
    is_flag=True,
    help="Also choose recall's weights by leave-one-conversation-out and print the held-out "
    "recall beside the in-sample one, per category (slower: re-ranks every question once per "
    "grid point).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also draw recall@k for k = 1..20, every method, into this PNG.")  # fmt: skip
def bench_recall(
    data: tuple[Path, ...], ks: tuple[int, ...], cv: bool, as_json: bool, plot: Path | None
) -> None:
    """Recall@k of cairn's memory and four baselines on LoCoMo and real-chat conversations.

    \b
    Each conversation file becomes a fresh tenant; every turn is stored as an episodic memory
    ("Speaker: text", plus the image caption) at its date and time. Every question (LoCoMo's
    categories 1-4, realchat's 1-3) is then asked a day after the last turn; recall@k is the
    share of its evidence turns among the top k, in all, per set (folder) and per category.
    Baselines on the same store: bm25, dense, palaia
    (0.4 x BM25 + 0.6 x dense, min-max normalised), pranor (keyword matches x 1/(1+hours)).
    \b
    With --cv, every weight recall is tuned by (the grid in cairn/bench/recall_cv.py) is
    chosen on all conversations but one and scored on that one, for each: the held-out figure
    is what to expect on conversations Cairn never saw. The in-sample figure (the best grid
    point scored on all) and the shipped defaults are printed beside it, each per set and
    category.
    \b
    Example:
      cairn bench recall --data ../shared/data/locomo --k 5,10 --json --plot recall.png
      cairn bench recall --data ../shared/data/locomo --data ../shared/data/realchat --cv
    """
    from cairn.bench.plots import plot_recall, require_plotting
    from cairn.commands.common import cli_errors, load_settings

    with cli_errors():
        settings = load_settings()
        cutoffs = ks
        if plot is not None:
            require_plotting()
        curve = tuple(range(1, PLOT_KS + 1)) if plot is not None else ()
        folders = list(data) or default_sets()
        if not folders:
            raise InvalidInput("no conversation data beside the repository; pass --data DIR")
        embedder = build_embedder(settings.memory.embeddings, settings.memory.embedding_engine)
        report = run_recall(
            folders,
            tuple(sorted({*cutoffs, *curve})),
            embedder,
            settings.memory,
            progress=None if as_json else lambda line: click.echo(line, err=True),
        )
        result = report.as_dict()
        if plot is not None:
            plot_recall(plot, result["methods"], curve)
        for row in _method_rows(result):  # what --k asked for; the curve is the figure's
            for k in set(curve) - set(cutoffs):
                del row[f"recall@{k}"]
        if cv:
            from cairn.bench.recall_cv import run_cross_validation

            result["cv"] = run_cross_validation(
                folders,
                cutoffs,
                embedder,
                settings.memory,
                progress=None if as_json else lambda line: click.echo(line, err=True),
            ).as_dict()
        if as_json:
            click.echo(json.dumps(result))
            return
        click.echo(f"embeddings: {embedder.name if embedder else 'none (lexical only)'}")
        header = "method  " + "  ".join(f"recall@{k:<3}" for k in cutoffs) + "  n"
        click.echo(header)
        for method, row in result["methods"].items():
            cells = "  ".join(f"{row[f'recall@{k}']:<9.3f}" for k in cutoffs)
            click.echo(f"{method:<7} {cells}  {row['n']}")
        for name, figures in result["sets"].items():
            click.echo(f"{name}:")
            for group, methods in {"all": figures["methods"], **figures["by_category"]}.items():
                cells = "  ".join(
                    m + " " + " / ".join(f"{methods[m][f'recall@{k}']:.3f}" for k in cutoffs)
                    for m in ("cairn", "bm25")
                )
                click.echo(f"  {group:<12} {cells}  n={methods['cairn']['n']}")
        lat = result["latency_ms"]
        click.echo(f"cairn recall latency: p50 {lat['p50']:.1f} ms, p95 {lat['p95']:.1f} ms")
        if cv:
            _echo_cv(result["cv"], cutoffs)


def _method_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every row of figures per method in ``result``: in all, per set, per category."""
    groups = [result["methods"]]
    for figures in result["sets"].values():
        groups += [figures["methods"], *figures["by_category"].values()]
    return [row for methods in groups for row in methods.values()]


def _echo_cv(cv: dict[str, Any], cutoffs: tuple[int, ...]) -> None:
    """The cross-validation as a table: defaults, in-sample best, held-out; per set and
    category."""
    click.echo("\ncairn, weights chosen by leave-one-conversation-out:")
    names = ["all", "multi-hop", "temporal", "open-domain", "single-hop", "commonsense"]
    click.echo(f"{'':<22}" + "".join(f"{n:>16}" for n in names))
    for label in ("defaults", "in_sample", "held_out"):
        figures = cv[label]
        for group, row in {"all": figures, **figures.get("by_set", {})}.items():
            cells = []
            for name in names:
                cell = row if name == "all" else row["by_category"].get(name)
                cells.append(
                    " / ".join(f"{cell[f'recall@{k}']:.3f}" for k in cutoffs) if cell else "-"
                )
            click.echo(f"{label + ' ' + group:<22}" + "".join(f"{c:>16}" for c in cells))
    click.echo(
        f"(recall@{' / @'.join(str(k) for k in cutoffs)}; in-sample chose "
        f"{json.dumps(cv['in_sample']['chosen'])})"
    )
    for fold in cv["folds"]:
        figures = " / ".join(f"{fold[f'recall@{k}']:.3f}" for k in cutoffs)
        click.echo(f"  held out {fold['held_out']}: {figures} with {json.dumps(fold['chosen'])}")


# --- scale ------------------------------------------------------------------------------

_WORDS = (  # noqa: SIM905 - a word list reads best as one string
    "deploy release staging database backup runner cache queue incident rollback vpn dns "
    "certificate token grafana alert pager rotation kubernetes node pod cluster migration "
    "schema index latency budget outage freeze monday friday review ticket customer invoice "
    "billing refund region replica shard snapshot restore cron job worker broker redis postgres"
).split()


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 14)))


def run_scale(
    size: int,
    embedder: Embedder | None,
    *,
    other_tenants: int = 20,
    queries: int = 200,
    seed: int = 7,
) -> dict[str, Any]:
    """Search latency and write throughput with ``size`` memories in one tenant.

    The other tenants hold ``size // 10`` memories each, shared out so that filtering by tenant
    matters. Vectors of a small pool of sentences are embedded once and reused, so the write
    figure measures the store, not the model; the query figure is given with and without
    embedding time, for the whole recall path (index, fusion, scope re-read, weighting) without
    the recall-count update.
    """
    rng = random.Random(seed)
    pool = [_sentence(rng) for _ in range(512)]
    vectors = embedder.embed(pool) if embedder is not None else None
    with _scratch_store(embedder) as store:
        target = Scope("scale:main", "bench")
        others = [Scope(f"scale:other{i}", "bench") for i in range(other_tenants)]
        plan = [(target, n) for n in range(size)]
        plan += [(others[n % other_tenants], n) for n in range(size // 10 * other_tenants // 10)]
        rng.shuffle(plan)
        started = time.perf_counter()
        for count, (scope, n) in enumerate(plan, 1):
            text = f"{pool[n % len(pool)]} #{n}"
            vector = vectors[n % len(pool)] if vectors is not None else None
            store.remember(text, scope, kind="episode", flush=False, vector=vector)
            if count % 2000 == 0:
                store.flush_outbox(limit=2000)
        store.flush_outbox(limit=2000)
        writes_per_s = len(plan) / (time.perf_counter() - started)
        store.optimize_index()  # what the scheduled reconciler does after bulk writes
        asks = [" ".join(rng.sample(_WORDS, 4)) for _ in range(queries)]
        with_embedding: list[float] = []
        search_only: list[float] = []
        for query in asks:
            t0 = time.perf_counter()
            qvec = store.query_vector(query, target)  # as recall embeds a query (ADR 0048)
            t1 = time.perf_counter()
            store.recall(query, target, 10, vector=qvec, touch=False)
            t2 = time.perf_counter()
            search_only.append((t2 - t1) * 1000)
            with_embedding.append((t2 - t0) * 1000)
        return {
            "search_ms": percentiles(search_only),
            "search_with_embedding_ms": percentiles(with_embedding),
            "writes_per_s": round(writes_per_s, 1),
        }


@click.command("scale")
@click.option(
    "--memories",
    default="10000,100000",
    show_default=True,
    type=IntList("a number of memories", 1, 10_000_000),
    help="Comma-separated numbers of memories in the measured tenant.",
)
@click.option("--queries", default=200, show_default=True, type=click.IntRange(1, 100_000),
              help="Searches timed per size.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_scale(memories: tuple[int, ...], queries: int, as_json: bool) -> None:
    """Search latency (p50/p95, with and without query embedding) and write throughput.

    \b
    One tenant holds N memories while 20 other tenants are present; searches go through the
    full recall path (index, fusion, scope re-read, weighting) on the embedded default.
    \b
    Example:
      cairn bench scale --memories 10000 --json
    """
    from cairn.commands.common import cli_errors, load_settings

    with cli_errors():
        settings = load_settings()
        sizes = memories
        embedder = build_embedder(settings.memory.embeddings, settings.memory.embedding_engine)
        result = {"sizes": {str(n): run_scale(n, embedder, queries=queries) for n in sizes}}
        if as_json:
            click.echo(json.dumps(result))
            return
        for n, row in result["sizes"].items():
            s, e = row["search_ms"], row["search_with_embedding_ms"]
            click.echo(
                f"{n:>7} memories: search p50 {s['p50']:.2f} ms p95 {s['p95']:.2f} ms; "
                f"with embedding p50 {e['p50']:.2f} ms p95 {e['p95']:.2f} ms; "
                f"{row['writes_per_s']:.0f} writes/s"
            )
