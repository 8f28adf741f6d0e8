"""Column types the schema shares: timestamps that are UTC everywhere, and text and JSON that
pass the gate (cairn.core.gate) on their way into the database.

SQLite keeps no time zone: SQLAlchemy writes a datetime's wall-clock fields and reads them
back naive. PostgreSQL's ``timestamptz`` hands datetimes back in the connection's time zone.
:class:`UTCDateTime` makes both the same: what is written is stored as UTC, and every datetime
read is timezone-aware UTC, so no caller has to fix up what a database returned.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from cairn.core.gate import gated, gated_data

__all__ = ["GatedJSON", "GatedText", "UTCDateTime"]


class UTCDateTime(TypeDecorator[datetime]):
    """``DateTime(timezone=True)`` in the schema; timezone-aware UTC in Python.

    A naive datetime written is taken as UTC (the schema stores UTC only); an aware one is
    converted to UTC first, so SQLite, which drops the zone, keeps the right instant.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value)

    def result_processor(self, dialect: Dialect, coltype: Any) -> Any:
        """On SQLite, a value as SQLAlchemy writes it there ("2026-12-07 03:00:00.123456") is
        read in one step, straight to UTC; anything else the usual way.

        Recall reads a few timestamps of up to a hundred memories on every turn. Parsing,
        then attaching the zone with ``replace``, cost about 2.8 us a value on this
        interpreter; one ``fromisoformat`` with the zone appended costs 0.45.
        """
        chained = super().result_processor(dialect, coltype)
        if dialect.name != "sqlite":
            return chained

        def process(value: Any) -> datetime | None:
            if value is None:
                return None
            if type(value) is str and len(value) == _SQLITE_CHARS and value[10] == " ":
                with contextlib.suppress(ValueError):
                    return datetime.fromisoformat(value + "+00:00")
            return chained(value) if chained is not None else as_utc(value)

        return process


# The length of a datetime as SQLAlchemy's SQLite dialect stores it, microseconds included.
_SQLITE_CHARS = len("2026-12-07 03:00:00.123456")


def as_utc(value: datetime) -> datetime:
    """``value`` as timezone-aware UTC; a naive value is taken to be UTC already."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class GatedText(TypeDecorator[str]):
    """``Text`` in the schema, for what people wrote, the bot said or a tool returned: every
    value bound to it passes :func:`cairn.core.gate.gated` first (credentials masked, only
    what people see), whatever path wrote it, ORM or Core. An identifier column is a bounded
    ``String`` instead; tests/unit/test_gate_paths.py holds every other unbounded text or
    JSON column to this."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else gated(value)


class GatedJSON(TypeDecorator[Any]):
    """``JSON`` in the schema whose every string (keys too) passes the gate before it is
    written, as :class:`GatedText` does for text."""

    impl = JSON
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return None if value is None else gated_data(value)
