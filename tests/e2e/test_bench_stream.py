"""`cairn bench stream`: both modes stream real turns and report the figures issue 18 names.

No timing is asserted (this machine's load decides it): the shape, that every final message
shows the full reply, that the platform calls stay within the throttle's bounds, and that the
latencies are real measurements.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cairn.bench.stream import run_mode
from tests.e2e.test_faults import CAIRN


def _check(figures: dict[str, Any], replies: int, updates: int) -> None:
    assert figures["replies"] == replies
    assert figures["lost"] == 0
    assert figures["errors"] == 0
    assert figures["streamed"] == replies  # each answer showed while it was written
    assert figures["final_equals_full"] is True
    first = figures["first_visible_ms"]
    assert set(first) >= {"p50", "p95"}
    assert 0 < first["p50"] <= first["p95"]
    assert figures["added_ms_per_delta"]["p95"] >= 0
    # Some twenty deltas per answer (the offline model's help text, four words at a time).
    assert figures["deltas"] >= 10 * replies
    calls = figures["platform_calls_per_reply"]
    # Streamed: opened, then edited into the final text at least; one message, so at most
    # its opening, its capped updates and the final edit.
    assert 2 <= calls["mean"] <= calls["max"] <= updates + 2


@pytest.mark.slow
@pytest.mark.redis
def test_the_stream_bench_reports_both_modes_side_by_side(redis_url: str) -> None:
    done = subprocess.run(
        [
            *CAIRN,
            "bench",
            "stream",
            "--replies",
            "3",
            "--concurrency",
            "2",
            "--delta-ms",
            "20",
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
    assert set(results) == {"in_process", "redis"}
    for figures in results.values():
        _check(figures, 3, updates=60)  # Slack's default cap
        assert figures["stream_interval_s"] == 1.0
    assert "3/3 replies" in done.stderr  # progress goes to stderr, the JSON alone to stdout


def test_a_faster_throttle_updates_the_message_while_it_is_written(tmp_path: Path) -> None:
    # 20 deltas 30 ms apart stream for about 0.6 s: at an update every 0.1 s, at most 3 of
    # them, the message is opened, updated and finally edited.
    figures = run_mode(
        broker_url=None,
        home=tmp_path,
        replies=2,
        concurrency=1,
        delta_ms=30,
        interval=0.1,
        updates=3,
    )
    as_dict = {k: getattr(figures, k) for k in figures.__dataclass_fields__}
    _check(as_dict, 2, updates=3)
    assert figures.platform_calls_per_reply["max"] >= 3  # at least one update in between
    assert figures.stream_updates == 3
