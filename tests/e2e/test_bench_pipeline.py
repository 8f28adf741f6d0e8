"""`cairn bench pipeline`: both modes run end to end and report the figures the issue names."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.e2e.test_faults import CAIRN


@pytest.mark.slow
def test_the_pipeline_bench_reports_both_modes_with_nothing_lost(redis_url: str) -> None:
    done = subprocess.run(
        [
            *CAIRN,
            "bench",
            "pipeline",
            "--threads",
            "6",
            "--messages",
            "3",
            "--workers",
            "1",
            "--senders",
            "2",
            "--rate",
            "40",
            "--redis-url",
            redis_url,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    results = json.loads(done.stdout)
    assert set(results) == {"redis", "inprocess"}
    for figures in results.values():
        assert figures["messages"] == 18
        assert figures["order_violations"] == 0
        assert figures["lost"] == 0
        assert figures["duplicated"] == 0
        # Paced at 40 messages/s: 18 messages take at least 17/40 s from first to last.
        assert 0 < figures["messages_per_s"] <= 45
        assert set(figures["latency_ms"]) == {"p50", "p95", "p99"}
