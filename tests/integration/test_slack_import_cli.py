"""`cairn import slack` as people run it: a JSON tally, a malformed export refused before
anything is written, and a run killed with SIGKILL that a second run completes, with nothing
lost, nothing doubled and every private message still private."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlmodel import col, func, select

from cairn.cli import main
from cairn.db import Database
from cairn.db.models import MemoryRow
from tests.support.slack_export import add_edits, write_export


@pytest.fixture(autouse=True)
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The import is under test, not the embedding model: vectors are left out."""
    monkeypatch.setenv("CAIRN_EMBEDDINGS", "none")


def _db(home: Path) -> Database:
    return Database(f"sqlite:///{home / 'cairn.db'}")


def _count(home: Path) -> int:
    db = _db(home)
    try:
        with db.session() as s:
            return int(s.exec(select(func.count()).select_from(MemoryRow)).one())
    finally:
        db.dispose()


def test_the_json_tally_counts_per_channel_and_a_second_run_adds_nothing(
    tmp_path: Path, clean_env: Path
) -> None:
    path = tmp_path / "export.zip"
    written = write_export(path)
    first = CliRunner().invoke(main, ["import", "slack", str(path), "--json"])
    assert first.exit_code == 0, first.output
    report = json.loads(first.output)
    assert report["stored"] == sum(written.human.values())
    assert report["channels"]["general"]["skipped"] == {"bot": 6, "join": 1}
    assert report["channels"]["general"]["secrets"] == 1
    again = CliRunner().invoke(main, ["import", "slack", str(path), "--json"])
    assert json.loads(again.output)["stored"] == 0
    assert _count(clean_env) == report["stored"]


def test_the_closing_table_counts_the_edits_of_messages_an_earlier_day_held(
    tmp_path: Path, clean_env: Path
) -> None:
    path = tmp_path / "export.zip"
    write_export(path)
    add_edits(path)
    done = CliRunner().invoke(main, ["import", "slack", str(path)])
    assert done.exit_code == 0, done.output
    heading = next(line for line in done.output.splitlines() if "present" in line)
    assert heading.split("┃")[7].strip() == "edited"
    general = next(line for line in done.output.splitlines() if "│ general" in line)
    assert general.split("│")[7].strip() == "1"
    assert "1 edit by another" in general
    assert "1 edit of a message not kept" in general


def test_channels_and_days_are_chosen(tmp_path: Path, clean_env: Path) -> None:
    path = tmp_path / "export.zip"
    write_export(path)
    args = ["--channels", "#general,secret-ops", "--since", "2026-01-06", "--until", "2026-01-06"]
    done = CliRunner().invoke(main, ["import", "slack", str(path), *args])
    assert done.exit_code == 0, done.output
    assert "general" in done.output
    assert "team-1" not in done.output
    db = _db(clean_env)
    with db.session() as s:
        rooms = set(s.exec(select(MemoryRow.source_channel).distinct()).all())
        days = {r.date().isoformat() for r in s.exec(select(MemoryRow.created_at)).all()}
    db.dispose()
    assert rooms == {"C00000000", "G00000000"}
    assert days == {"2026-01-06"}


def test_a_malformed_export_is_refused_before_anything_is_written(
    tmp_path: Path, clean_env: Path
) -> None:
    path = tmp_path / "export.zip"
    write_export(path, malformed="team-1/2026-01-07.json")
    done = CliRunner().invoke(main, ["import", "slack", str(path)])
    assert done.exit_code != 0
    assert "nothing imported: team-1/2026-01-07.json, line 4" in done.output
    assert _count(clean_env) == 0


@pytest.mark.slow
def test_a_run_killed_part_way_is_completed_by_the_next_without_loss_or_double(
    tmp_path: Path, clean_env: Path
) -> None:
    path = tmp_path / "export.zip"
    written = write_export(path, days=4, per_day=60)
    command = [sys.executable, "-m", "cairn", "import", "slack", str(path), "--json"]
    env = {**os.environ, "CAIRN_EMBEDDINGS": "none"}
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    checkpoint: list[Path] = []
    while time.monotonic() < deadline and child.poll() is None:
        checkpoint = list((clean_env / "imports").glob("*.done"))
        if checkpoint and checkpoint[0].read_text().count("\n") >= 3:
            break
        time.sleep(0.05)
    assert child.poll() is None, "the import ended before it could be killed"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    killed_at = _count(clean_env)
    assert 0 < killed_at < sum(written.human.values())
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert sum(t["resumed"] for t in report["channels"].values()) >= 3
    db = _db(clean_env)
    with db.session() as s:
        rows = list(s.exec(select(MemoryRow).order_by(col(MemoryRow.id))).all())
    db.dispose()
    messages = [(r.source_channel, r.source_message) for r in rows]
    assert len(messages) == len(set(messages)) == sum(written.human.values())
    public = {"C00000000", "C00000001"}
    for row in rows:
        assert row.private_to == (None if row.source_channel in public else row.source_channel)


@pytest.mark.slow
def test_the_benchmark_imports_an_export_twice_and_the_second_run_adds_nothing(
    tmp_path: Path,
) -> None:
    from cairn.bench.slack_import import measure

    figures = measure(300, tmp_path, "none")
    assert figures.messages == 300
    assert 0 < figures.stored < figures.messages
    assert figures.second_run_stored == 0
    assert figures.peak_mib > 0
    assert figures.database_mib > 0
    assert (figures.missing, figures.doubled, figures.not_private) == (0, 0, 0)
    assert figures.killed_at is None


@pytest.mark.slow
def test_the_benchmark_kills_the_first_import_part_way_and_the_resumed_one_loses_nothing(
    tmp_path: Path,
) -> None:
    from cairn.bench.slack_import import measure

    figures = measure(2000, tmp_path, "none", kill_at=0.4)
    assert figures.killed_at is not None
    assert 0 < figures.killed_at < figures.stored
    assert figures.second_run_stored == 0
    assert (figures.missing, figures.doubled, figures.not_private) == (0, 0, 0)


def test_the_benchmark_check_finds_a_message_missing_doubled_or_outside_its_privacy(
    tmp_path: Path,
) -> None:
    from cairn.bench.slack_import import _checked

    path = tmp_path / "cairn.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE memory (source_channel, source_message, private_to)")
        db.executemany(
            "INSERT INTO memory VALUES (?, ?, ?)",
            [
                ("C1", "1.0", None),  # public, right
                ("G1", "2.0", "G1"),  # private, right
                ("G1", "2.0", "G1"),  # the same message twice
                ("D1", "3.0", None),  # a DM's message made workspace memory
                ("C1", "4.0", "C1"),  # a public channel's message kept private
            ],
        )
    db.close()
    assert _checked(path, 4, {"C1"}) == (0, 1, 2)
    assert _checked(path, 6, {"C1"}) == (2, 1, 2)
