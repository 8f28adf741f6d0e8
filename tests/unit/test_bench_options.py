"""``cairn bench`` refuses absurd numbers as usage errors (exit 2) naming the option and its
bounds, before anything runs (issue 33): unbounded, they crashed or ran for ever."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cairn.commands.main import main

HUGE = "9" * 30


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["stream", "--replies", HUGE], "'--replies': 999999999999999999999999999999 is not "
         "in the range 1<=x<=10000"),
        (["stream", "--concurrency", "100000"], "'--concurrency': 100000 is not in the range "
         "1<=x<=256"),
        (["stream", "--workers", "0"], "'--workers': 0 is not in the range 1<=x<=32"),
        (["scale", "--queries", "1000000000"], "'--queries': 1000000000 is not in the range"),
        (["scale", "--memories", f"10,{HUGE}"], "'--memories': a number of memories must be a "
         "whole number from 1 to 10000000, not a number of 30 digits"),
        (["recall", "--k", "5,x"], "'--k': a cut-off must be a whole number from 1 to 1000, "
         "not 'x'"),
        (["context", "--budget", "4000,500"], "'--budget': a token budget must be a whole "
         "number from 1000 to 1000000, not 500"),
        (["context", "--seed", "-1"], "'--seed': -1 is not in the range 0<=x<=4294967295"),
        (["feedback", "--sessions", HUGE], "'--sessions': "),
        (["updates", "--facts", "10000000"], "'--facts': 10000000 is not in the range"),
        (["stream", "--delta-ms", "nan"], "'--delta-ms': 'nan' is not a finite number"),
        (["stream", "--interval", "NaN"], "'--interval': 'NaN' is not a finite number"),
        (["pipeline", "--threads", HUGE], "'--threads': 999999999999999999999999999999 is not "
         "in the range 1<=x<=100000"),
        (["pipeline", "--workers", "33"], "'--workers': 33 is not in the range 1<=x<=32"),
        (["pipeline", "--rate", "nan"], "'--rate': 'nan' is not a finite number"),
        (["pipeline", "--memories", "-1"], "'--memories': -1 is not in the range"),
    ],
)  # fmt: skip
def test_an_absurd_bench_number_is_a_usage_error_naming_the_option(
    args: list[str], said: str
) -> None:
    result = CliRunner().invoke(main, ["bench", *args])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for {said}" in result.output
    assert "Traceback" not in result.output


def test_comma_separated_bench_numbers_are_read_sorted_without_repeats() -> None:
    from cairn.commands.common import IntList

    assert IntList("a cut-off", 1, 1000).convert("10, 5,5,", None, None) == (5, 10)
