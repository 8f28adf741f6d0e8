"""``cairn bench stream``: how soon an answer being written shows on the chat platform, and
what showing it costs (issue 18).

Real turns, end to end: messages go through the frontend path (Pipeline.accept) to real
workers, in-process threads in one mode, `cairn worker` processes behind Redis in the other
(the stream pieces then cross a process boundary through Redis pub/sub, as in production).
The model is the offline one, paced to write its answer a word group at a time
(CAIRN_LLM_OFFLINE_DELAY, ``--delta-ms``), so each answer streams in some twenty deltas.

The frontend side is a real :class:`~cairn.bot.streaming.StreamRelay` with the Slack frontend's
throttle (CAIRN_SLACK_STREAM_INTERVAL and _UPDATES unless options say otherwise), writing to a
stand-in platform that answers at once and records every call and what each message shows.
The final reply comes from the outbox as a frontend delivers it: the relay edits the streamed
message into the reply's text, which must then be exactly the reply's full text.

Each simulated person sends a message and waits for its final reply before the next
(``--concurrency`` of them), so the figures are latencies below saturation, not queueing.
Two replies per mode warm the workers up first and are left out of the figures.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any, Literal

import click
import redis

from cairn.bench.workers import bench_env, start_workers, stop_workers
from cairn.bot.dedupe import open_dedupe
from cairn.bot.pipeline import Pipeline
from cairn.bot.streaming import BUSY, LiveReply, RelayStats, StreamRelay
from cairn.commands.common import FiniteRange
from cairn.core.errors import CairnError
from cairn.core.redact import mask_url
from cairn.core.settings import load_settings
from cairn.core.stats import percentiles
from cairn.sessions.events import ChatEvent
from cairn.sessions.outbox import Outbox

__all__ = ["BenchWriter", "StreamFigures", "bench_stream", "run_mode", "stream_command"]

# A database of its own: the bench's workers take tasks from the "cairn" queue there, and a
# live deployment's workers on the same database would take them too (and run them against
# their own database). Pub/sub channels are not per database: the bench's tenant is unique.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/13"
PLATFORM = "bench"
# The offline model's longest answer that needs no tool: about twenty word groups.
QUESTION = "help"
WARMUP = 2
_POLL = 0.1  # how often the bench frontend reads the outbox (the Slack delivery's interval)
_REPLY_TIMEOUT = 120.0

Mode = Literal["in_process", "redis"]
_MODES: dict[str, tuple[Mode, ...]] = {
    "both": ("in_process", "redis"),
    "in-process": ("in_process",),
    "redis": ("redis",),
}


@dataclass(frozen=True, slots=True)
class StreamFigures:
    """What one mode measured, over the replies after the warm-up."""

    replies: int
    streamed: int  # replies whose final text edited a streamed message
    lost: int  # replies that never came (within two minutes each)
    errors: int  # replies that were the bot's apology for a failed turn
    first_visible_ms: dict[str, float]
    added_ms_per_delta: dict[str, float]
    deltas: int
    platform_calls_per_reply: dict[str, float]
    final_equals_full: bool
    stream_interval_s: float
    stream_updates: int
    delta_delay_ms: float
    workers: str


class BenchWriter:
    """The platform, for the bench: answers every call at once and remembers what each message
    shows and how many calls each reply took (opening, updating, deleting, statuses)."""

    platform = PLATFORM

    def __init__(self, interval: float, max_updates: int, limit: int) -> None:
        self.interval = interval
        self.max_updates = max_updates
        self.limit = limit
        self._lock = threading.Lock()
        self._refs = itertools.count(1)
        self.texts: dict[str, str] = {}  # message reference -> the text it shows
        self.calls: dict[int, int] = {}  # cause (event row) -> platform calls for its reply

    def split(self, text: str) -> list[str]:
        """``text`` in slices of at most ``limit`` characters (joined, ``text`` again)."""
        return [text[i : i + self.limit] for i in range(0, len(text), self.limit)]

    def open(self, reply: LiveReply, text: str, *, final: bool) -> str:
        """A new message showing ``text``."""
        with self._lock:
            ref = f"m{next(self._refs)}"
            self.texts[ref] = text
            self._count(reply.cause)
        return ref

    def update(
        self, reply: LiveReply, ref: str, text: str, *, shown: str | None, final: bool
    ) -> str:
        """Message ``ref`` now shows ``text``."""
        with self._lock:
            self.texts[ref] = text
            self._count(reply.cause)
        return ref

    def delete(self, reply: LiveReply, ref: str) -> None:
        """Message ``ref`` is gone."""
        with self._lock:
            self.texts.pop(ref, None)
            self._count(reply.cause)

    def status(self, reply: LiveReply, text: str) -> None:
        """A status shown (a call like any other)."""
        with self._lock:
            self._count(reply.cause)

    def shows(self, refs: list[str]) -> str:
        """What messages ``refs`` show, one after the other."""
        with self._lock:
            return "".join(self.texts.get(ref, "") for ref in refs)

    def _count(self, cause: int) -> None:
        self.calls[cause] = self.calls.get(cause, 0) + 1


@dataclass
class _Delivered:
    streamed: bool
    equal: bool
    error: bool


@dataclass
class _Frontend:
    """The frontend's delivery: posts each final reply of the outbox through the relay."""

    outbox: Outbox
    tenant: str
    relay: StreamRelay
    writer: BenchWriter
    delivered: dict[int, _Delivered] = field(default_factory=dict)
    changed: threading.Condition = field(default_factory=threading.Condition)
    failure: BaseException | None = None

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.wait(_POLL):
                self.deliver()
        except BaseException as exc:  # the senders are told, instead of waiting for nothing
            with self.changed:
                self.failure = exc
                self.changed.notify_all()
            raise

    def deliver(self) -> None:
        for row in self.outbox.pending(tenant=self.tenant):
            assert row.id is not None
            if row.kind not in ("reply", "error"):
                self.outbox.mark_sent(row.id, None)  # notices: none expected, none measured
                continue
            cause = row.cause_event_id
            refs = self.relay.final(row.tenant_id, cause, row.channel, row.thread_ref, row.text)
            if refs == BUSY:  # only one frontend here; would be another's stream
                continue
            streamed = refs is not None
            if refs is None:  # not streamed: posted whole, as a frontend does
                reply = LiveReply(row.tenant_id, cause, row.channel, row.thread_ref)
                refs = [
                    self.writer.open(reply, part, final=True)
                    for part in self.writer.split(row.text)
                ]
            equal = self.writer.shows(list(refs)) == row.text
            self.outbox.mark_sent(row.id, refs[0] if refs else None)
            self.relay.done(row.tenant_id, cause)
            with self.changed:
                self.delivered[cause] = _Delivered(streamed, equal, row.kind == "error")
                self.changed.notify_all()

    def wait(self, cause: int, timeout: float) -> bool:
        """Whether the reply to ``cause`` was delivered within ``timeout`` seconds."""
        with self.changed:
            self.changed.wait_for(
                lambda: cause in self.delivered or self.failure is not None, timeout
            )
            if self.failure is not None:
                raise CairnError(f"the bench frontend failed: {self.failure}")
            return cause in self.delivered


