"""The database: engine creation (SQLite or PostgreSQL), Alembic migrations, and sessions."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, Insert, Table, event, insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    DBAPIError,
    DisconnectionError,
    InterfaceError,
    OperationalError,
    PendingRollbackError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlmodel import Session, SQLModel, create_engine

from cairn.core.errors import StorageError
from cairn.core.redact import mask_url, mask_urls
from cairn.db.writers import WriterGate, gated_connection_class, take_gate_before_write

__all__ = [
    "Database",
    "alembic_config",
    "create_db_engine",
    "ensure_tenant",
    "insert_values",
    "is_unavailable",
    "normalise_url",
    "table",
]

log = logging.getLogger(__name__)

# Seconds a SQLite writer waits for another before "database is locked".
SQLITE_TIMEOUT = 30.0

MIGRATIONS = Path(__file__).parent / "migrations"


def normalise_url(url: str) -> str:
    """Pick Cairn's driver for a URL: ``postgresql://`` uses psycopg 3, SQLite stays as it is."""
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres"}:
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database can't be used right now (down, restarting, locked,
    out of connections), so that the same work should be tried again later, unchanged.

    Errors about the work itself (a constraint, a value too long) are not: retrying them
    cannot help. StorageError counts: Cairn raises it for an unreachable database.
    """
    if isinstance(exc, StorageError):
        return True
    if isinstance(exc, OperationalError | InterfaceError | DisconnectionError | PoolTimeout):
        return True
    if isinstance(exc, PendingRollbackError):
        return True  # a connection lost mid-transaction; the next session starts afresh
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def create_db_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL, a busy timeout and foreign keys."""
    url = normalise_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        connect_args: dict[str, Any] = {"timeout": SQLITE_TIMEOUT, "check_same_thread": False}
        if parsed.database and parsed.database != ":memory:":
            path = Path(parsed.database).expanduser()
            path.parent.mkdir(parents=True, exist_ok=True)
            # Writers queue at a gate instead of in SQLite's busy back-off (ADR 0015).
            gate = WriterGate(path.with_name(path.name + "-writer.lock"), SQLITE_TIMEOUT)
            connect_args["factory"] = gated_connection_class(gate)
        engine = create_engine(url, connect_args=connect_args)
        event.listen(engine, "connect", _sqlite_pragmas)
        if "factory" in connect_args:
            event.listen(engine, "before_cursor_execute", take_gate_before_write)
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets the frontend read while a worker writes; busy_timeout waits out a writer
    # instead of failing at once with "database is locked".
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_TIMEOUT * 1000)}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def alembic_config(url: str) -> AlembicConfig:
    """An Alembic config pointing at Cairn's migrations and ``url``."""
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", normalise_url(url).replace("%", "%%"))
    return cfg


