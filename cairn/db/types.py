"""Column types the schema shares: timestamps that are UTC everywhere, and text and JSON that
pass the gate (cairn.core.gate) on their way into the database.

SQLite keeps no time zone: SQLAlchemy writes a datetime's wall-clock fields and reads them
back naive. PostgreSQL's ``timestamptz`` hands datetimes back in the connection's time zone.
:class:`UTCDateTime` makes both the same: what is written is stored as UTC, and every datetime
read is timezone-aware UTC, so no caller has to fix up what a database returned.
"""

from __future__ import annotations

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
