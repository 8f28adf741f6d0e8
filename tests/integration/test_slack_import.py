"""`cairn import slack` through the memory store, on SQLite and PostgreSQL: every person's
message an episode of its conversation with its author, time and thread, the checks of a live
message applied, private conversations private to themselves, and a second run adding nothing."""

from __future__ import annotations

import gc
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlmodel import col, select

from cairn.bot.slack.export import ExportMessage, SlackExport
from cairn.bot.slack.history import SlackImport, SlackImportReport, checkpoint_path
from cairn.db import Database
from cairn.db.models import MemoryRow
from cairn.memory.records import visible_to
from cairn.memory.scope import Scope
from cairn.memory.store import MemoryStore
from cairn.runtime import Runtime
from tests.support.slack_export import (
    DECISION,
    DM_WORDS,
    INSTRUCTION,
    PRIVATE_WORDS,
    SECRET,
    TEAM,
    Written,
    write_export,
)

TENANT = f"slack:{TEAM}"


@pytest.fixture
def export_zip(tmp_path: Path) -> tuple[Path, Written]:
    path = tmp_path / "export.zip"
    return path, write_export(path)


def _import(database: Database, path: Path, home: Path | None = None) -> SlackImportReport:
    """Import the export at ``path`` into ``database``, with a checkpoint under ``home``."""
    with SlackExport(path) as export:
        importer = SlackImport(MemoryStore(database, None), export, agent="cairn")
        days = export.days()
        total = importer.check(days)
        checkpoint = checkpoint_path(home, export, importer.tenant) if home else None
        return importer.run(days, checkpoint=checkpoint, total=total)


def _rows(database: Database) -> list[MemoryRow]:
    with database.session() as s:
        return list(s.exec(select(MemoryRow).order_by(col(MemoryRow.id))).all())


def _seen_from(database: Database, private_to: str | None) -> str:
    """Every text a conversation (a public one when ``private_to`` is None) may read."""
    scope = Scope(TENANT, "cairn", private_to=private_to)
    with database.session() as s:
        return "\n".join(s.exec(select(MemoryRow.text).where(visible_to(scope))).all())


def test_every_persons_message_is_an_episode_with_author_time_and_thread(
    database: Database, export_zip: tuple[Path, Written]
) -> None:
    path, written = export_zip
    report = _import(database, path)
    rows = _rows(database)
    assert report.tenant == TENANT
    assert {n: t.stored for n, t in report.channels.items()} == dict(written.human)
    assert len(rows) == sum(written.human.values())
    assert all(r.kind == "episode" and r.tenant_id == TENANT for r in rows)
    decision = next(r for r in rows if DECISION in r.text)
    assert decision.text == f"bob: {DECISION}"
    assert (decision.author, decision.source_platform) == ("U02BOB", "slack")
    assert decision.source_channel == "C00000000"
    assert decision.created_at.replace(tzinfo=UTC) == datetime.fromtimestamp(
        float(decision.source_message), UTC
    )
    replies = [r for r in rows if r.source_thread != r.source_message]
    assert replies
    starts = {(r.source_channel, r.source_message) for r in rows}
    assert all((r.source_channel, r.source_thread) in starts for r in replies)


def test_noise_is_left_out_and_counted(
    database: Database, export_zip: tuple[Path, Written]
) -> None:
    path, written = export_zip
    report = _import(database, path)
    skipped: dict[str, int] = {}
    for tally in report.channels.values():
        assert tally.read == tally.stored + tally.present + sum(tally.skipped.values())
        for why, n in tally.skipped.items():
            skipped[why] = skipped.get(why, 0) + n
    assert skipped == dict(written.noise)
    assert not any("has joined" in r.text or "deploy " in r.text for r in _rows(database))


def test_secrets_are_masked_instructions_flagged_and_guests_untrusted(
    database: Database, export_zip: tuple[Path, Written]
) -> None:
    path, _ = export_zip
    report = _import(database, path)
    rows = _rows(database)
    assert not any(SECRET in r.text for r in rows)
    assert any("release bot token is [secret removed" in r.text for r in rows)
    assert report.channels["general"].secrets == 1
    assert [r.text for r in rows if r.flagged] == [f"bob: {INSTRUCTION}"]
    assert report.channels["general"].flagged == 1
    assert {r.untrusted for r in rows if r.author == "U03GUEST"} == {True}
    assert {r.untrusted for r in rows if r.author != "U03GUEST"} == {False}


