"""Migrations are the only way the schema changes: they build exactly what the models describe.

Every behaviour is pinned on both databases Cairn supports: an SQLite file and a real
PostgreSQL database (from the ``postgres_url`` fixture of ``tests/services.py``).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect
from sqlmodel import SQLModel, select

import cairn.db.models  # noqa: F401  (registers every table on SQLModel.metadata)
from cairn.core.errors import StorageError
from cairn.db import Database, alembic_config
from cairn.db.models import Tenant

MODEL_TABLES = frozenset(SQLModel.metadata.tables)
VERSION_TABLE = "alembic_version"


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database: an SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'cairn.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    """A Database on the empty database, its connections closed after the test."""
    db = Database(database_url)
    try:
        yield db
    finally:
        db.dispose()


def table_names(engine: Engine) -> set[str]:
    """The tables that exist in the database right now."""
    return set(inspect(engine).get_table_names())


def schema_snapshot(engine: Engine) -> dict[str, Any]:
    """Everything about the schema a migration could change, in comparable form."""
    inspector = inspect(engine)
    snapshot: dict[str, Any] = {}
    for table in sorted(inspector.get_table_names()):
        snapshot[table] = {
            "columns": [
                (column["name"], str(column["type"]), column["nullable"])
                for column in inspector.get_columns(table)
            ],
            "primary_key": inspector.get_pk_constraint(table)["constrained_columns"],
            "indexes": sorted(
                (index["name"] or "", tuple(index["column_names"]), bool(index["unique"]))
                for index in inspector.get_indexes(table)
            ),
            "unique": sorted(
                (constraint["name"] or "", tuple(constraint["column_names"]))
                for constraint in inspector.get_unique_constraints(table)
            ),
            "foreign_keys": sorted(
                (
                    tuple(fk["constrained_columns"]),
                    fk["referred_table"],
                    tuple(fk["referred_columns"]),
                )
                for fk in inspector.get_foreign_keys(table)
            ),
        }
    return snapshot


def downgrade_to_base(db: Database) -> None:
    """Run every migration's downgrade, newest first, on ``db``."""
    cfg = alembic_config(db.url)
    with db.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "base")


def test_upgrade_from_empty_creates_every_table_of_the_models(database: Database) -> None:
    assert table_names(database.engine) == set()

    database.migrate()

    assert table_names(database.engine) == MODEL_TABLES | {VERSION_TABLE}


def test_migrated_schema_matches_the_models_exactly(database: Database) -> None:
    database.migrate()

    with database.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        differences = compare_metadata(context, SQLModel.metadata)

    # Any entry here means a model changed without a migration (or the reverse): write one
    # with `alembic revision --autogenerate` rather than editing the schema by hand.
    assert differences == []


def test_migrating_twice_is_a_no_op_that_keeps_the_data(database: Database) -> None:
    database.migrate()
    with database.session() as session:
        session.add(Tenant(id="console", platform="console", name="Console"))
    schema_before = schema_snapshot(database.engine)

    database.migrate()

    assert schema_snapshot(database.engine) == schema_before
    assert database.current_revision() == database.head_revision()
    with database.session() as session:
        tenants = session.exec(select(Tenant)).all()
    assert [(tenant.id, tenant.platform) for tenant in tenants] == [("console", "console")]


def test_downgrade_to_base_then_upgrade_rebuilds_the_same_schema(database: Database) -> None:
    database.migrate()
    migrated = schema_snapshot(database.engine)

    downgrade_to_base(database)

    assert table_names(database.engine) <= {VERSION_TABLE}
    assert database.current_revision() is None

    database.migrate()

    assert schema_snapshot(database.engine) == migrated
    assert database.current_revision() == database.head_revision()


def test_current_revision_is_head_after_migrate(database: Database) -> None:
    head = database.head_revision()
    assert head is not None
    assert database.current_revision() is None

    database.migrate()

    assert database.current_revision() == head


def test_unreachable_postgres_raises_storage_error_with_a_helpful_message() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port once the socket is closed: connecting is refused at once.
    db = Database(f"postgresql://cairn:s3cret-pw@127.0.0.1:{port}/cairn")
    try:
        with pytest.raises(StorageError) as raised:
            db.migrate()
    finally:
        db.dispose()

    message = str(raised.value)
    assert f"127.0.0.1:{port}/cairn" in message  # says which database
    assert "CAIRN_DATABASE_URL" in message  # says what to check
    assert "s3cret-pw" not in message  # and never leaks the password
