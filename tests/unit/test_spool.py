"""The event spool: what a frontend acknowledged is on disk, in order, until it is handled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cairn.bot.spool import Spool, SpoolError


def _take_all(spool: Spool) -> list[tuple[int, bool]]:
    taken = []
    while (record := spool.take(timeout=0.05)) is not None:
        taken.append((int(record.payload["n"]), record.replayed))
    return taken


def _segments(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.spool"))


def test_records_come_out_in_the_order_they_went_in(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    for n in range(5):
        spool.append({"n": n})
    assert spool.pending() == 5
    assert _take_all(spool) == [(n, False) for n in range(5)]
    spool.close()


def _spool_in_a_process(folder: Path, count: int, *, then: str) -> subprocess.Popen[bytes]:
    """A real process that spools ``count`` records, says so, and then ``then`` (a statement)."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from cairn.bot.spool import Spool
        spool = Spool(Path({str(folder)!r}))
        for n in range({count}):
            spool.append({{"n": n}})
        print("spooled", flush=True)
        {then}
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"spooled"
    return proc


def test_what_a_killed_process_acknowledged_is_replayed_by_the_next_one(tmp_path: Path) -> None:
    proc = _spool_in_a_process(tmp_path, 3, then="time.sleep(60)")
    os.kill(proc.pid, signal.SIGKILL)  # no chance to close or flush anything
    proc.wait()
    spool = Spool(tmp_path)
    assert spool.replayed == 3
    assert _take_all(spool) == [(0, True), (1, True), (2, True)]
    assert _segments(tmp_path) == [spool.path]  # the dead process's segment is gone
    spool.close()


def test_a_running_process_keeps_its_own_records(tmp_path: Path) -> None:
    proc = _spool_in_a_process(tmp_path, 2, then="sys.stdin.read()")
    try:
        spool = Spool(tmp_path)
        assert spool.replayed == 0
        assert _take_all(spool) == []
        assert len(_segments(tmp_path)) == 2  # its segment and ours
        spool.close()
    finally:
        proc.kill()
        proc.wait()


def test_records_left_at_a_clean_stop_are_replayed_and_done_ones_are_not(tmp_path: Path) -> None:
    first = Spool(tmp_path)
    for n in range(4):
        first.append({"n": n})
    done = first.take(timeout=1)
    assert done is not None
    first.done(done)
    first.close()  # three records left: the segment stays
    second = Spool(tmp_path)
    # Everything is replayed once: the done record too, since the segment was not emptied;
    # the event log drops a copy it already has.
    assert [n for n, replayed in _take_all(second) if replayed] == [0, 1, 2, 3]
    second.close()


def test_a_record_cut_short_by_a_crash_is_skipped(tmp_path: Path) -> None:
    torn = tmp_path / "00000000000000000001-1.spool"
    torn.write_bytes(b'{"payload":{"n":7},"replayed":false}\n{"payload":{"n":8')
    spool = Spool(tmp_path)
    assert _take_all(spool) == [(7, True)]
    spool.close()


def test_a_segment_is_emptied_once_everything_in_it_is_done(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    for n in range(200):
        spool.append({"n": n, "text": "x" * 500})  # well past the compaction size
    while (record := spool.take(timeout=0.05)) is not None:
        spool.done(record)
    assert spool.path.stat().st_size == 0
    spool.append({"n": 200})
    assert _take_all(spool) == [(200, False)]
    spool.close()


def test_a_clean_stop_with_everything_done_leaves_nothing(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append({"n": 1})
    record = spool.take(timeout=1)
    assert record is not None
    spool.done(record)
    spool.close()
    assert _segments(tmp_path) == []


def test_a_record_that_cannot_be_written_is_refused_not_acknowledged(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.close()
    with pytest.raises(SpoolError, match="closed"):
        spool.append({"n": 1})
    if os.geteuid() != 0:  # root writes through permissions; /dev/full fails for everyone
        folder = tmp_path / "locked"
        folder.mkdir(mode=0o500)
        with pytest.raises(SpoolError, match="cannot open the event spool"):
            Spool(folder)


def test_a_full_disk_fails_the_append_and_leaves_no_torn_record(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append({"n": 1})
    # Point the segment's descriptor at /dev/full: every write fails with ENOSPC.
    full = os.open("/dev/full", os.O_WRONLY)
    saved = os.dup(spool._fd)
    os.dup2(full, spool._fd)
    try:
        with pytest.raises(SpoolError, match="No space left"):
            spool.append({"n": 2})
    finally:
        os.dup2(saved, spool._fd)
        os.close(saved)
        os.close(full)
    assert spool.pending() == 1  # only the record that was written
    spool.append({"n": 3})
    assert _take_all(spool) == [(1, False), (3, False)]
    spool.close()
