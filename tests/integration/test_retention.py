"""Retention (issue 34, docs/adr/0043): upkeep deletes session logs idle for longer than
CAIRN_RETENTION_SESSION_DAYS and unconfirmed episodes older than CAIRN_RETENTION_EPISODE_DAYS,
and keeps facts, decisions and confirmed episodes; the index stays in step."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import update
from sqlmodel import col, select

from cairn.bench.scratch import handled
from cairn.bot.pipeline import Pipeline
from cairn.cli import main
from cairn.core.settings import get_settings, load_settings
from cairn.db.models import AgentSession, ArtifactImage, MemoryRow, SessionEvent, utcnow
from cairn.memory import Scope
from cairn.runtime import Runtime, build_runtime, reset_runtime
from cairn.sessions.events import Attachment, ChatEvent
from cairn.workers.dispatch import InProcessDispatcher
from cairn.workers.upkeep import rotate_tiers

SCOPE = Scope("acme", "cairn")
LONG_AGO = utcnow() - timedelta(days=40)


def _say(rt: Runtime, thread: str, text: str) -> None:
    event = ChatEvent(
        "console", "acme", "C1", thread, "amy", text=text, event_id=f"e-{thread}", private=False
    )
    handled(rt, event)


def _age(rt: Runtime, thread: str) -> None:
    """Make the session of ``thread`` and its events LONG_AGO old."""
    with rt.db.session() as s:
        old = s.exec(select(AgentSession).where(AgentSession.thread_ref == thread)).one()
        s.execute(
            update(AgentSession).where(col(AgentSession.id) == old.id).values(updated_at=LONG_AGO)
        )
        s.execute(
            update(SessionEvent)
            .where(col(SessionEvent.session_id) == old.id)
            .values(created_at=LONG_AGO)
        )


def _seed(rt: Runtime) -> dict[str, int]:
    _say(rt, "t-old", "what runs on the old cluster?")
    _say(rt, "t-new", "what runs on the new cluster?")
    _age(rt, "t-old")
    remember = rt.memory.remember
    ids = {
        "old episode": remember(
            "amy: the disk filled up", SCOPE, kind="episode", created_at=LONG_AGO
        ),
        "new episode": remember("amy: the disk is fine now", SCOPE, kind="episode"),
        "confirmed episode": remember(
            "amy: we moved to eu-west", SCOPE, kind="episode", created_at=LONG_AGO
        ),
        "old decision": remember(
            "We deploy on Tuesdays only", SCOPE, kind="decision", created_at=LONG_AGO
        ),
    }
    with rt.db.session() as s:
        s.execute(
            update(MemoryRow)
            .where(col(MemoryRow.id) == ids["confirmed episode"].memory.id)
            .values(confirmed=True)
        )
    return {name: r.memory.id for name, r in ids.items()}


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def retaining(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Runtime:
    """A runtime that keeps sessions and episodes 30 days, on SQLite or PostgreSQL."""
    if request.param == "postgres":
        monkeypatch.setenv("CAIRN_DATABASE_URL", request.getfixturevalue("postgres_url"))
    monkeypatch.setenv("CAIRN_RETENTION_SESSION_DAYS", "30")
    monkeypatch.setenv("CAIRN_RETENTION_EPISODE_DAYS", "30")
    monkeypatch.setenv("CAIRN_MODEL_IMAGES", "1")  # attached images keep their bytes
    get_settings.cache_clear()
    rt = build_runtime(load_settings())
    reset_runtime(rt)
    return rt


def test_upkeep_deletes_old_sessions_and_episodes_and_keeps_decisions(retaining: Runtime) -> None:
    rt = retaining
    ids = _seed(rt)
    rotate_tiers(rt)
    with rt.db.session() as s:
        threads = set(s.exec(select(AgentSession.thread_ref)).all())
        kept = set(s.exec(select(MemoryRow.id)).all())
        events = s.exec(select(SessionEvent.text)).all()
    assert threads == {"t-new"}
    assert all("old cluster" not in text for text in events)
    assert kept == {ids["new episode"], ids["confirmed episode"], ids["old decision"]}
    assert rt.memory.index is not None
    assert rt.memory.index.count() == len(kept)
    rt.close()


def test_retention_deletes_the_bytes_of_images_attached_in_an_old_session(
    retaining: Runtime,
) -> None:
    from tests.unit.test_image_headers import png

    rt = retaining
    dispatcher = InProcessDispatcher()
    for thread in ("t-old", "t-new"):
        shot = Attachment(f"{thread}.png", "image/png", data=png(64, 48) + thread.encode())
        event = ChatEvent(
            "console", "acme", "C1", thread, "amy", text="the dashboard",
            event_id=f"i-{thread}", private=False, attachments=(shot,),
        )  # fmt: skip
        Pipeline(rt, dispatcher).accept(event)
    dispatcher.close()
    with rt.db.session() as s:
        assert len(s.exec(select(ArtifactImage)).all()) == 2
    _age(rt, "t-old")
    rotate_tiers(rt)
    with rt.db.session() as s:
        kept = [image.data for image in s.exec(select(ArtifactImage)).all()]
    assert kept == [png(64, 48) + b"t-new"]
    rt.close()


def test_memory_gc_tells_what_retention_would_delete_and_then_deletes_it(
    retaining: Runtime,
) -> None:
    _seed(retaining)
    retaining.close()
    runner = CliRunner()
    dry = runner.invoke(main, ["memory", "gc", "--tenant", "acme", "--dry-run", "--json"])
    assert json.loads(dry.output)["retention"] == {"sessions": 1, "events": 4, "episodes": 1}
    done = runner.invoke(main, ["memory", "gc", "--tenant", "acme"])
    assert "retention: deleted 1 sessions (4 events) and 1 episodes" in done.output
    doctor = runner.invoke(main, ["memory", "doctor", "--json"])
    assert json.loads(doctor.output)["healthy"], doctor.output


def test_retention_deletes_in_short_transactions_and_keeps_what_became_due_no_more(
    retaining: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import of years of history can leave 100,000 episodes past the cutoff: deleting them
    in one transaction held SQLite's single write lock while every message waited. Each
    transaction now deletes a few and asks again whether they are still due, so an episode
    confirmed after the run began is kept."""
    from sqlalchemy import event, text

    from cairn.memory import retention

    monkeypatch.setattr(retention, "WRITE_CHUNK", 2, raising=False)
    monkeypatch.setattr(retention, "SESSION_CHUNK", 1, raising=False)
    rt = retaining
    for thread in ("t-a", "t-b", "t-c"):
        _say(rt, thread, f"what runs on cluster {thread}?")
        _age(rt, thread)
    old = [
        rt.memory.remember(
            f"amy: host {n} was rebooted", SCOPE, kind="episode", created_at=LONG_AGO
        ).memory.id
        for n in range(5)
    ]
    deleted: list[tuple[str, int]] = []  # (table, rows) deleted by each write transaction
    running: dict[str, int] = {}
    confirmed_meanwhile = [False]

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        words = statement.split()
        if words[:2] == ["DELETE", "FROM"] and words[2] in ("memory", "agent_session"):
            running[words[2]] = running.get(words[2], 0) + max(cursor.rowcount, 0)
            if words[2] == "memory" and not confirmed_meanwhile[0]:
                confirmed_meanwhile[0] = True  # a steward confirms the last one meanwhile
                confirm = text("UPDATE memory SET confirmed = true WHERE id = :id")
                conn.execute(confirm, {"id": old[-1]})

    def commit(conn: Any) -> None:
        deleted.extend(sorted(running.items()))
        running.clear()

    event.listen(rt.db.engine, "after_cursor_execute", count)
    event.listen(rt.db.engine, "commit", commit)
    try:
        rotate_tiers(rt)
    finally:
        event.remove(rt.db.engine, "after_cursor_execute", count)
        event.remove(rt.db.engine, "commit", commit)
    assert deleted == [("agent_session", 1)] * 3 + [("memory", 2), ("memory", 2)]
    with rt.db.session() as s:
        assert s.exec(select(AgentSession)).all() == []
        kept = set(s.exec(select(MemoryRow.id)).all())
    assert kept == {old[-1]}  # confirmed after the run began: no longer due
    assert rt.memory.index is not None
    assert rt.memory.index.count() == 1
    rt.close()
