"""Export and import of memories as JSON lines: every column, so a round trip loses nothing.

Export is always scoped to one tenant (bulk reads need an explicit scope). Import trusts nothing
in the file: every record passes the checks a chat write passes, and those a row needs (ids the
index can hold, a scope key that matches its tenant and owner, a content hash computed from the
text), before anything is written. It writes in one transaction, so an import is whole or
nothing. It keeps each record's id when it is free, skips records whose content already exists
in their dedupe partition, and queues the imported memories for the vector index.
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, col, select

from cairn.core.errors import InvalidInput, StorageError, first_line
from cairn.core.progress import ProgressCallback
from cairn.db import Database, ensure_tenant
from cairn.db.models import TENANT_CHARS, MemoryOutbox, MemoryRow
from cairn.memory.claims import claim_of
from cairn.memory.index.port import FIRST_INDEXABLE_ID
from cairn.memory.records import checked_memory, content_hash
from cairn.memory.scope import WORKSPACE, Scope, Visibility
from cairn.memory.tiers import TIERS

__all__ = ["ImportReport", "Rejected", "checked_tenant", "export_memories", "import_memories"]

_DATES = ("created_at", "updated_at", "last_recalled_at", "retracted_at", "valid_until")
FORMAT = "cairn.memory/1"
# The range of the integer columns on PostgreSQL, and so the one limit everywhere.
_INT_MAX = 2**31 - 1
_COUNTS = ("recall_count", "disputes", "merges")
_SCORES = ("validity", "usefulness")
# What a chat write can choose; ``public`` is set by people or code, never read from a file.
_VISIBILITIES = (Visibility.PRIVATE.value, Visibility.TEAM.value)
_TENANT_CHARS = TENANT_CHARS  # one limit everywhere (cairn.db.models)


@dataclass(frozen=True, slots=True)
class Rejected:
    """A record an import refused: its line in the file and why."""

    line: int
    reason: str


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import did.

    ``imported`` memories were written (``tenants`` counts them per tenant); ``skipped`` records
    duplicated a memory already there; ``rejected`` lists the invalid records left out (only
    when the import was asked to skip them).
    """

    imported: int
    skipped: int
    tenants: dict[str, int] = field(default_factory=dict)
    rejected: tuple[Rejected, ...] = ()


def checked_tenant(tenant: str) -> str:
    """``tenant`` when it is a well-formed tenant id.

    Raises InvalidInput when it is empty, has surrounding spaces or control characters, or is
    longer than the schema holds.
    """
    if not tenant.strip():
        raise InvalidInput("a tenant id cannot be empty")
    if tenant != tenant.strip():
        raise InvalidInput(f"tenant id {tenant!r} has surrounding spaces")
    _check_chars("tenant id", tenant)
    if len(tenant) > _TENANT_CHARS:
        raise InvalidInput(
            f"a tenant id has at most {_TENANT_CHARS} characters; this one has {len(tenant)}"
        )
    return tenant


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
            data[name] = value.isoformat()
        else:
            data[name] = None
    data["format"] = FORMAT
    return data


