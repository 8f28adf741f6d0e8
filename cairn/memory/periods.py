"""Calendar periods a query names ("on 9 November, 2022", "in June 2022", "2023-06-03").

Recall uses them to prefer memories written at the time a question asks about: a question
dated by the calendar points at what was said then, which neither lexical nor dense similarity
can see. Only explicit dates count; relative words ("recently", "last week") are left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["MONTHS", "Period", "mentioned_periods", "without_dates"]

# The months' names in order (also read by cairn.memory.restatement).
MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
_MONTHS = {name: number for number, name in enumerate(MONTHS, 1)}
_MONTH = "(" + "|".join(_MONTHS) + r"|(?:jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\.?)"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s*{_YEAR}\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+{_DAY},?\s*{_YEAR}\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.I)
_ISO_DATE = re.compile(r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b")

# A named day also covers the day either side: time zones, and "that night" after a late chat.
_DAY_MARGIN = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class Period:
    """A half-open span of time, [start, end), in UTC."""

    start: datetime
    end: datetime

    def __contains__(self, when: object) -> bool:
        if not isinstance(when, datetime):
            return False
        aware = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
        return self.start <= aware < self.end


def _month(name: str) -> int:
    key = name.lower().rstrip(".")
    return next(number for full, number in _MONTHS.items() if full.startswith(key[:3]))


def _day(year: int, month: int, day: int) -> Period | None:
    try:
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:  # "31 February": not a date, so not a period
        return None
    return Period(start - _DAY_MARGIN, start + timedelta(days=1) + _DAY_MARGIN)


def mentioned_periods(text: str) -> tuple[Period, ...]:
    """The calendar days and months ``text`` names explicitly, in order of appearance.

    A day ("9 November, 2022", "November 9th 2022", "2022-11-09") gives that day with a day's
    margin either side; a month with a year ("June 2022") gives the whole month. Dates without
    a year are ambiguous and ignored. Never raises.
    """
    found: list[tuple[int, Period]] = []
    taken: list[tuple[int, int]] = []
    for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy")):
        for m in pattern.finditer(text):
            day, month = (m[1], m[2]) if order == "dmy" else (m[2], m[1])
            period = _day(int(m[3]), _month(month), int(day))
            if period is not None:
                found.append((m.start(), period))
                taken.append(m.span())
    for m in _ISO_DATE.finditer(text):
        if 1 <= int(m[2]) <= 12 and (period := _day(int(m[1]), int(m[2]), int(m[3]))):
            found.append((m.start(), period))
            taken.append(m.span())
    for m in _MONTH_YEAR.finditer(text):
        if any(start <= m.start() < end for start, end in taken):
            continue  # the month of a full date already counted
        year, month = int(m[2]), _month(m[1])
        start = datetime(year, month, 1, tzinfo=UTC)
        end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
        found.append((m.start(), Period(start, end)))
    return tuple(dict.fromkeys(period for _, period in sorted(found, key=lambda f: f[0])))


def without_dates(text: str) -> str:
    """``text`` with the dates :func:`mentioned_periods` reads taken out.

    Once a date has become a period, its digits are noise to lexical search: "on 4 March" would
    otherwise match "node 4".
    """
    for pattern in (_DAY_MONTH_YEAR, _MONTH_DAY_YEAR, _ISO_DATE, _MONTH_YEAR):
        text = pattern.sub(" ", text)
    return " ".join(text.split())
