"""Prometheus metrics: what operators watch, served on ``/metrics``.

One registry per process; ``cairn run`` and ``cairn worker`` serve it on CAIRN_METRICS_PORT
when that is set, and HTTP frontends can mount :func:`exposition` on their own server.

A worker with a forking pool runs its tasks in child processes, whose counts its own registry
never sees. With PROMETHEUS_MULTIPROC_DIR set (an empty folder, wiped at each deployment, set
before the processes start), every process writes its metrics there and ``/metrics`` sums the
folder: prometheus_client's multiprocess mode.
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
    start_http_server,
)

__all__ = [
    "APPROVED_CALLS",
    "DEAD_LETTERS",
    "EVENTS",
    "LLM_COST",
    "LLM_TOKENS",
    "PRESSURE",
    "QUEUE_LATENCY",
    "REACTIONS",
    "RECALL_LATENCY",
    "REGISTRY",
    "TASK_DURATION",
    "exposition",
    "exposition_registry",
    "multiprocess_dir",
    "process_exited",
    "record_llm_usage",
    "serve_metrics",
]

REGISTRY = CollectorRegistry(auto_describe=True)

EVENTS = Counter(
    "cairn_events",
    "Chat events taken in, by platform, type and what became of them (queued, duplicate...)",
    ["platform", "type", "admission"],
    registry=REGISTRY,
)
QUEUE_LATENCY = Histogram(
    "cairn_queue_latency_seconds",
    "Time from an event being logged to a worker starting on it",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
    registry=REGISTRY,
)
TASK_DURATION = Histogram(
    "cairn_task_duration_seconds",
    "Time to handle one event (a turn with its LLM calls, or a reaction)",
    ["kind"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
    registry=REGISTRY,
)
LLM_TOKENS = Counter(
    "cairn_llm_tokens",
    "Tokens used by the language model, by model and kind (input, output, cache_read, ...)",
    ["model", "kind"],
    registry=REGISTRY,
)
LLM_COST = Counter(
    "cairn_llm_cost_usd",
    "Estimated LLM cost in US dollars, from CAIRN_LLM_PRICES",
    ["model"],
    registry=REGISTRY,
)
RECALL_LATENCY = Histogram(
    "cairn_recall_latency_seconds",
    "Time to recall memories for one query",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1),
    registry=REGISTRY,
)
PRESSURE = Counter(
    "cairn_context_pressure_events",
    "Context-engine pressure events, by level (compaction, emergency, safety_net)",
    ["level"],
    registry=REGISTRY,
)
REACTIONS = Counter(
    "cairn_reactions",
    "Reactions handled, by effect (confirm, retract, useful, not_useful, ignored)",
    ["effect"],
    registry=REGISTRY,
)
APPROVED_CALLS = Counter(
    "cairn_tool_decisions",
    "Tool calls held for approval, by what became of them (denied, expired, or the outcome "
    "of the approved call: ok, error, timeout, crashed, unknown...)",
    ["outcome"],
    registry=REGISTRY,
)
DEAD_LETTERS = Counter(
    "cairn_dead_letters", "Events given up on and kept as dead letters", registry=REGISTRY
)


def record_llm_usage(
    model: str,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_read: int,
    cache_write: int,
    prices: dict[str, list[float]],
) -> None:
    """Count one call's tokens, and its cost when the model has a price (USD per MTok:
    input, output, cache read, cache write)."""
    counts = {
        "input": input_tokens,
        "output": output_tokens,
        "cache_read": cache_read,
        "cache_write": cache_write,
    }
    for kind, value in counts.items():
        if value:
            LLM_TOKENS.labels(model, kind).inc(value)
    price = prices.get(model)
    if price is None:
        price = next((p for name, p in prices.items() if model.startswith(name)), None)
    if price is not None and len(price) == 4:
        cost = sum(n * p for n, p in zip(counts.values(), price, strict=True)) / 1_000_000
        LLM_COST.labels(model).inc(cost)


def multiprocess_dir() -> str | None:
    """The folder of prometheus_client's multiprocess mode, when it is on."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def exposition_registry() -> CollectorRegistry:
    """What ``/metrics`` shows: this process's registry, or the sum over every process that
    writes to PROMETHEUS_MULTIPROC_DIR."""
    folder = multiprocess_dir()
    if folder is None:
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=folder)  # type: ignore[no-untyped-call]
    return registry


def exposition() -> tuple[bytes, str]:
    """The metrics in Prometheus' text format, and its content type."""
    return generate_latest(exposition_registry()), CONTENT_TYPE_LATEST


def serve_metrics(port: int, host: str = "0.0.0.0") -> None:  # noqa: S104  (a server's job)
    """Serve ``/metrics`` on ``host:port`` from a background thread."""
    start_http_server(port, addr=host, registry=exposition_registry())


def process_exited(pid: int) -> None:
    """Tell multiprocess mode that a (pool) process is gone; nothing to do without it."""
    if multiprocess_dir() is not None:
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
