"""Export and import of memories as JSON lines: every column, so a round trip loses nothing.

Export is always scoped to one tenant (bulk reads need an explicit scope). Import trusts nothing
in the file: every record passes the checks a chat write passes, and those a row needs (ids the
index can hold, a scope key that matches its tenant and owner, a content hash computed from the
text). It writes in one transaction, so an import is whole or nothing, and it streams: it
holds one batch of records at a time, as the export does. It keeps each record's id when it
is free, skips records whose content already exists in their dedupe partition, and queues the
imported memories for the vector index.
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
from sqlmodel import Session, col, func, select

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
BATCH = 500
"""Records an import or export holds at once: what bounds its memory, whatever the file."""
LISTED = 1000
"""Invalid records an import lists (their line and why); the others are only counted."""


@dataclass(frozen=True, slots=True)
class Rejected:
    """A record an import refused: its line in the file and why."""

    line: int
    reason: str


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import did.

    ``imported`` memories were written (``tenants`` counts them per tenant); ``skipped`` records
    duplicated a memory already there; ``invalid`` records were left out (only when the import
    was asked to skip them), and ``rejected`` lists the first :data:`LISTED` of them.
    """

    imported: int
    skipped: int
    tenants: dict[str, int] = field(default_factory=dict)
    rejected: tuple[Rejected, ...] = ()
    invalid: int = 0


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

    Rows are read in batches of :data:`BATCH` from one snapshot of the database (one read
    transaction), so memory stays flat however many there are. ``progress`` hears (lines
    yielded, lines in all) after each batch. Raises InvalidInput without a tenant.
    """
    if not tenant:
        raise InvalidInput("export needs an explicit tenant (--tenant)")
    query = select(MemoryRow).where(MemoryRow.tenant_id == tenant)
    if agent is not None:
        query = query.where((col(MemoryRow.agent) == agent) | col(MemoryRow.agent).is_(None))
    if not include_retracted:
        query = query.where(col(MemoryRow.retracted).is_(False))
    with db.session() as s:
        total = int(s.exec(select(func.count()).select_from(query.subquery())).one())
        rows = s.exec(query.order_by(col(MemoryRow.id)).execution_options(yield_per=BATCH))
        for done, row in enumerate(rows, 1):
            line = json.dumps(_record(row), sort_keys=True, ensure_ascii=False)
            s.expunge(row)  # the session holds no row it has given out
            yield line
            if progress is not None and (done % BATCH == 0 or done == total):
                progress(done, max(total, done))


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
    total: int | None = None,
    batch: int = BATCH,
) -> ImportReport:
    """Import JSON lines written by :func:`export_memories`, all of them or none.

    ``tenant`` is the tenant the import is for: a record naming another tenant is invalid
    unless ``move`` (it goes into ``tenant``, with a new id) or ``allow_other_tenants`` (it
    goes into its own tenant). Without ``tenant`` every record keeps its own tenant.

    The lines are read as they come and written ``batch`` records at a time, all in one
    transaction, so an import holds at most ``batch`` records in memory however long the file
    is, and a failure anywhere leaves the database as it was (docs/adr/0038).

    Every record is checked. Raises InvalidInput listing the invalid records (their line and
    why; the first :data:`LISTED` of them) and writes nothing; with ``skip_invalid`` the valid
    records are written and the report lists the others. Raises StorageError when the database
    fails: nothing is written then either. ``progress`` hears (records read, ``total`` or the
    records read when the caller does not know how many lines there are) after each batch.
    """
    if tenant is not None:
        checked_tenant(tenant)
    try:
        with db.session() as s:
            writer = _Writer(s, progress, total, batch)
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    row = _row(line, tenant, move=move, allow_other_tenants=allow_other_tenants)
                except InvalidInput as exc:
                    writer.reject(Rejected(number, str(exc)))
                    continue
                # Once a record is invalid nothing will be written: the rest is only checked.
                writer.add(row, write=skip_invalid or not writer.invalid)
            writer.finish()
            if writer.invalid and not skip_invalid:
                raise InvalidInput(writer.refusal())  # rolls back what was written
    except SQLAlchemyError as exc:
        raise StorageError(
            f"the import failed and was rolled back, nothing was written: {first_line(exc)}"
        ) from exc
    return ImportReport(
        imported=sum(writer.tenants.values()),
        skipped=writer.skipped,
        tenants=dict(sorted(writer.tenants.items())),
        rejected=tuple(writer.rejected),
        invalid=writer.invalid,
    )


class _Writer:
    """Writes checked rows into one open transaction, a batch at a time.

    Holds at most one batch of rows: each batch is flushed to the database and let go of, and
    later batches find the earlier ones (duplicates, ids taken) by querying the transaction.
    """

    def __init__(
        self, s: Session, progress: ProgressCallback | None, total: int | None, batch: int
    ) -> None:
        self.s = s
        self.progress = progress
        self.total = total
        self.batch = max(batch, 1)
        self.pending: list[MemoryRow] = []
        self.read = 0  # records read, valid or not
        self.valid = 0
        self.skipped = 0
        self.invalid = 0
        self.rejected: list[Rejected] = []  # the first LISTED of them
        self.tenants: Counter[str] = Counter()  # memories written per tenant
        self._known_tenants: set[str] = set()

    def reject(self, rejected: Rejected) -> None:
        self.invalid += 1
        if len(self.rejected) < LISTED:
            self.rejected.append(rejected)
        self._advance()

    def add(self, row: MemoryRow, *, write: bool) -> None:
        self.valid += 1
        if write:
            self.pending.append(row)
        if len(self.pending) >= self.batch:
            self._write()
        self._advance()

    def finish(self) -> None:
        self._write()
        self._report()

    def refusal(self) -> str:
        listed = "\n".join(f"  line {r.line}: {r.reason}" for r in self.rejected)
        more = self.invalid - len(self.rejected)
        return (
            f"nothing imported: {self.invalid} of {self.valid + self.invalid} records are "
            f"invalid (import the others with --skip-invalid):\n{listed}"
            + (f"\n  ... and {more} more" if more else "")
        )

    def _advance(self) -> None:
        self.read += 1
        if self.read % self.batch == 0:
            self._report()

    def _report(self) -> None:
        if self.progress is not None:
            self.progress(self.read, max(self.total or 0, self.read))

    def _write(self) -> None:
        rows, self.pending = self.pending, []
        if not rows:
            return
        s = self.s
        for tenant_id in sorted({r.tenant_id for r in rows} - self._known_tenants):
            platform = next(r.source_platform for r in rows if r.tenant_id == tenant_id)
            ensure_tenant(s, tenant_id, platform or "import")
            self._known_tenants.add(tenant_id)
        present = _present(s, rows)
        fresh: list[MemoryRow] = []
        for row in rows:
            key = (row.tenant_id, row.scope_key, row.content_hash)
            if key in present:
                self.skipped += 1
                continue
            present.add(key)
            fresh.append(row)
        taken = _taken_ids(s, fresh)
        kept: list[MemoryRow] = []
        for row in fresh:
            if row.id is not None and row.id in taken:
                row.id = None  # taken, here or earlier in this file: the memory gets a new id
            if row.id is not None:
                taken.add(row.id)
                kept.append(row)
        # Rows that keep their id go first, and PostgreSQL's id sequence is moved past them,
        # so that a row given a new id never collides with one written with its own.
        s.add_all(kept)
        s.flush()
        if kept and s.get_bind().dialect.name == "postgresql":
            s.exec(  # type: ignore[call-overload]
                text(
                    "SELECT setval(pg_get_serial_sequence('memory', 'id'), "
                    "(SELECT max(id) FROM memory))"
                )
            )
        s.add_all([r for r in fresh if r.id is None])
        s.flush()
        s.add_all(MemoryOutbox(memory_id=r.id or 0, op="upsert") for r in fresh if not r.retracted)
        s.flush()
        self.tenants.update(r.tenant_id for r in fresh)
        s.expunge_all()  # let go of the batch: the transaction keeps it, not this process


def _present(s: Session, rows: list[MemoryRow]) -> set[tuple[str, str, str]]:
    """The dedupe keys of ``rows`` already in the database (or earlier in this transaction)."""
    found = s.exec(
        select(MemoryRow.tenant_id, MemoryRow.scope_key, MemoryRow.content_hash).where(
            col(MemoryRow.content_hash).in_({r.content_hash for r in rows})
        )
    ).all()
    return {(t, k, h) for t, k, h in found}


def _taken_ids(s: Session, rows: list[MemoryRow]) -> set[int]:
    """The ids ``rows`` ask for that a memory already has."""
    wanted = {r.id for r in rows if r.id is not None}
    if not wanted:
        return set()
    return {i for i in s.exec(select(MemoryRow.id).where(col(MemoryRow.id).in_(wanted))).all() if i}


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
