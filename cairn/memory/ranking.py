"""How recall orders memories: lexical and dense candidates fused by rank, then weighted.

Fusion is, by default, a weighted sum of min-max normalised lexical and dense scores
(``CAIRN_MEMORY_FUSION=score``); weighted reciprocal-rank fusion (``rrf``) is the alternative.
On LoCoMo, score fusion found 0.61 of the evidence in the top 5 where rank fusion found 0.51:
ranks throw away how far ahead the best candidate is. The fused relevance is then nudged,
never overridden, by recency decay, usefulness, validity, disputes, tier, scope, whether the
query names the memory's author (see :mod:`cairn.memory.speakers`) and whether a
newer value replaced a fact (see :mod:`cairn.memory.supersession`). Every
weight is a field of the memory settings (``settings.memory``, ``CAIRN_MEMORY_*``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cairn.core.settings import MemorySettings

__all__ = ["decay", "fuse", "fuse_scores", "modifier"]

RRF_K = 60


def fuse_scores(scored: Sequence[tuple[float, Sequence[tuple[int, float]]]]) -> dict[int, float]:
    """Weighted sum of min-max normalised scores: ``{id: score}`` in [0, sum of weights]."""
    fused: dict[int, float] = {}
    for weight, pairs in scored:
        if weight <= 0 or not pairs:
            continue
        low, high = min(v for _, v in pairs), max(v for _, v in pairs)
        span = high - low
        for memory_id, value in pairs:
            # The last candidate of a list still beats one the list did not propose at all.
            share = 0.1 + 0.9 * (value - low) / span if span > 0 else 1.0
            fused[memory_id] = fused.get(memory_id, 0.0) + weight * share
    return fused


def fuse(ranked: Sequence[tuple[float, Sequence[int]]]) -> dict[int, float]:
    """Weighted reciprocal-rank fusion of ranked id lists: ``{id: score}``, higher is better."""
    fused: dict[int, float] = {}
    for weight, ids in ranked:
        if weight <= 0:
            continue
        for rank, memory_id in enumerate(ids):
            fused[memory_id] = fused.get(memory_id, 0.0) + weight / (RRF_K + rank + 1)
    return fused


def decay(last_touched: datetime, now: datetime, half_life_days: float) -> float:
    """Exponential decay in [0, 1]: 1 when just touched, 0.5 after one half-life."""
    age_days = max(0.0, (now - last_touched).total_seconds() / 86400.0)
    return math.pow(0.5, age_days / half_life_days)


@dataclass(frozen=True, slots=True)
class Standing:
    """What recall knows of a memory besides its relevance."""

    last_touched: datetime
    validity: float
    usefulness: float
    disputes: int
    tier: str
    same_place: bool  # written in the channel or thread the question comes from
    untrusted: bool = False  # from an untrusted author and not yet confirmed by a person
    flagged: bool = False  # reads like an instruction, and not yet confirmed by another person
    stale: bool = False  # a fact's value that did not hold at the time asked about (or now)
    named: bool = False  # its author is named in the query (see cairn.memory.speakers)


def modifier(w: MemorySettings, standing: Standing, now: datetime) -> float:
    """The factor that multiplies a memory's fused relevance (1.0 is neutral)."""
    fresh = decay(standing.last_touched, now, w.half_life_days)
    factor = 1.0 - w.weight_recency + w.weight_recency * fresh
    factor *= 1.0 + w.weight_validity * math.tanh(standing.validity)
    if standing.usefulness >= 0:
        factor *= 1.0 + w.weight_usefulness * math.tanh(standing.usefulness)
    else:
        # Asymmetric on purpose: praise nudges, while each net "not useful" multiplies the rank
        # by 1 - unhelpful. At the default 0.85 two of them leave a memory at 0.0225 of its
        # relevance: below any untouched candidate a retriever proposed (fusion gives the last
        # one 0.1 of a weight of at least 0.4), so it leaves the top 5 (cairn bench feedback).
        factor *= math.pow(1.0 - w.weight_unhelpful, min(-standing.usefulness, 10.0))
    factor /= 1.0 + w.weight_disputes * max(0, standing.disputes)
    factor *= {"warm": w.weight_warm, "cold": w.weight_cold}.get(standing.tier, 1.0)
    if standing.same_place:
        factor *= 1.0 + w.weight_scope
    if standing.untrusted:
        factor *= w.weight_untrusted
    if standing.flagged:
        factor *= w.weight_flagged
    if standing.stale:
        factor *= w.weight_superseded
    if standing.named:
        factor *= 1.0 + w.weight_speaker
    return max(factor, 0.0)


def neighbours_boost(
    fused: Mapping[int, float], neighbours: Mapping[int, Sequence[int]], weight: float
) -> dict[int, float]:
    """Add to each memory ``weight`` x the best fused score of its conversational neighbours.

    An episodic turn rarely carries its whole meaning: the question it answers or the remark it
    follows sits in the turn before or after. Letting a turn borrow a share of its neighbours'
    relevance finds answers split over adjacent turns.
    """
    if weight <= 0:
        return dict(fused)
    boosted = dict(fused)
    for memory_id, around in neighbours.items():
        best = max((fused.get(n, 0.0) for n in around), default=0.0)
        if best > 0:
            boosted[memory_id] = boosted.get(memory_id, 0.0) + weight * best
    return boosted
