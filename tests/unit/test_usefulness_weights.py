"""Usefulness feedback in ranking: praise nudges, each net "not useful" cuts the rank hard."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cairn.core.settings import MemorySettings
from cairn.memory.ranking import Standing, modifier

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _with(usefulness: float) -> float:
    standing = Standing(NOW, 0.0, usefulness, 0, "hot", same_place=False)
    return modifier(MemorySettings(weight_usefulness=0.05, weight_unhelpful=0.85), standing, NOW)


def test_praise_nudges_the_rank_by_at_most_the_usefulness_weight() -> None:
    assert 1.0 < _with(1.0) < _with(10.0) <= 1.05


def test_each_net_thumbs_down_multiplies_the_rank_by_one_minus_the_weight() -> None:
    assert _with(-1.0) == pytest.approx(0.15)
    assert _with(-2.0) == pytest.approx(0.0225)


def test_two_thumbs_down_rank_below_any_untouched_candidate_a_retriever_proposed() -> None:
    # Fusion gives the last candidate of a list 0.1 of its weight (dense: 0.4 by default);
    # the best possible fused relevance is 1.0.
    weakest_untouched = 0.1 * MemorySettings().weight_dense * _with(0.0)
    assert 1.0 * _with(-2.0) < weakest_untouched