class Database:
    """One database: its engine, its migrations, and short-lived sessions."""

    def __init__(self, url: str) -> None:
        try:
            self.url = normalise_url(url)
            self.engine = create_db_engine(self.url)
        except Exception as exc:  # a malformed URL or a missing driver
            raise StorageError(
                # The library's message may quote the URL too.
                f"cannot use database URL {mask_url(url)!r}: {mask_urls(str(exc))}. "
                "Check CAIRN_DATABASE_URL."
            ) from exc

    @property
    def safe_url(self) -> str:
        """The URL with its password and token-like query values hidden, for messages and logs."""
        return mask_url(self.url)

    @property
    def is_sqlite(self) -> bool:
        """True for the embedded SQLite default."""
        return self.engine.dialect.name == "sqlite"

    def current_revision(self) -> str | None:
        """The migration revision the database is at (None when it is empty).

        Raises StorageError when the database cannot be reached.
        """
        try:
            with self.engine.connect() as conn:
                heads = MigrationContext.configure(conn).get_current_heads()
                return "+".join(sorted(heads)) or None
        except OperationalError as exc:
            raise StorageError(
                f"cannot reach database {self.safe_url}: {exc.orig}. Check CAIRN_DATABASE_URL."
            ) from exc

    def head_revision(self) -> str | None:
        """The newest migration Cairn ships (heads joined by ``+`` if branches were left open)."""
        heads = ScriptDirectory.from_config(alembic_config(self.url)).get_heads()
        return "+".join(sorted(heads)) or None

    def migrate(self) -> None:
        """Bring the schema up to the newest migration; raises StorageError if it cannot."""
        cfg = alembic_config(self.url)
        try:
            with self.engine.begin() as conn:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        except OperationalError as exc:
            raise StorageError(
                f"cannot migrate database {self.safe_url}: {exc.orig}. "
                "Check CAIRN_DATABASE_URL and that the server is up."
            ) from exc

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session that commits when the block ends and rolls back if it raises."""
        with Session(self.engine, expire_on_commit=False) as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()


def table(model: type[SQLModel]) -> Table:
    """The Core table of a SQLModel table class.

    Statements on the table skip the ORM's bulk-DML layer (identity-map synchronisation,
    per-row bookkeeping): on the per-message path that was a tenth of a statement's cost.
    """
    found = getattr(model, "__table__", None)
    if not isinstance(found, Table):
        raise TypeError(f"{model.__name__} is not a table model")
    return found


@lru_cache(maxsize=64)
def _inserting(target: Table) -> Insert:
    return insert(target).returning(target.c.id)


@lru_cache(maxsize=64)
def _defaults(
    model: type[SQLModel],
) -> tuple[dict[str, Any], tuple[tuple[str, Any], ...], frozenset[str]]:
    """A table model's field defaults, read once: constant ones, factories (called per row),
    and the names of fields without a default."""
    columns = _columns(model)
    constant: dict[str, Any] = {}
    factories: list[tuple[str, Any]] = []
    required: set[str] = set()
    for name, info in model.model_fields.items():
        if name not in columns:
            continue
        if info.default_factory is not None:
            factories.append((name, info.default_factory))
        elif info.is_required():
            required.add(name)
        else:
            constant[name] = info.default
    return constant, tuple(factories), frozenset(required)


def insert_values(s: Session, model: type[SQLModel], **fields: Any) -> dict[str, Any]:
    """Insert one row of ``model`` with one Core statement inside the transaction ``s``, its
    field defaults applied as the model would; return the values written, with the new id.

    No model object is built and the unit of work is not involved: for rows that are written
    once on the per-message path (building a SQLModel object cost more than the insert).
    Raises TypeError for a field the model does not have or a required one left out.
    """
    constant, factories, required = _defaults(model)
    values = constant | {name: make() for name, make in factories if name not in fields}
    values |= fields
    columns = _columns(model)
    if not required <= values.keys() or not values.keys() <= columns:
        missing = sorted(required - values.keys())
        unknown = sorted(values.keys() - columns)
        raise TypeError(f"{model.__name__}: missing fields {missing}, unknown fields {unknown}")
    # The values go as parameters of one statement per table (every column is given, so it
    # compiles once), not into a new statement per row: building one cost more than running it.
    target = table(model)
    values["id"] = int(s.connection().execute(_inserting(target), values).scalar_one())
    return values


@lru_cache(maxsize=64)
def _columns(model: type[SQLModel]) -> frozenset[str]:
    return frozenset(c.key for c in table(model).columns if not c.primary_key)


def ensure_tenant(s: Session, tenant_id: str, platform: str) -> None:
    """Create the tenant ``tenant_id`` in the transaction ``s`` unless it exists.

    One ``INSERT ... ON CONFLICT DO NOTHING``: a concurrent writer creating the same tenant
    first is not an error, on SQLite as on PostgreSQL.
    """
    from sqlalchemy.dialects import postgresql, sqlite

    from cairn.db.models import Tenant, utcnow

    dialect = postgresql if s.get_bind().dialect.name == "postgresql" else sqlite
    statement = dialect.insert(table(Tenant)).values(
        id=tenant_id, platform=platform, name="", created_at=utcnow()
    )
    s.connection().execute(statement.on_conflict_do_nothing(index_elements=["id"]))
