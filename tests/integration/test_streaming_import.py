"""`memory import` and `memory export` stream, on SQLite and PostgreSQL: however long the file,
they hold one batch of records at a time (counted, not timed), an import is still whole or
nothing across batches, and a piped progress line appears every few seconds."""

from __future__ import annotations

import gc
import io
import json
from collections.abc import Iterator

import pytest
from rich.console import Console
from sqlmodel import func, select

from cairn.core.errors import InvalidInput
from cairn.core.progress import progress_bar
from cairn.db import Database
from cairn.db.models import MemoryOutbox, MemoryRow
from cairn.memory.portable import FORMAT, export_memories, import_memories

RECORDS = 3000
BATCH = 100
SAMPLES = 6  # counting the rows alive scans the whole heap: a few points along the file do


def _line(n: int, **fields: object) -> str:
    text = f"The service number {n} runs on host node-{n}.internal"
    record = {
        "format": FORMAT,
        "tenant_id": "console",
        "agent": "ops",
        "visibility": "private",
        "kind": "fact",
        "text": text,
        "created_at": "2026-01-02T03:04:05+00:00",
        **fields,
    }
    return json.dumps(record)


def _lines(count: int) -> Iterator[str]:
    """The records one at a time, as a file is read: the test holds none of them."""
    return (_line(n) for n in range(count))


def _rows_alive() -> int:
    """Memory rows this process still holds (reachable objects, after a collection)."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, MemoryRow))


def _count(db: Database, model: type[MemoryRow] | type[MemoryOutbox] = MemoryRow) -> int:
    with db.session() as s:
        return int(s.exec(select(func.count()).select_from(model)).one())


def test_an_import_holds_one_batch_of_records_however_long_the_file(database: Database) -> None:
    held: list[int] = []
    heard: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        heard.append((done, total))
        if len(heard) % (RECORDS // BATCH // SAMPLES) == 0:
            held.append(_rows_alive())

    report = import_memories(
        database, _lines(RECORDS), tenant="console", progress=progress, batch=BATCH
    )
    assert report.imported == RECORDS
    assert _count(database) == RECORDS
    assert _count(database, MemoryOutbox) == RECORDS
    assert len(heard) >= RECORDS // BATCH
    assert len(held) >= SAMPLES
    assert max(held) <= 2 * BATCH, f"held up to {max(held)} records at once"
    assert heard[-1] == (RECORDS, RECORDS)


def test_an_export_holds_one_batch_of_rows_however_many_there_are(database: Database) -> None:
    import_memories(database, _lines(RECORDS), tenant="console")
    held = []
    written = 0
    for n, line in enumerate(export_memories(database, "console"), 1):
        written += len(line)
        if n % (RECORDS // SAMPLES) == 0:
            held.append(_rows_alive())
    assert len(held) == SAMPLES
    assert max(held) <= 600, f"held up to {max(held)} rows at once"


def test_an_invalid_record_after_many_batches_leaves_nothing_written(database: Database) -> None:
    lines = [*_lines(RECORDS // 3), _line(0, tier="lukewarm"), *_lines(5)]
    with pytest.raises(InvalidInput, match=f"line {RECORDS // 3 + 1}: unknown tier"):
        import_memories(database, lines, tenant="console", batch=BATCH)
    assert _count(database) == 0
    assert _count(database, MemoryOutbox) == 0


def test_duplicates_and_ids_are_found_across_batches(database: Database) -> None:
    lines = [
        _line(1, id=5),
        *(_line(n) for n in range(10, 10 + BATCH)),  # pushes the rest into later batches
        _line(1),  # the first record again, in another batch: a duplicate
        _line(2, id=5),  # asks for an id taken in an earlier batch: gets a new one
        _line(3, id=9000),
        _line(4),
    ]
    report = import_memories(database, lines, tenant="console", batch=BATCH // 2)
    assert (report.imported, report.skipped) == (BATCH + 4, 1)
    with database.session() as s:
        ids = {r.text.split()[3]: r.id for r in s.exec(select(MemoryRow)).all()}
    assert ids["1"] == 5
    assert ids["2"] not in {5, None}
    assert ids["3"] == 9000
    assert len(set(ids.values())) == len(ids)


def test_invalid_records_are_counted_all_and_listed_up_to_a_limit(database: Database) -> None:
    lines = [_line(n, kind="gossip") for n in range(1200)]
    report = import_memories(database, lines, tenant="console", skip_invalid=True)
    assert (report.imported, report.invalid, len(report.rejected)) == (0, 1200, 1000)
    with pytest.raises(InvalidInput, match=r"and 200 more$"):
        import_memories(database, lines, tenant="console")


def test_piped_progress_is_a_plain_line_every_interval_and_a_last_one() -> None:
    piped = Console(file=io.StringIO(), force_terminal=False)
    with progress_bar("importing", console=piped, interval=0.0) as report:
        for done in (100, 200, 300):
            report(done, 300)
    lines = piped.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert [line.split(",")[0] for line in lines] == [
        "importing: 100 of 300 (33%)",
        "importing: 200 of 300 (66%)",
        "importing: 300 of 300 (100%)",
    ]
    quick = Console(file=io.StringIO(), force_terminal=False)
    with progress_bar("importing", console=quick) as report:  # work shorter than the interval
        report(300, 300)
    assert quick.file.getvalue() == ""  # type: ignore[attr-defined]
