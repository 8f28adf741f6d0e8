"""Calendar periods named in a query: explicit days and months only, never guessed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cairn.memory.periods import Period, mentioned_periods


def _days(text: str) -> list[tuple[str, str]]:
    return [(p.start.date().isoformat(), p.end.date().isoformat()) for p in mentioned_periods(text)]


@pytest.mark.parametrize(
    "text",
    [
        "What did Nate make on 9 November, 2022?",
        "what happened on November 9, 2022",
        "on the 9th of November 2022",
        "Nov 9th 2022?",
        "the deploy of 2022-11-09",
    ],
)
def test_a_named_day_covers_that_day_with_a_day_either_side(text: str) -> None:
    assert _days(text) == [("2022-11-08", "2022-11-11")]


def test_a_named_month_covers_the_whole_month_and_december_ends_at_new_year() -> None:
    assert _days("what broke in June 2022 and in December 2023?") == [
        ("2022-06-01", "2022-07-01"),
        ("2023-12-01", "2024-01-01"),
    ]


def test_the_month_of_a_full_date_is_not_counted_twice() -> None:
    assert len(mentioned_periods("on 8th December, 2023")) == 1


@pytest.mark.parametrize(
    "text",
    [
        "what did we decide in December?",  # no year: ambiguous
        "what did we decide recently",
        "we may decide 2023 budgets later",  # "may" the verb, not a month with a day
        "release 2.30 on 2022-13-40",
        "",
    ],
)
def test_no_explicit_date_means_no_period(text: str) -> None:
    assert mentioned_periods(text) == ()


def test_an_impossible_day_falls_back_to_its_month() -> None:
    assert _days("on 31 February 2023") == [("2023-02-01", "2023-03-01")]


def test_a_period_holds_naive_utc_and_aware_datetimes_alike() -> None:
    june = Period(datetime(2022, 6, 1, tzinfo=UTC), datetime(2022, 7, 1, tzinfo=UTC))
    assert datetime(2022, 6, 30, 23, 59) in june
    assert datetime(2022, 7, 1, tzinfo=UTC) not in june
    assert "2022-06-15" not in june
