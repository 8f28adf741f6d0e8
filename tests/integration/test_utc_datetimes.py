"""Every datetime read from the database is timezone-aware UTC (cairn.db.types.UTCDateTime).

SQLite keeps no zone and PostgreSQL answers in the connection's zone; callers compare what
they read with ``utcnow()`` and never fix it up themselves.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import text
from sqlmodel import col, select

from cairn.db import Database
from cairn.db.models import Tenant

PLUS_TWO = timezone(timedelta(hours=2))


def test_what_is_written_reads_back_as_the_same_instant_in_utc(database: Database) -> None:
    with database.session() as s:
        s.add(
            Tenant(
                id="aware", platform="console", created_at=datetime(2024, 3, 4, 12, tzinfo=PLUS_TWO)
            )
        )
        s.add(Tenant(id="naive", platform="console", created_at=datetime(2024, 3, 4, 12)))
    with database.session() as s:
        if not database.is_sqlite:
            s.exec(text("SET TIME ZONE 'Asia/Tokyo'"))  # type: ignore[call-overload]
        read = {t.id: t.created_at for t in s.exec(select(Tenant)).all()}
    assert read == {
        "aware": datetime(2024, 3, 4, 10, tzinfo=UTC),
        "naive": datetime(2024, 3, 4, 12, tzinfo=UTC),  # a naive time is taken as UTC
    }
    assert all(when.tzinfo is UTC for when in read.values())


def test_a_filter_on_an_aware_time_compares_instants(database: Database) -> None:
    with database.session() as s:
        s.add(
            Tenant(id="early", platform="console", created_at=datetime(2024, 3, 4, 9, tzinfo=UTC))
        )
        s.add(
            Tenant(id="late", platform="console", created_at=datetime(2024, 3, 4, 11, tzinfo=UTC))
        )
    # 12:00 at UTC+2 is 10:00 UTC: between the two, whatever zone the bound value has.
    cutoff = datetime(2024, 3, 4, 12, tzinfo=PLUS_TWO)
    with database.session() as s:
        before = s.exec(select(Tenant.id).where(col(Tenant.created_at) < cutoff)).all()
    assert before == ["early"]


def test_times_written_by_hand_or_by_sqlite_itself_read_back_in_utc(database: Database) -> None:
    """The fast read of SQLite's own format leaves every other shape to the usual path."""
    if not database.is_sqlite:
        pytest.skip("PostgreSQL stores a zone with each time; the first test covers it")
    written = {
        "micro": "2024-03-04 12:00:00.000005",
        "seconds": "2024-03-04 12:00:00",
        "iso": "2024-03-04T12:00:00.250000",
    }
    with database.session() as s:
        for name, when in written.items():
            s.exec(  # type: ignore[call-overload]
                text(
                    "INSERT INTO tenant (id, platform, name, created_at) VALUES (:i, 'x', '', :t)"
                ),
                params={"i": name, "t": when},
            )
    with database.session() as s:
        read = {t.id: t.created_at for t in s.exec(select(Tenant)).all()}
    assert read == {
        "micro": datetime(2024, 3, 4, 12, 0, 0, 5, tzinfo=UTC),
        "seconds": datetime(2024, 3, 4, 12, tzinfo=UTC),
        "iso": datetime(2024, 3, 4, 12, 0, 0, 250000, tzinfo=UTC),
    }
    assert all(when.tzinfo is UTC for when in read.values())
