"""Ranking of recalled memories: fusion of lexical and dense candidates, then weighting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cairn.core.settings import MemorySettings
from cairn.memory.ranking import Standing, fuse, fuse_scores, modifier, neighbours_boost

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _standing(**changes: object) -> Standing:
    base: dict[str, object] = {
        "last_touched": NOW,
        "validity": 0.0,
        "usefulness": 0.0,
        "disputes": 0,
        "tier": "hot",
        "same_place": False,
    }
    base.update(changes)
    return Standing(**base)  # type: ignore[arg-type]


def test_recency_nudges_but_never_overrides_relevance() -> None:
    w = MemorySettings(weight_recency=0.1, half_life_days=30)
    fresh = modifier(w, _standing(), NOW)
    month = modifier(w, _standing(last_touched=NOW - timedelta(days=30)), NOW)
    ancient = modifier(w, _standing(last_touched=NOW - timedelta(days=3000)), NOW)
    assert fresh == 1.0
    assert month == pytest.approx(0.95)  # half the recency share after one half-life
    assert 0.9 <= ancient < month


def test_feedback_tier_and_place_move_the_modifier_as_weighted() -> None:
    w = MemorySettings()
    neutral = modifier(w, _standing(), NOW)
    assert modifier(w, _standing(validity=2.0), NOW) > neutral
    assert modifier(w, _standing(usefulness=1.0), NOW) > neutral
    assert modifier(w, _standing(disputes=2), NOW) < neutral
    assert modifier(w, _standing(tier="cold"), NOW) == neutral * w.weight_cold
    assert modifier(w, _standing(same_place=True), NOW) == neutral * (1 + w.weight_scope)
    assert modifier(MemorySettings(weight_validity=0), _standing(validity=5.0), NOW) == neutral
    assert modifier(w, _standing(named=True), NOW) == neutral * (1 + w.weight_speaker)
    assert modifier(MemorySettings(weight_speaker=0), _standing(named=True), NOW) == neutral


def test_score_fusion_keeps_margins_and_keeps_proposals_above_absentees() -> None:
    fused = fuse_scores([(0.6, [(1, 9.0), (2, 3.0)]), (0.4, [(2, 0.9), (3, 0.5)])])
    assert fused == pytest.approx({1: 0.6, 2: 0.6 * 0.1 + 0.4, 3: 0.4 * 0.1})


def test_rank_fusion_counts_ranks_only() -> None:
    fused = fuse([(1.0, [1, 2]), (1.0, [2, 3])])
    assert max(fused, key=fused.__getitem__) == 2


def test_neighbours_lend_a_share_of_their_relevance() -> None:
    boosted = neighbours_boost({1: 1.0, 5: 0.2}, {1: [2], 2: [1], 5: [6], 6: [5]}, 0.5)
    assert boosted == {1: 1.0, 2: 0.5, 5: 0.2, 6: 0.1}
    assert neighbours_boost({1: 1.0}, {1: [2], 2: [1]}, 0.0) == {1: 1.0}
