"""The one percentile definition the benchmarks share."""

from __future__ import annotations

from cairn.core.stats import percentiles


def test_p50_is_the_median_and_p95_the_value_at_its_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentiles(values) == {"p50": 50.5, "p95": 96.0}


def test_extra_shares_and_rounding() -> None:
    assert percentiles([1.234, 2.345, 3.456], (0.5, 0.99), digits=1) == {"p50": 2.3, "p99": 3.5}


def test_no_values_give_zeros() -> None:
    assert percentiles([], (0.5, 0.95, 0.99)) == {"p50": 0.0, "p95": 0.0, "p99": 0.0}
