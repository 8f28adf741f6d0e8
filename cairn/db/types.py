"""Column types the schema shares.

SQLite keeps no time zone: SQLAlchemy writes a datetime's wall-clock fields and reads them
back naive. PostgreSQL's ``timestamptz`` hands datetimes back in the connection's time zone.
:class:`UTCDateTime` makes both the same: what is written is stored as UTC, and every datetime
read is timezone-aware UTC, so no caller has to fix up what a database returned.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

__all__ = ["UTCDateTime"]


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