def test_private_channels_dms_and_group_dms_stay_private_to_themselves_and_channels_are_named(
    database: Database, export_zip: tuple[Path, Written]
) -> None:
    path, written = export_zip
    _import(database, path)
    rooms = {r.source_channel: r.private_to for r in _rows(database)}
    ids = written.conversations
    assert rooms[ids["general"]] is None
    assert rooms[ids["team-1"]] is None
    for private in ("secret-ops", "D00000000", "mpdm-alice--bob--carol-1"):
        assert rooms[ids[private]] == ids[private]
    # A channel's episodes are said in it by name; a DM or a group DM has none of its own.
    names = {r.source_channel: r.source_conversation for r in _rows(database)}
    assert names[ids["general"]] == "#general"
    assert names[ids["secret-ops"]] == "#secret-ops"
    assert names[ids["D00000000"]] == names[ids["mpdm-alice--bob--carol-1"]] == ""
    public = _seen_from(database, None)
    assert DECISION in public
    assert DM_WORDS not in public
    assert PRIVATE_WORDS not in public
    assert "In mpdm-" not in public
    in_dm = _seen_from(database, ids["D00000000"])
    assert DM_WORDS in in_dm
    assert PRIVATE_WORDS not in in_dm


def test_a_second_run_adds_nothing_with_or_without_its_checkpoint(
    database: Database, export_zip: tuple[Path, Written], tmp_path: Path
) -> None:
    path, written = export_zip
    home = tmp_path / "home"
    first = _import(database, path, home)
    again = _import(database, path, home)
    assert first.stored == sum(written.human.values())
    assert (again.stored, again.resumed) == (0, again.days)
    for checkpoint in (home / "imports").iterdir():
        checkpoint.unlink()
    third = _import(database, path, home)
    assert third.stored == 0
    assert sum(t.present for t in third.channels.values()) == first.stored
    assert len(_rows(database)) == first.stored


def test_a_public_decision_is_recalled_in_a_new_thread_and_a_dm_only_in_the_dm(
    runtime: Runtime, export_zip: tuple[Path, Written]
) -> None:
    path, written = export_zip
    agent = runtime.settings.agent
    with SlackExport(path) as export:
        SlackImport(runtime.memory, export, agent=agent).run(export.days())
    runtime.memory.flush_outbox()
    dm = written.conversations["D00000000"]
    # A new thread in another public channel than the one the decision was made in.
    public = Scope(TENANT, agent, written.conversations["team-1"], "U02BOB", "9999.000001")
    found = runtime.memory.recall("what did we decide about the payments database?", public)
    assert DECISION in found[0].memory.text
    question = "what is the quartz-zebra offer for Bob?"
    assert not any(DM_WORDS in r.memory.text for r in runtime.memory.recall(question, public, 20))
    in_dm = Scope(TENANT, agent, dm, "U01ALICE", "9999.000002", private_to=dm)
    assert DM_WORDS in runtime.memory.recall(question, in_dm)[0].memory.text


def test_a_checkpoint_is_not_believed_by_a_database_without_the_import(
    database: Database, export_zip: tuple[Path, Written], tmp_path: Path
) -> None:
    path, written = export_zip
    home = tmp_path / "home"
    _import(database, path, home)
    (checkpoint,) = (home / "imports").iterdir()
    checkpoint.write_text(checkpoint.read_text() + "general/2026-01-0")  # a line cut by a kill
    other = Database(f"sqlite:///{tmp_path / 'other.db'}")
    other.migrate()
    try:
        report = _import(other, path, home)
        assert (report.stored, report.resumed) == (sum(written.human.values()), 0)
        assert checkpoint.read_text().endswith(".json\n")
    finally:
        other.dispose()


def test_the_import_holds_one_day_of_messages_however_long_the_export(
    database: Database, tmp_path: Path
) -> None:
    path = tmp_path / "export.zip"
    per_day = 20
    written = write_export(path, days=3, per_day=per_day)
    held: list[int] = []

    def progress(done: int, total: int) -> None:
        held.append(sum(1 for o in gc.get_objects() if isinstance(o, ExportMessage)))

    with SlackExport(path) as export:
        importer = SlackImport(MemoryStore(database, None), export, agent="cairn")
        report = importer.run(export.days(), progress=progress)
    assert report.stored == sum(written.human.values())
    assert len(held) >= written.messages // 50
    assert max(held) <= per_day, f"held up to {max(held)} messages at once"
