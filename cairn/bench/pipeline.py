"""``cairn bench pipeline``: throughput, latency and ordering of the message path.

Drives generated messages through the real frontend path (Pipeline.accept: validation, dedupe,
the durable event log, the queue) to real workers: once in-process (the default) and once
through Redis and ``cairn worker`` processes. The model is the offline one, which answers at
once, so the figures are Cairn's own overhead. Latency is from the event's row being written
to its reply's row being written.

Each mode runs the load twice, on the same workers (ADR 0016). A flood (senders as fast as they
can) measures throughput: the most the path sustains. A flood cannot measure overhead, though:
senders that outrun the workers build a backlog, and latency becomes time spent queued, which
grows with the length of the run. So latency is measured in a second run whose senders offer
a fixed rate (``--rate``, an open loop, as people write), below which the figures are the
path's own cost. Order, losses and duplicates are checked in both runs.

Like the LLM, the embedding model is left out by default: message texts repeat ("hello 3" in
every thread), so a turn's embedding comes from the cache. ``--unique`` makes every text unique,
as people's are, so each turn also runs the local embedding model (all-MiniLM-L6-v2: about
0.8 ms of CPU per short message here in int8, 5-7 ms in numpy float32). On the embedded store
the process that holds the vector folder serves it to the other workers (ADR 0047).
CAIRN_EMBEDDINGS and CAIRN_EMBEDDING_ENGINE are taken from the environment; no other setting is.
"""

from __future__ import annotations

import json
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click
import redis
from sqlmodel import col, select

from cairn.bench.workers import bench_env, start_workers, stop_workers
from cairn.bot.pipeline import Pipeline
from cairn.commands.common import FiniteRange
from cairn.core import stages
from cairn.core.errors import CairnError
from cairn.core.settings import load_settings
from cairn.core.stats import percentiles
from cairn.db.models import EventKind, EventStatus, OutboundMessage, SessionEvent
from cairn.memory import Scope, Visibility
from cairn.runtime import build_runtime
from cairn.sessions.events import ChatEvent

__all__ = ["PipelineFigures", "bench_pipeline", "run_mode"]


@dataclass(frozen=True, slots=True)
class PipelineFigures:
    """What one mode measured: throughput in a flood, latency at ``latency_at_per_s`` offered
    (0: in the flood too), order, losses and duplicates over both runs."""

    messages: int
    messages_per_s: float
    latency_ms: dict[str, float]
    order_violations: int
    lost: int
    duplicated: int
    latency_at_per_s: float = 0.0
    sustained_per_s: float = 0.0  # the throughput of the paced run
    # Where the latency run's time went: per place and stage, p50/p95 ms (cairn.core.stages).
    stages_ms: dict[str, Any] = field(default_factory=dict)
    turn: str = "light"
    memories: int = 0  # seeded in each run's tenant before the load
    peak_rss_mb: float = 0.0  # the largest peak RSS of a process doing the memory work


_RUNS = ("flood", "paced")  # each run's tenant


@dataclass(frozen=True, slots=True)
class _Run:
    """One run's figures."""

    messages_per_s: float
    latency_ms: dict[str, float]
    order_violations: int
    lost: int
    duplicated: int


