"""``cairn bench feedback`` run small, as a person would run it: the JSON it prints and the
issue's targets (no retracted memory in a top 5, bad memories gone after two thumbs down)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cairn.cli import main


def test_bench_feedback_prints_the_four_figures_and_meets_the_targets(clean_env: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["bench", "feedback", "--sessions", "60", "--seed", "1", "--json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    assert list(figures) == [
        "bad_in_top5_before",
        "bad_in_top5_after",
        "retracted_in_top5",
        "max_negative_reactions_to_drop",
    ]
    assert isinstance(figures["bad_in_top5_before"], float)
    assert isinstance(figures["bad_in_top5_after"], float)
    assert isinstance(figures["retracted_in_top5"], int)
    assert isinstance(figures["max_negative_reactions_to_drop"], int)
    assert figures["retracted_in_top5"] == 0
    assert figures["max_negative_reactions_to_drop"] <= 2
    assert figures["bad_in_top5_after"] < figures["bad_in_top5_before"] / 4
    assert not (clean_env / "cairn.db").exists()  # a scratch store, never CAIRN_HOME's


def test_bench_feedback_explains_itself_without_json(clean_env: Path) -> None:
    result = CliRunner().invoke(
        main, ["bench", "feedback", "--sessions", "5", "--seed", "2"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert "bad memories in the top 5, before feedback:" in result.output
    assert "retracted memories seen in a top 5:" in result.output
