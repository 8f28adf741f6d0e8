"""The SQLite writer gate: writers queue for it, it is given back, it times out clearly."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import event, text

from cairn.db import Database
from cairn.db.writers import WriterGate, gated_connection_class, is_write


def test_only_statements_that_open_a_write_transaction_take_the_gate() -> None:
    assert is_write("INSERT INTO t VALUES (1)")
    assert is_write("  update t set a = 1")
    assert is_write("DELETE FROM t")
    assert is_write("REPLACE INTO t VALUES (1)")
    assert not is_write("SELECT * FROM t")
    assert not is_write("PRAGMA journal_mode=WAL")
    assert not is_write("CREATE TABLE t (a)")


def _table(db: Database) -> None:
    with db.engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (a INTEGER)"))


def test_concurrent_writers_queue_at_the_gate_not_in_sqlite(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'w.db'}")

    @event.listens_for(db.engine, "connect")
    def no_busy_wait(dbapi: sqlite3.Connection, _record: object) -> None:
        # Without SQLite's busy handler a writer meeting another fails at once ("database is
        # locked"): every insert below succeeds only if the gate queued the writers.
        dbapi.execute("PRAGMA busy_timeout=0")

    _table(db)
    inside = 0
    most = 0
    guard = threading.Lock()

    def write(n: int) -> None:
        nonlocal inside, most
        for i in range(20):
            with db.engine.begin() as conn:
                conn.execute(text("INSERT INTO t VALUES (:a)"), {"a": n * 100 + i})
                with guard:
                    inside += 1
                    most = max(most, inside)
                time.sleep(0.0005)
                with guard:
                    inside -= 1

    workers = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    with db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM t")).scalar_one() == 80
    assert most == 1  # never two write transactions at once
    db.dispose()


def test_rollback_and_failed_statements_give_the_gate_back(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'w.db'}")
    _table(db)
    with db.engine.begin() as conn:
        conn.execute(text("CREATE UNIQUE INDEX u ON t (a)"))
        conn.execute(text("INSERT INTO t VALUES (1)"))
    with pytest.raises(Exception, match="UNIQUE"), db.engine.begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (1)"))
    # The failed transaction rolled back and let go: the next writer does not wait.
    started = time.monotonic()
    with db.engine.begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (2)"))
    assert time.monotonic() - started < 5
    db.dispose()


def test_a_writer_in_another_process_makes_the_gate_wait_then_fail_clearly(
    tmp_path: Path,
) -> None:
    path = tmp_path / "g.db-writer.lock"
    gate = WriterGate(path, timeout=0.3)
    other = os.open(path, os.O_RDWR | os.O_CREAT)  # another open file: flock treats it apart
    fcntl.flock(other, fcntl.LOCK_EX)
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        gate.acquire()
    assert time.monotonic() - started >= 0.3
    fcntl.flock(other, fcntl.LOCK_UN)
    gate.acquire()  # free again, and the failed wait left the thread lock released
    gate.release()
    os.close(other)


def test_the_gate_is_handed_over_when_the_other_process_commits(tmp_path: Path) -> None:
    path = tmp_path / "h.db-writer.lock"
    gate = WriterGate(path, timeout=5)
    other = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(other, fcntl.LOCK_EX)
    unlocked = threading.Event()

    def commit() -> None:
        unlocked.set()
        fcntl.flock(other, fcntl.LOCK_UN)

    threading.Timer(0.05, commit).start()
    gate.acquire()  # raises StorageError if it were not handed over within the 5 s timeout
    # It waited for the other holder rather than taking the gate beside it (no timing involved:
    # the flag is set before the lock is released).
    handed_over = unlocked.is_set()
    gate.release()
    os.close(other)
    assert handed_over


def test_a_connection_class_releases_on_close(tmp_path: Path) -> None:
    gate = WriterGate(tmp_path / "c.db-writer.lock", timeout=0.2)
    conn = sqlite3.connect(tmp_path / "c.db", factory=gated_connection_class(gate))
    conn.take_gate()  # type: ignore[attr-defined]
    conn.close()
    gate.acquire()  # would time out if close had kept it
    gate.release()