def run_mode(
    *,
    threads: int,
    messages: int,
    workers: int,
    broker_url: str | None,
    home: Path,
    database_url: str | None = None,
    senders: int = 1,
    rate: float = 0.0,
    unique: bool = False,
    turn: str = "light",
    memories: int = 0,
    seed: bool = True,
    timeout: float = 600.0,
) -> PipelineFigures:
    """Send ``threads`` x ``messages`` messages from ``senders`` concurrent senders as fast as
    they can, then (when ``rate`` > 0) as many again at ``rate`` messages/s in all, and measure
    how they came back.

    ``turn`` "light" sends chat statements; "full" mixes them with "remember that ..." (a
    memory written) and questions (a recall tool call and a second model round), all unique
    texts. ``memories`` are seeded in each run's tenant first, visible to its threads (unless
    ``seed`` is False: ``home`` holds them already, from :func:`seed_home`)."""
    # The bench's own settings, except which embedding model runs and how (from the caller's).
    own = {}
    if broker_url:
        own["CAIRN_BROKER_URL"] = broker_url
    if database_url:
        own["CAIRN_DATABASE_URL"] = database_url
    timings = home / "stages"
    own[stages.DIRECTORY_VARIABLE] = str(timings)
    env = bench_env(home, own)
    overrides = {k: v for k, v in env.items() if k.startswith("CAIRN_")}
    settings = load_settings(**overrides)
    procs: list[subprocess.Popen[bytes]] = []
    if memories and seed:
        seed_home(home, memories)
    stages.record_to(timings)  # this process: the frontend's side, and in-process workers
    pipeline = Pipeline.open(settings)
    try:
        if broker_url:
            procs = start_workers(settings, env, home, workers)
        deadline = time.monotonic() + timeout
        load = (threads, messages, senders)
        read: dict[str, int] = {}
        texts = _full_text if turn == "full" else _text if unique else _repeated_text
        flood, paced = _RUNS
        # With a paced run to read the stages from, the flood times none: its throughput is
        # then the message path's alone, not the path's plus the bench's own timing.
        stages.pause(timings, bool(rate))
        runs = [_run(pipeline, flood, *load, rate=0.0, texts=texts, deadline=deadline)]
        stages.read(timings, skip=read)  # the flood's lines: what follows is the paced run's
        stages.pause(timings, False)
        if rate:
            runs.append(_run(pipeline, paced, *load, rate=rate, texts=texts, deadline=deadline))
        rss = max([_peak_rss_mb(p.pid) for p in procs] or [_peak_rss_mb(None)])
        return PipelineFigures(
            messages=threads * messages,
            messages_per_s=runs[0].messages_per_s,
            latency_ms=runs[-1].latency_ms,
            order_violations=sum(run.order_violations for run in runs),
            lost=sum(run.lost for run in runs),
            duplicated=sum(run.duplicated for run in runs),
            latency_at_per_s=rate,
            sustained_per_s=runs[-1].messages_per_s,
            stages_ms=stages.summary(stages.read(timings, skip=read)),
            turn=turn,
            memories=memories,
            peak_rss_mb=rss,
        )
    finally:
        stop_workers(procs)
        pipeline.close()
        stages.record_to(None)


def _run(
    pipeline: Pipeline,
    tenant: str,
    threads: int,
    messages: int,
    senders: int,
    *,
    rate: float,
    texts: Callable[[str, int, int], str],
    deadline: float,
) -> _Run:
    """One run, in a tenant (and so in sessions) of its own."""
    # Like an HTTP frontend serving requests at once: several senders, each with its own chat
    # threads, whose messages it sends in order (so per-thread order is defined).
    with ThreadPoolExecutor(max_workers=senders, thread_name_prefix="bench-sender") as pool:
        sent = [
            pool.submit(
                _send,
                pipeline,
                tenant,
                range(k, threads, senders),
                messages,
                rate / senders,
                texts,
            )
            for k in range(senders)
        ]
        for future in sent:
            future.result()
    while time.monotonic() < deadline and _pending(pipeline) > 0:
        time.sleep(0.1)
    time.sleep(0.2)  # a worker writes a message's timings just after its reply
    return _figures(pipeline, tenant)


def _send(
    pipeline: Pipeline,
    tenant: str,
    threads: range,
    messages: int,
    rate: float,
    texts: Callable[[str, int, int], str],
) -> None:
    # Paced (rate > 0): message n leaves at start + n / rate, late ones at once (an open
    # loop, like people writing, so latency is measured below saturation, not queueing).
    start = time.monotonic()
    n = 0
    for m in range(messages):
        for t in threads:
            if rate > 0:
                time.sleep(max(0.0, start + n / rate - time.monotonic()))
                n += 1
            pipeline.accept(
                ChatEvent(
                    platform="bench",
                    tenant=tenant,
                    channel="bench",
                    thread=f"t{t}",
                    user="bench",
                    text=texts(tenant, t, m),
                    event_id=uuid.uuid4().hex,
                )
            )


