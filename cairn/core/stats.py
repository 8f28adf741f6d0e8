"""Percentiles as every benchmark reports them (one definition, so figures compare)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

__all__ = ["percentiles"]


def percentiles(
    values: Sequence[float], shares: Sequence[float] = (0.5, 0.95), *, digits: int = 3
) -> dict[str, float]:
    """``{"p50": .., "p95": ..}`` of ``values``: the median for p50, else the value at rank
    ``int(share * n)``; all zero for no values."""
    ordered = sorted(values)
    result: dict[str, float] = {}
    for share in shares:
        key = f"p{round(share * 100)}"
        if not ordered:
            result[key] = 0.0
        elif share == 0.5:
            result[key] = round(statistics.median(ordered), digits)
        else:
            result[key] = round(ordered[min(len(ordered) - 1, int(share * len(ordered)))], digits)
    return result