def run_mode(
    *,
    broker_url: str | None,
    home: Path,
    replies: int,
    concurrency: int,
    delta_ms: float,
    interval: float | None = None,
    updates: int | None = None,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> StreamFigures:
    """Send ``replies`` messages (after a warm-up of two) from ``concurrency`` people each
    waiting for its answer, and measure how their answers streamed."""
    own = {
        "CAIRN_LLM_OFFLINE_DELAY": str(delta_ms / 1000),
        # Spelled out, so that the caller's environment cannot point either side elsewhere.
        "CAIRN_DATABASE_URL": f"sqlite:///{home / 'cairn.db'}",
    }
    if broker_url:
        own |= {"CAIRN_BROKER_URL": broker_url, "CAIRN_REDIS_URL": broker_url}
    # The Slack frontend's throttle, as the caller configures it, unless options say otherwise.
    env = bench_env(home, own, passed=("CAIRN_SLACK_STREAM_INTERVAL", "CAIRN_SLACK_STREAM_UPDATES"))
    settings = load_settings(**{k: v for k, v in env.items() if k.startswith("CAIRN_")})
    if not broker_url:  # whatever the caller's environment says: this mode has no Redis
        settings = settings.model_copy(update={"broker_url": None, "redis_url": None})
    writer = BenchWriter(
        settings.slack.stream_interval if interval is None else interval,
        settings.slack.stream_updates if updates is None else updates,
        settings.slack.message_chars,
    )
    tenant = f"bench-stream-{uuid.uuid4().hex[:8]}"  # its pub/sub channel is its alone
    procs: list[subprocess.Popen[bytes]] = []
    pipeline = Pipeline.open(settings)
    stop = threading.Event()
    try:
        if broker_url:
            procs = start_workers(settings, env, home, workers)
        stats = RelayStats()
        dedupe = open_dedupe(settings, pipeline.rt.redis)
        relay = StreamRelay(
            pipeline.rt.streams, tenant, writer, pipeline.rt.db, dedupe, stats=stats
        )
        frontend = _Frontend(Outbox(pipeline.rt.db, PLATFORM), tenant, relay, writer)
        relay.start(stop)  # subscribed from here on: the workers' turns publish their text
        delivery = threading.Thread(target=frontend.run, args=(stop,), name="bench-delivery")
        delivery.daemon = True
        delivery.start()
        warm = _ask_all(pipeline, frontend, tenant, range(WARMUP), 1, None)
        # The warm-up's figures are dropped: they include loading models and first connections.
        for column in (stats.first_visible_ms, stats.delta_ms, stats.calls_per_reply):
            column.clear()
        causes = _ask_all(
            pipeline, frontend, tenant, range(WARMUP, WARMUP + replies), concurrency, progress
        )
        stop.set()
        relay.join(5)
        delivery.join(5)
        return _figures(frontend, writer, stats, warm, causes, delta_ms, procs, workers)
    finally:
        stop.set()
        stop_workers(procs)
        pipeline.close()


def _ask_all(
    pipeline: Pipeline,
    frontend: _Frontend,
    tenant: str,
    numbers: range,
    concurrency: int,
    progress: Callable[[int, int], None] | None,
) -> list[int | None]:
    """Ask each of ``numbers`` in a thread of its own, ``concurrency`` people at a time, each
    waiting for its answer; the causes (event rows) answered, None for those never answered."""
    done = itertools.count(1)
    lock = threading.Lock()

    def ask(n: int) -> int | None:
        result = pipeline.accept(
            ChatEvent(
                platform=PLATFORM,
                tenant=tenant,
                channel="bench",
                thread=f"r{n}",
                user="bench",
                text=QUESTION,
                event_id=uuid.uuid4().hex,
            )
        )
        if result.event_row is None:
            raise CairnError(f"the bench's message {n} was not taken in ({result.admission})")
        answered = frontend.wait(result.event_row, _REPLY_TIMEOUT)
        if progress is not None:
            with lock:
                progress(next(done), len(numbers))
        return result.event_row if answered else None

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bench-person") as pool:
        return list(pool.map(ask, numbers))


def _figures(
    frontend: _Frontend,
    writer: BenchWriter,
    stats: RelayStats,
    warm: list[int | None],
    causes: list[int | None],
    delta_ms: float,
    procs: list[subprocess.Popen[bytes]],
    workers: int,
) -> StreamFigures:
    answered = [c for c in causes if c is not None]
    delivered = [frontend.delivered[c] for c in answered]
    calls = [writer.calls.get(c, 0) for c in answered]
    # Correct or not counts for every reply, the warm-up's too.
    every = [frontend.delivered[c] for c in [*warm, *causes] if c is not None]
    return StreamFigures(
        replies=len(causes),
        streamed=sum(d.streamed for d in delivered),
        lost=len(causes) - len(answered) + sum(c is None for c in warm),
        errors=sum(d.error for d in every),
        first_visible_ms=percentiles(list(stats.first_visible_ms), (0.5, 0.95, 0.99), digits=2),
        added_ms_per_delta=percentiles(list(stats.delta_ms), (0.5, 0.95, 0.99), digits=2),
        deltas=len(stats.delta_ms),
        platform_calls_per_reply={
            "max": max(calls, default=0),
            "mean": round(fmean(calls), 2) if calls else 0.0,
        },
        final_equals_full=bool(every)
        and all(d.equal for d in every)
        and not any(c is None for c in [*warm, *causes]),
        stream_interval_s=writer.interval,
        stream_updates=writer.max_updates,
        delta_delay_ms=delta_ms,
        workers=f"{len(procs)} `cairn worker` process(es)" if procs else "in-process threads",
    )


def bench_stream(
    modes: tuple[Mode, ...],
    *,
    replies: int,
    concurrency: int,
    delta_ms: float,
    redis_url: str,
    interval: float | None = None,
    updates: int | None = None,
    workers: int = 1,
    quiet: bool = False,
) -> dict[str, Any]:
    """The figures of each of ``modes``, each on a fresh CAIRN_HOME (SQLite). The Redis mode
    raises CairnError when Redis is unreachable, or, asked for with the in-process one, is
    reported as ``{"skipped": why}``."""
    results: dict[str, Any] = {}
    for mode in modes:
        broker = redis_url if mode == "redis" else None
        if broker is not None:
            why = _unreachable(broker)
            if why is not None:
                if len(modes) == 1:
                    raise CairnError(why)
                _say(f"{_label(mode)}: skipped, {why}")
                results[mode] = {"skipped": why}
                continue

        def progress(n: int, total: int, label: str = _label(mode)) -> None:
            # About ten lines a run, whatever its size: enough to see it move.
            if not quiet and (n == total or n % max(1, total // 10) == 0):
                _say(f"{label}: {n}/{total} replies")

        with tempfile.TemporaryDirectory(prefix=f"cairn-bench-stream-{mode}-") as home:
            if not quiet:
                how = "`cairn worker` behind Redis" if broker else "worker threads"
                _say(f"{_label(mode)}: starting ({how})")
            figures = run_mode(
                broker_url=broker,
                home=Path(home),
                replies=replies,
                concurrency=concurrency,
                delta_ms=delta_ms,
                interval=interval,
                updates=updates,
                workers=workers,
                progress=progress,
            )
        results[mode] = {k: getattr(figures, k) for k in StreamFigures.__dataclass_fields__}
    return results


def _unreachable(url: str) -> str | None:
    """Why Redis at ``url`` cannot serve the bench; None when it answers."""
    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        return (
            f"cannot reach Redis at {mask_url(url)} ({exc}); start one, or name another with "
            "--redis-url, or run --mode in-process"
        )
    finally:
        client.close()
    return None


def _label(mode: str) -> str:
    return "in-process" if mode == "in_process" else mode


def _say(line: str) -> None:
    click.echo(f"bench stream {line}", err=True)


def _text(results: dict[str, Any]) -> list[str]:
    lines = []
    for mode, f in results.items():
        if "skipped" in f:
            lines.append(f"{_label(mode):<10}  skipped: {f['skipped']}")
            continue
        first, delta, calls = (
            f["first_visible_ms"],
            f["added_ms_per_delta"],
            f["platform_calls_per_reply"],
        )
        lines.append(
            f"{_label(mode):<10}  {f['replies']} replies ({f['streamed']} streamed, "
            f"{f['lost']} lost, {f['errors']} errors)  "
            f"first visible p50 {first['p50']:.1f} ms  p95 {first['p95']:.1f} ms  "
            f"added per delta p95 {delta['p95']:.2f} ms ({f['deltas']} deltas)  "
            f"platform calls per reply max {calls['max']} (mean {calls['mean']:.1f})  "
            f"final = full: {'yes' if f['final_equals_full'] else 'NO'}"
        )
    return lines


@click.command("stream")
@click.option(
    "--replies",
    default=40,
    type=click.IntRange(1, 10_000),
    show_default=True,
    help="Replies measured per mode (after two that warm up).",
)
@click.option(
    "--concurrency",
    default=4,
    type=click.IntRange(1, 256),
    show_default=True,
    help="People writing at once, each waiting for its answer before the next message.",
)
@click.option(
    "--mode",
    type=click.Choice(["both", "in-process", "redis"]),
    default="both",
    show_default=True,
    help="Which modes to run.",
)
@click.option(
    "--delta-ms",
    default=50.0,
    type=FiniteRange(min=0, max=5000),
    show_default=True,
    help="How long the offline model takes to write each word group (CAIRN_LLM_OFFLINE_DELAY).",
)
@click.option(
    "--interval",
    type=FiniteRange(min=0.05, max=60),
    help="Least seconds between two updates of a reply [default: Slack's, "
    "CAIRN_SLACK_STREAM_INTERVAL, 1.0].",
)
@click.option(
    "--updates",
    type=click.IntRange(min=1, max=1000),
    help="Most updates of one message before its final edit [default: Slack's, "
    "CAIRN_SLACK_STREAM_UPDATES, 60].",
)
@click.option(
    "--workers",
    default=1,
    type=click.IntRange(1, 32),
    show_default=True,
    help="`cairn worker` processes in the Redis mode (4 threads each).",
)
@click.option(
    "--redis-url",
    default=DEFAULT_REDIS_URL,
    show_default=True,
    help="Redis for the Redis mode's broker and streams. Use a database no live Cairn uses: "
    "the bench's workers take tasks from its queue (nothing is flushed).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def stream_command(
    replies: int,
    concurrency: int,
    mode: str,
    delta_ms: float,
    interval: float | None,
    updates: int | None,
    workers: int,
    redis_url: str,
    as_json: bool,
) -> None:
    """Measure answers as they are written: how soon they show, and at what cost.

    \b
    Real turns go from Pipeline.accept to workers (in-process threads; `cairn worker`
    processes behind Redis, pieces crossing Redis pub/sub) and back to a stream relay
    with the Slack frontend's throttle, writing to a stand-in platform that answers at
    once. The offline model writes its answer a word group every --delta-ms. Per mode:
    \b
      first_visible_ms       from the model's first text delta to the frontend's first
                             platform call for that reply (p50, p95, p99)
      added_ms_per_delta     from a worker publishing a delta to the relay taking it in:
                             what streaming adds to each piece (p50, p95, p99)
      platform_calls_per_reply  calls made to show one reply, the final edit included
                             (max, mean): what the throttle holds down
      final_equals_full      every final message shows exactly the reply's full text
    \b
    The two warm-up replies of each mode are not measured. Examples:
      cairn bench stream --json
      cairn bench stream --mode in-process --replies 100 --concurrency 8
      cairn bench stream --interval 0.25    # a faster throttle: more calls
    """
    modes = _MODES[mode]
    try:
        results = bench_stream(
            modes,
            replies=replies,
            concurrency=concurrency,
            delta_ms=delta_ms,
            redis_url=redis_url,
            interval=interval,
            updates=updates,
            workers=workers,
        )
    except CairnError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(results))
        return
    for line in _text(results):
        click.echo(line)
