"""`cairn import slack` through the memory store, on SQLite and PostgreSQL: every person's
message an episode of its conversation with its author, time and thread, the checks of a live
message applied, private conversations private to themselves, and a second run adding nothing."""

from __future__ import annotations

import gc
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from sqlmodel import col, select

from cairn.bot.imported import ChannelTally, Episodes
from cairn.bot.slack.export import ExportMessage, SlackExport
from cairn.bot.slack.history import SlackImport, SlackImportReport, checkpoint_path
from cairn.db import Database
from cairn.db.models import MemoryRow
from cairn.memory.records import visible_to
from cairn.memory.scope import Scope
from cairn.memory.store import MemoryStore
from cairn.runtime import Runtime
from cairn.sessions.events import ChatEvent
from tests.support.slack_export import (
    DECISION,
    DM_WORDS,
    INSTRUCTION,
    PRIVATE_WORDS,
    SECRET,
    TEAM,
    Written,
    add_edits,
    write_export,
)

TENANT = f"slack:{TEAM}"


@pytest.fixture
def export_zip(tmp_path: Path) -> tuple[Path, Written]:
    path = tmp_path / "export.zip"
    return path, write_export(path)


def _import(
    database: Database,
    path: Path,
    home: Path | None = None,
    since: date | None = None,
    until: date | None = None,
) -> SlackImportReport:
    """Import the export at ``path`` into ``database`` (the days from ``since`` to ``until``),
    with a checkpoint under ``home``."""
    with SlackExport(path) as export:
        importer = SlackImport(MemoryStore(database, None), export, agent="cairn")
        days = export.days(since=since, until=until)
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


def _live(database: Database) -> list[str]:
    return [r.text for r in _rows(database) if not r.retracted]


def test_an_edit_in_a_later_day_file_gives_the_episode_its_last_text_checked(
    database: Database, export_zip: tuple[Path, Written], tmp_path: Path
) -> None:
    path, written = export_zip
    decision = add_edits(path)
    home = tmp_path / "home"
    first = _import(database, path, home)
    general = first.channels["general"]
    assert general.edited == 1
    assert general.skipped["edit by another"] == 1
    assert general.skipped["edit of a message not kept"] == 1
    assert general.read == (
        general.stored + general.present + general.edited + sum(general.skipped.values())
    )
    assert general.secrets == 2  # the original export's credential, and the edit's
    live = _live(database)
    assert f"bob: {DECISION}" not in live
    (now,) = [t for t in live if "Postgres 17" in t]
    assert now.startswith("bob: We decided")
    assert SECRET not in now
    assert "[secret removed" in now
    assert "alice rewrote" not in "\n".join(live)
    assert "never exported" not in "\n".join(live)
    assert len(live) == sum(written.human.values())
    rows = _rows(database)
    (old,) = [r for r in rows if r.text == f"bob: {DECISION}"]
    (new,) = [r for r in rows if r.text == now]
    assert (old.retracted, old.retraction_reason, old.retracted_by) == (True, "edited", "U02BOB")
    # The edited episode is the message's: its id, thread, time and author.
    assert (new.source_message, new.source_thread) == (old.source_message, old.source_thread)
    assert (new.created_at, new.author, new.retracted) == (old.created_at, "U02BOB", False)
    assert new.source_message == decision["ts"]
    # Running it again changes nothing, with the checkpoint and without it.
    again = _import(database, path, home)
    for checkpoint in (home / "imports").iterdir():
        checkpoint.unlink()
    third = _import(database, path, home)
    assert again.stored == third.stored == 0
    assert third.channels["general"].edited == 0
    assert [(r.id, r.text, r.retracted) for r in _rows(database)] == [
        (r.id, r.text, r.retracted) for r in rows
    ]


def test_an_edit_of_a_message_an_earlier_run_imported_is_applied_and_others_only_counted(
    database: Database, export_zip: tuple[Path, Written]
) -> None:
    path, written = export_zip
    add_edits(path)
    later = date(2026, 1, 9)
    alone = _import(database, path, since=later)
    assert alone.stored == 0
    assert _rows(database) == []
    assert alone.channels["general"].skipped == {"edit of a message not kept": 3}
    _import(database, path, until=date(2026, 1, 8))
    assert f"bob: {DECISION}" in _live(database)
    edits = _import(database, path, since=later)
    assert (edits.stored, edits.channels["general"].edited) == (0, 1)
    live = _live(database)
    assert f"bob: {DECISION}" not in live
    assert any("Postgres 17" in t for t in live)
    assert len(live) == sum(written.human.values())


def test_an_edit_back_to_an_edited_away_text_makes_it_current_and_a_retraction_sticks(
    database: Database,
) -> None:
    memory = MemoryStore(database, None)
    episodes = Episodes(memory, agent="cairn", max_chars=4000)
    tally = ChannelTally("general", "channel", private=False)

    def said(text: str, ts: str = "1767600000.000100") -> ChatEvent:
        return ChatEvent(
            platform="slack",
            tenant=TENANT,
            channel="C00000000",
            thread=ts,
            user="U02BOB",
            text=text,
            message_id=ts,
            private=False,
        )

    def live() -> list[str]:
        return [r.text for r in _rows(database) if not r.retracted]

    episodes.keep(said("the cutover is on Friday"), "bob", datetime(2026, 1, 5, tzinfo=UTC), tally)
    episodes.edit(said("the cutover is on Monday"), "bob", tally)
    episodes.edit(said("the cutover is on Friday"), "bob", tally)  # back to the first text
    assert live() == ["bob: the cutover is on Friday"]
    episodes.edit(said("the cutover is on Friday"), "bob", tally)  # read again: nothing
    assert (tally.edited, tally.present, len(_rows(database))) == (2, 1, 2)

    # A text someone else retracted stays retracted, whatever edit says it again.
    other = said("the cutover is on Sunday", "1767600000.000200")
    episodes.keep(other, "bob", datetime(2026, 1, 5, tzinfo=UTC), tally)
    (sunday,) = [r for r in _rows(database) if "Sunday" in r.text]
    memory.retract(sunday.id or 0, Scope(TENANT, "cairn"), by="U01ALICE", reason="wrong")
    episodes.edit(said("the cutover is on Sunday"), "bob", tally)
    assert live() == ["bob: the cutover is on Friday"]
    assert tally.skipped == {"retracted": 1}