def _text(tenant: str, thread: int, message: int) -> str:
    # A chat-sized statement, unique across runs and threads. Not a question: the offline model
    # would answer one with a recall tool call, a second embedding and a second model round.
    return (
        f"{tenant} {thread}.{message}: the nightly deploy of service {thread} is done, canary fine"
    )


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _repeated_text(tenant: str, thread: int, message: int) -> str:
    return f"hello {message}"  # the same in every thread: embeddings come from the cache


_RUNNERS = ("alder", "birch", "cedar", "dogwood", "elm", "fir", "ginkgo")


def _full_text(tenant: str, thread: int, message: int) -> str:
    # A whole turn's mix: a fact to remember (a memory written: gate, embedding, checks), a
    # question (a recall tool call, then a second model round) and a statement.
    kind = message % 3
    if kind == 0:
        # The runner is a word, not a digit: two threads' facts that differed only in numbers
        # were one fact to the store's near-duplicate check (a text adding no term is merged),
        # so how many were kept depended on which was checked after the other committed.
        return (
            f"remember that service {thread}-{message} of {tenant} deploys from runner "
            f"{_RUNNERS[thread % len(_RUNNERS)]} after the {message}th canary"
        )
    if kind == 1:
        return f"what do you know about service {thread}-{message - 1} and its runner?"
    return _text(tenant, thread, message)