def import_memories(
    db: Database,
    lines: Iterable[str],
    *,
    tenant: str | None = None,
    move: bool = False,
    allow_other_tenants: bool = False,
    skip_invalid: bool = False,
    progress: ProgressCallback | None = None,
) -> ImportReport:
    """Import JSON lines written by :func:`export_memories`, all of them or none.

    ``tenant`` is the tenant the import is for: a record naming another tenant is invalid
    unless ``move`` (it goes into ``tenant``, with a new id) or ``allow_other_tenants`` (it
    goes into its own tenant). Without ``tenant`` every record keeps its own tenant.

    Every record is checked before anything is written. Raises InvalidInput listing every
    invalid record (its line and why) and writes nothing; with ``skip_invalid`` the valid
    records are written and the report lists the others. Raises StorageError when the
    database fails: the writes are one transaction, so nothing is written then either.
    ``progress`` hears (records written or skipped, valid records in all).
    """
    if tenant is not None:
        checked_tenant(tenant)
    rows: list[MemoryRow] = []
    rejected: list[Rejected] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(_row(line, tenant, move=move, allow_other_tenants=allow_other_tenants))
        except InvalidInput as exc:
            rejected.append(Rejected(number, str(exc)))
    if rejected and not skip_invalid:
        listed = "\n".join(f"  line {r.line}: {r.reason}" for r in rejected)
        raise InvalidInput(
            f"nothing imported: {len(rejected)} of {len(rows) + len(rejected)} records are "
            f"invalid (import the others with --skip-invalid):\n{listed}"
        )
    try:
        with db.session() as s:
            imported, skipped = _write(s, rows, progress)
    except SQLAlchemyError as exc:
        raise StorageError(
            f"the import failed and was rolled back, nothing was written: {first_line(exc)}"
        ) from exc
    return ImportReport(
        imported=len(imported),
        skipped=skipped,
        tenants=dict(sorted(Counter(r.tenant_id for r in imported).items())),
        rejected=tuple(rejected),
    )


