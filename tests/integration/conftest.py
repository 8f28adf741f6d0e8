"""Fixtures the integration tests share: real storage, on each database Cairn supports."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.db import Database


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A migrated, empty database: an SQLite file or a fresh PostgreSQL database."""
    url = (
        f"sqlite:///{tmp_path / 'cairn.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    db = Database(url)
    db.migrate()
    yield db
    db.dispose()
