"""Export and import of memories as JSON lines: every column, so a round trip loses nothing.

Export is always scoped to one tenant (bulk reads need an explicit scope). Import keeps each
record's id when it is free, skips records whose content already exists in their dedupe
partition, and queues the imported memories for the vector index.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from cairn.db import Database
from cairn.db.models import MemoryOutbox, MemoryRow, Tenant
from cairn.errors import InvalidInput
from cairn.progress import ProgressCallback

__all__ = ["ImportReport", "export_memories", "import_memories"]

_DATES = ("created_at", "updated_at", "last_recalled_at", "retracted_at")
FORMAT = "cairn.memory/1"


@dataclass(frozen=True, slots=True)
class ImportReport:
    """How many records were imported and how many were already there."""

    imported: int
    skipped: int


def export_memories(
    db: Database,
    tenant: str,
    *,
    agent: str | None = None,
    include_retracted: bool = True,
    progress: ProgressCallback | None = None,
) -> Iterator[str]:
    """One JSON line per memory of ``tenant`` (optionally one agent's private ones and shared).

    ``progress`` hears (lines yielded, lines in all). Raises InvalidInput without a tenant.
    """
    if not tenant:
        raise InvalidInput("export needs an explicit tenant (--tenant)")
    with db.session() as s:
        query = select(MemoryRow).where(MemoryRow.tenant_id == tenant)
        if agent is not None:
            query = query.where((col(MemoryRow.agent) == agent) | col(MemoryRow.agent).is_(None))
        if not include_retracted:
            query = query.where(col(MemoryRow.retracted).is_(False))
        rows = s.exec(query.order_by(col(MemoryRow.id))).all()
        records = [_record(r) for r in rows]
    for done, record in enumerate(records, 1):
        yield json.dumps(record, sort_keys=True, ensure_ascii=False)
        if progress is not None:
            progress(done, len(records))


def _record(row: MemoryRow) -> dict[str, Any]:
    data = row.model_dump()
    for name in _DATES:
        value = data.get(name)
        if isinstance(value, datetime):
            # SQLite hands back naive datetimes; the schema stores UTC only, so say so.
            data[name] = (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
        else:
            data[name] = None
    data["format"] = FORMAT
    return data


def import_memories(
    db: Database,
    lines: Iterable[str],
    *,
    tenant: str | None = None,
    progress: ProgressCallback | None = None,
) -> ImportReport:
    """Import JSON lines written by :func:`export_memories`.

    ``tenant`` moves every record into that tenant (ids are then reassigned). ``progress``
    hears (records handled, records in all). Raises InvalidInput naming the line of the first
    malformed record; nothing is imported then.
    """
    rows: list[MemoryRow] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if data.pop("format", FORMAT) != FORMAT:
                raise ValueError("unknown format")
            for name in _DATES:
                if data.get(name):
                    data[name] = datetime.fromisoformat(data[name])
            if tenant:
                data["tenant_id"] = tenant
                data["scope_key"] = tenant + "|" + data["scope_key"].split("|", 1)[1]
                data.pop("id", None)
            rows.append(MemoryRow.model_validate(data))
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise InvalidInput(f"line {number} is not an exported memory: {exc}") from exc
    imported = skipped = 0
    for done, row in enumerate(rows):
        if progress is not None:
            progress(done, len(rows))
        with db.session() as s:
            if s.get(Tenant, row.tenant_id) is None:
                s.add(Tenant(id=row.tenant_id, platform=row.source_platform or "import"))
        exists = _exists(db, row)
        if exists:
            skipped += 1
            continue
        if row.id is not None:
            with db.session() as s:
                if s.get(MemoryRow, row.id) is not None:
                    row.id = None
        try:
            with db.session() as s:
                s.add(row)
                s.flush()
                if not row.retracted:
                    s.add(MemoryOutbox(memory_id=row.id or 0, op="upsert"))
            imported += 1
        except IntegrityError:
            skipped += 1
    if progress is not None:
        progress(len(rows), len(rows))
    if imported and db.engine.dialect.name == "postgresql":
        # Rows kept their ids: move the id sequence past them, or the next write collides.
        with db.session() as s:
            s.exec(  # type: ignore[call-overload]
                text(
                    "SELECT setval(pg_get_serial_sequence('memory', 'id'), "
                    "(SELECT max(id) FROM memory))"
                )
            )
    return ImportReport(imported=imported, skipped=skipped)


def _exists(db: Database, row: MemoryRow) -> bool:
    with db.session() as s:
        return (
            s.exec(
                select(MemoryRow.id).where(
                    MemoryRow.tenant_id == row.tenant_id,
                    MemoryRow.scope_key == row.scope_key,
                    MemoryRow.content_hash == row.content_hash,
                )
            ).first()
            is not None
        )