def _row(line: str, tenant: str | None, *, move: bool, allow_other_tenants: bool) -> MemoryRow:
    """The memory row ``line`` records, checked as a chat write is; raises InvalidInput."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise InvalidInput(f"not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise InvalidInput("not an exported memory (a JSON object)")
    if (found := data.pop("format", FORMAT)) != FORMAT:
        raise InvalidInput(f"unknown format {found!r}; this Cairn reads {FORMAT}")
    unknown = sorted(set(data) - set(MemoryRow.model_fields))
    if unknown:
        raise InvalidInput(f"unknown fields: {', '.join(unknown)}")
    recorded_key = data.pop("scope_key", None)
    data.pop("content_hash", None)  # computed from the text, never taken from the file
    for name in _DATES:
        if data.get(name) is not None:
            data[name] = _date(name, data[name])
    try:
        row = MemoryRow.model_validate({**data, "scope_key": "", "content_hash": ""}, strict=True)
    except ValidationError as exc:
        raise InvalidInput(
            "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        ) from exc
    _check_fields(row)
    row.text = checked_memory(row.text, row.kind)
    key = _scope_key(row)
    # Files written before memories could be private to a conversation name no conversation.
    earlier = key.removesuffix(f"|{WORKSPACE}") if row.private_to is None else key
    if recorded_key is not None and recorded_key not in {key, earlier}:
        raise InvalidInput(
            f"scope_key {recorded_key!r} does not match the record's tenant and owner "
            f"(expected {key!r})"
        )
    if tenant is not None and row.tenant_id != tenant:
        if move:
            row.tenant_id, row.id = tenant, None
        elif not allow_other_tenants:
            raise InvalidInput(
                f"names tenant {row.tenant_id!r}, not {tenant!r}; write it there with "
                f"--allow-other-tenants, or into {tenant!r} with --move"
            )
    row.scope_key = _scope_key(row)
    row.content_hash = content_hash(row.text)
    # What a fact is about is read from its text, as a chat write reads it; its end of
    # validity and replacement are history, kept as recorded.
    claim = claim_of(row.text, row.kind)
    row.subject = claim.subject if claim is not None else ""
    return row


def _check_fields(row: MemoryRow) -> None:
    """The checks of a row beyond its types and lengths; raises InvalidInput."""
    if row.id is not None and not FIRST_INDEXABLE_ID <= row.id <= _INT_MAX:
        raise InvalidInput(f"id {row.id} is not between {FIRST_INDEXABLE_ID} and {_INT_MAX}")
    checked_tenant(row.tenant_id)
    for name, value in row.model_dump(exclude={"text", "retraction_reason"}).items():
        if isinstance(value, str):
            _check_chars(name, value)
    _check_chars("retraction_reason", row.retraction_reason, allowed="\n\t")
    _check_unicode("text", row.text)  # the rest is the memory check's, as in chat
    if row.visibility not in _VISIBILITIES:
        raise InvalidInput(
            f"visibility {row.visibility!r}: an import writes {' or '.join(_VISIBILITIES)} "
            "memories only, as chat does"
        )
    if row.visibility == Visibility.PRIVATE and not row.agent:
        raise InvalidInput("a private memory needs the agent that owns it")
    if row.visibility == Visibility.TEAM and row.agent is not None:
        raise InvalidInput("a team memory has no owner agent (agent must be null)")
    if row.tier not in TIERS:
        raise InvalidInput(f"unknown tier {row.tier!r}; use one of {', '.join(TIERS)}")
    if row.superseded_by is not None and not FIRST_INDEXABLE_ID <= row.superseded_by <= _INT_MAX:
        raise InvalidInput(
            f"superseded_by {row.superseded_by} is not between {FIRST_INDEXABLE_ID} and {_INT_MAX}"
        )
    for name in _COUNTS:
        if not 0 <= getattr(row, name) <= _INT_MAX:
            raise InvalidInput(f"{name} {getattr(row, name)} is not between 0 and {_INT_MAX}")
    for name in _SCORES:
        if not math.isfinite(getattr(row, name)):
            raise InvalidInput(f"{name} must be a finite number")


def _check_chars(name: str, value: str, allowed: str = "") -> None:
    # PostgreSQL refuses NUL mid-transaction; refuse it, and every other control character a
    # name has no use for, before anything is written.
    _check_unicode(name, value)
    for at, ch in enumerate(value):
        if ch not in allowed and unicodedata.category(ch) == "Cc":
            raise InvalidInput(f"{name} contains the control character {ch!r} at position {at}")


def _check_unicode(name: str, value: str) -> None:
    # A JSON escape such as "\ud800" decodes to a lone surrogate, which no database encodes.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{name} is not valid text (a lone surrogate at {exc.start})") from exc


def _scope_key(row: MemoryRow) -> str:
    # A team memory has no owner; Scope wants an agent but its team key does not use it.
    return Scope(row.tenant_id, row.agent or "*").key(Visibility(row.visibility), row.private_to)


def _date(name: str, value: object) -> datetime:
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be an ISO date and time")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidInput(f"{name} {value!r} is not an ISO date and time") from exc
    # The schema stores UTC only: a time without a zone is taken as UTC.
    return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _write(
    s: Session, rows: list[MemoryRow], progress: ProgressCallback | None
) -> tuple[list[MemoryRow], int]:
    """Write ``rows`` in ``s`` (one transaction); returns the rows written and the duplicates."""
    for tenant_id in sorted({r.tenant_id for r in rows}):
        platform = next(r.source_platform for r in rows if r.tenant_id == tenant_id)
        ensure_tenant(s, tenant_id, platform or "import")
    written: list[MemoryRow] = []
    seen: set[tuple[str, str, str]] = set()
    skipped = 0
    kept_ids = False
    for done, row in enumerate(rows):
        if progress is not None:
            progress(done, len(rows))
        key = (row.tenant_id, row.scope_key, row.content_hash)
        if key in seen or _exists(s, row):
            skipped += 1
            continue
        seen.add(key)
        if row.id is not None and s.get(MemoryRow, row.id) is not None:
            row.id = None  # taken, here or earlier in this file: the memory gets a new id
        kept_ids |= row.id is not None
        s.add(row)
        s.flush()
        assert row.id is not None
        if not row.retracted:
            s.add(MemoryOutbox(memory_id=row.id, op="upsert"))
        written.append(row)
    if progress is not None:
        progress(len(rows), len(rows))
    if kept_ids and s.get_bind().dialect.name == "postgresql":
        # Rows kept their ids: move the id sequence past them, or the next write collides.
        s.exec(  # type: ignore[call-overload]
            text(
                "SELECT setval(pg_get_serial_sequence('memory', 'id'), "
                "(SELECT max(id) FROM memory))"
            )
        )
    return written, skipped


def _exists(s: Session, row: MemoryRow) -> bool:
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
