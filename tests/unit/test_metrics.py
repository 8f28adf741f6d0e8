"""Metrics: token and cost accounting, and the /metrics endpoint."""

from __future__ import annotations

import socket
import urllib.request

from cairn.core.metrics import REGISTRY, record_llm_usage, serve_metrics

PRICES = {"claude-sonnet-4": [3.0, 15.0, 0.3, 3.75]}


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_tokens_are_counted_by_kind_and_cost_priced_by_model_prefix() -> None:
    before = _value("cairn_llm_cost_usd_total", model="claude-sonnet-4-6")
    before_in = _value("cairn_llm_tokens_total", model="claude-sonnet-4-6", kind="input")
    record_llm_usage(
        "claude-sonnet-4-6",
        input_tokens=1_000_000,
        output_tokens=100_000,
        cache_read=0,
        cache_write=0,
        prices=PRICES,
    )
    assert _value("cairn_llm_tokens_total", model="claude-sonnet-4-6", kind="input") == (
        before_in + 1_000_000
    )
    assert _value("cairn_llm_cost_usd_total", model="claude-sonnet-4-6") - before == 4.5


def test_a_model_without_a_price_counts_tokens_but_no_cost() -> None:
    record_llm_usage(
        "offline", input_tokens=10, output_tokens=5, cache_read=0, cache_write=0, prices=PRICES
    )
    assert _value("cairn_llm_tokens_total", model="offline", kind="output") >= 5
    assert _value("cairn_llm_cost_usd_total", model="offline") == 0.0


def test_the_metrics_endpoint_serves_prometheus_text() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve_metrics(port, host="127.0.0.1")
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for name in (
        "cairn_events_total",
        "cairn_queue_latency_seconds",
        "cairn_dead_letters_total",
        "cairn_llm_tokens_total",
        "cairn_reactions_total",
    ):
        assert name in body
