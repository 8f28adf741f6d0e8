"""Percentiles as every benchmark reports them (one definition, so figures compare)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["percentiles"]


def percentiles(
    values: Sequence[float], shares: Sequence[float] = (0.5, 0.95), *, digits: int = 3
) -> dict[str, float]:
    """``{"p50": .., "p95": ..}`` of ``values``, rounded to ``digits``; all zero for no values.

    p50 is the median; any other share is numpy's ``higher`` quantile, the smallest value at or
    above the share's rank (for p95 and p99, the value at rank ``int(share * n)``).
    """
    data = np.asarray(values, dtype=np.float64)
    result: dict[str, float] = {}
    for share in shares:
        if data.size == 0:
            value = 0.0
        elif share == 0.5:
            value = float(np.median(data))
        else:
            value = float(np.quantile(data, share, method="higher"))
        result[f"p{round(share * 100)}"] = round(value, digits)
    return result