def seed_home(home: Path, count: int) -> None:
    """``count`` memories in each run's tenant of a bench home, visible to the bench's channel,
    written by a child process (so that this one's peak RSS is the message path's alone) before
    any worker opens the store (the embedded vector folder admits one process)."""
    code = "import sys; from cairn.bench.pipeline import _seed; _seed(int(sys.argv[1]))"
    done = subprocess.run(  # noqa: S603 (our interpreter and a number: no input)
        [sys.executable, "-c", code, str(count)],
        env=bench_env(home, {}),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise CairnError(f"seeding {count} memories failed: {done.stderr.strip()[-2000:]}")


def _seed(count: int) -> None:
    settings = load_settings()
    rt = build_runtime(settings, index=True)
    try:
        rng = random.Random(7)
        pool = [" ".join(rng.choice(_SEED_WORDS) for _ in range(10)) for _ in range(256)]
        embedder = rt.memory.embedder
        vectors = embedder.embed(pool) if embedder is not None else None
        for tenant in _RUNS:
            scope = Scope(tenant, settings.agent, "bench")
            for n in range(count):
                rt.memory.remember(
                    f"{pool[n % len(pool)]} #{n}",
                    scope,
                    kind="episode",
                    visibility=Visibility.TEAM,
                    flush=False,
                    vector=vectors[n % len(pool)] if vectors is not None else None,
                )
                if n % 2000 == 1999:
                    rt.memory.flush_outbox(limit=2000)
            rt.memory.flush_outbox(limit=count + 1)
        rt.memory.optimize_index()
    finally:
        rt.close()


_SEED_WORDS = (  # noqa: SIM905 - a word list reads best as one string
    "deploy release staging database backup runner cache queue incident rollback vpn dns "
    "certificate token grafana alert pager rotation kubernetes node pod cluster migration "
    "schema index latency budget outage freeze review ticket customer invoice region replica"
).split()


def _peak_rss_mb(pid: int | None) -> float:
    """The peak resident set of process ``pid`` (None: this one), in MB; 0 if unknown."""
    if pid is None:
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _pending(pipeline: Pipeline) -> int:
    with pipeline.rt.db.session() as s:
        return len(
            s.exec(select(SessionEvent.id).where(SessionEvent.status == EventStatus.PENDING)).all()
        )


def _figures(pipeline: Pipeline, tenant: str) -> _Run:
    with pipeline.rt.db.session() as s:
        inbound = s.exec(
            select(SessionEvent)
            .where(SessionEvent.kind == EventKind.MESSAGE, SessionEvent.tenant_id == tenant)
            .order_by(col(SessionEvent.session_id), col(SessionEvent.seq))
        ).all()
        replies = s.exec(
            select(OutboundMessage)
            .where(
                col(OutboundMessage.kind).in_(["reply", "error"]),
                OutboundMessage.tenant_id == tenant,
            )
            .order_by(col(OutboundMessage.id))
        ).all()
    by_cause: dict[int, list[OutboundMessage]] = {}
    for reply in replies:
        by_cause.setdefault(reply.cause_event_id, []).append(reply)
    latencies: list[float] = []
    violations = lost = duplicated = 0
    last_reply: dict[int, int] = {}
    for event in inbound:
        answers = by_cause.get(event.id or 0, [])
        if not answers:
            lost += 1
            continue
        duplicated += len(answers) - 1
        first = answers[0]
        latencies.append((first.created_at - event.created_at).total_seconds() * 1000)
        # Within a thread, replies must come in the order the messages arrived.
        if (first.id or 0) < last_reply.get(event.session_id, -1):
            violations += 1
        last_reply[event.session_id] = first.id or 0
    start = min((e.created_at for e in inbound), default=None)
    end = max((r.created_at for r in replies), default=None)
    seconds = (end - start).total_seconds() if start and end else 0.0
    return _Run(
        messages_per_s=round(len(latencies) / seconds, 1) if seconds > 0 else 0.0,
        latency_ms=percentiles(latencies, (0.5, 0.95, 0.99), digits=1),
        order_violations=violations,
        lost=lost,
        duplicated=duplicated,
    )


def bench_pipeline(
    threads: int,
    messages: int,
    workers: int,
    redis_url: str,
    senders: int = 1,
    rate: float = 200.0,
    unique: bool = False,
    turn: str = "light",
    memories: int = 0,
) -> dict[str, Any]:
    """Both modes, side by side, each on a fresh CAIRN_HOME (SQLite) and a flushed Redis DB."""
    client = redis.Redis.from_url(redis_url)
    try:
        client.flushdb()
    except redis.RedisError as exc:
        raise CairnError(f"cannot use Redis at {redis_url} for the benchmark: {exc}") from exc
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="cairn-bench-seeded-") as seeded:
        if memories:
            seed_home(Path(seeded), memories)  # once, copied into each mode's home
        for mode, broker in (("redis", redis_url), ("inprocess", None)):
            with tempfile.TemporaryDirectory(prefix=f"cairn-bench-{mode}-") as home:
                shutil.copytree(seeded, home, dirs_exist_ok=True)
                figures = run_mode(
                    threads=threads,
                    messages=messages,
                    workers=workers,
                    broker_url=broker,
                    home=Path(home),
                    senders=senders,
                    rate=rate,
                    unique=unique,
                    turn=turn,
                    memories=memories,
                    seed=False,
                )
                results[mode] = asdict(figures)
    client.flushdb()
    return results


@click.command("pipeline")
@click.option(
    "--threads",
    default=200,
    type=click.IntRange(min=1, max=100_000),
    show_default=True,
    help="Chat threads (sessions).",
)
@click.option(
    "--messages",
    default=10,
    type=click.IntRange(min=1, max=10_000),
    show_default=True,
    help="Messages per thread.",
)
@click.option(
    "--workers",
    default=2,
    type=click.IntRange(min=1, max=32),
    show_default=True,
    help="`cairn worker` processes.",
)
@click.option(
    "--senders",
    default=1,
    type=click.IntRange(min=1, max=1_000),
    show_default=True,
    help="Concurrent senders, as an HTTP frontend serves requests (each owns some threads).",
)
@click.option(
    "--rate",
    default=200.0,
    type=FiniteRange(min=0, max=100_000),
    show_default=True,
    help="Messages/s offered in all in the run that measures latency (0: no such run; latency "
    "is then read in the flood, where it is mostly time spent queued).",
)
@click.option(
    "--unique",
    is_flag=True,
    help="Make every message text unique, so each turn also runs the embedding model (by default "
    "texts repeat and embeddings come from the cache, leaving the model out like the LLM).",
)
@click.option(
    "--turn",
    type=click.Choice(["light", "full"]),
    default="light",
    show_default=True,
    help="light: chat statements. full: a whole turn's mix, every text unique: facts to "
    "remember (a memory written), questions (recall, a tool call, a second model round) and "
    "statements.",
)
@click.option(
    "--memories",
    default=0,
    type=click.IntRange(min=0, max=1_000_000),
    show_default=True,
    help="Memories seeded in each run's home before the load, visible to its threads.",
)
@click.option(
    "--redis-url",
    default="redis://127.0.0.1:6379/14",
    show_default=True,
    help="Redis for the broker; its database is FLUSHED before and after.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def pipeline_command(
    threads: int,
    messages: int,
    workers: int,
    senders: int,
    rate: float,
    unique: bool,
    turn: str,
    memories: int,
    redis_url: str,
    as_json: bool,
) -> None:
    """Measure the message path: Redis + Celery workers, and the in-process default.

    \b
    Each mode sends THREADS x MESSAGES messages twice: as fast as the senders can, for
    throughput (messages/s), then at --rate messages/s, for latency p50/p95/p99 from event
    to reply (the offline model answers at once, so this is Cairn's overhead; in a flood it
    would be time spent queued). Per-thread order violations, lost and duplicated replies
    are counted in both runs. Texts repeat, so embeddings come from the cache (--unique runs
    the embedding model on every message). Where the latency run's time went is shown per
    stage (p50/p95 ms per message): on the frontend, the gate, ingest (validation and the
    durable log) and enqueue; in the worker, time queued, claim (lock and read), context
    (resume and compile), recall, model (with streaming), tools, stream and outbox. --turn
    full makes the turn a whole one (memories written and recalled, tool calls, the context
    engine), on a home seeded with --memories; the peak RSS of the process that holds the
    memory is printed. Example:
      cairn bench pipeline --threads 50 --messages 4 --json
      cairn bench pipeline --turn full --memories 10000 --threads 50 --messages 6
      cairn bench pipeline --rate 100    # latency at 100 msg/s offered
      cairn bench pipeline --unique      # with the embedding model on every message
    """
    # Killed (SIGTERM), stop the `cairn worker` processes on the way out like on any other
    # exit: left running, they would take the next run's tasks from the same broker database.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        results = bench_pipeline(
            threads,
            messages,
            workers,
            redis_url,
            senders=senders,
            rate=rate,
            unique=unique,
            turn=turn,
            memories=memories,
        )
    except CairnError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(results))
        return
    for mode, figures in results.items():
        lat = figures["latency_ms"]
        paced = (
            f"at {figures['latency_at_per_s']:g} msg/s offered ({figures['sustained_per_s']:.1f} "
            "sustained): "
            if figures["latency_at_per_s"]
            else "in the flood: "
        )
        click.echo(
            f"{mode:<10} {figures['messages']} messages  {figures['messages_per_s']:>7.1f} msg/s  "
            f"latency {paced}p50 {lat['p50']:.1f} ms  p95 {lat['p95']:.1f} ms  "
            f"p99 {lat['p99']:.1f} ms  order violations {figures['order_violations']}  "
            f"lost {figures['lost']}  duplicated {figures['duplicated']}"
        )
        click.echo(
            f"{'':<10} turn {figures['turn']}, {figures['memories']} memories seeded, "
            f"peak RSS {figures['peak_rss_mb']:.0f} MB"
        )
        for place, stages_ms in figures["stages_ms"].items():
            shown = "  ".join(
                f"{stage} {ms['p50']:.2f}/{ms['p95']:.2f}" for stage, ms in stages_ms.items()
            )
            click.echo(f"{'':<10} {place} stages, p50/p95 ms: {shown}")
