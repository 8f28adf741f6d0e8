"""Upkeep jobs on the real database: stuck sessions found, idle sessions ended and reopened."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import update
from sqlmodel import col

from cairn.db.models import AgentSession, SessionEvent, utcnow
from cairn.memory import Scope
from cairn.runtime import Runtime
from cairn.sessions.events import ChatEvent
from cairn.sessions.ingest import ingest
from cairn.sessions.log import EventLog
from cairn.workers import upkeep
from cairn.workers.celery_app import configure_celery
from cairn.workers.turn import handle_pending


def _message(rt: Runtime, thread: str, text: str = "remember the wiki is wiki.acme.test") -> int:
    event = ChatEvent(
        platform="console", tenant="acme", channel="C", thread=thread, user="ann", text=text
    )
    result = ingest(EventLog(rt.db), event, agent="cairn", max_chars=1000)
    assert result.session_id is not None
    return result.session_id


def _age(
    rt: Runtime, model: type[SessionEvent] | type[AgentSession], column: str, seconds: float
) -> None:
    with rt.db.session() as s:
        s.exec(update(model).values({column: utcnow() - timedelta(seconds=seconds)}))


def test_pending_events_older_than_the_limit_mark_their_session_stale(runtime: Runtime) -> None:
    stuck = _message(runtime, "stuck")
    _age(runtime, SessionEvent, "created_at", 120)
    fresh = _message(runtime, "fresh")
    assert upkeep.stale_sessions(runtime, older_than=60) == [stuck]
    handle_pending(runtime, stuck)
    handle_pending(runtime, fresh)
    assert upkeep.stale_sessions(runtime, older_than=0) == []


def test_idle_sessions_end_run_the_hooks_and_reopen_on_a_new_message(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    monkeypatch.setattr(upkeep, "SESSION_END_HOOKS", [lambda rt, sid: seen.append(sid)])
    idle = _message(runtime, "idle")
    handle_pending(runtime, idle)
    _age(runtime, AgentSession, "updated_at", 7200)
    active = _message(runtime, "active")
    assert upkeep.end_idle_sessions(runtime, idle=3600) == [idle]
    assert seen == [idle]
    assert EventLog(runtime.db).session(idle).status == "ended"
    assert EventLog(runtime.db).session(active).status == "open"
    _message(runtime, "idle", "are you there?")
    assert EventLog(runtime.db).session(idle).status == "open"


def test_a_failing_hook_does_not_keep_a_session_open(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(rt: Runtime, session_id: int) -> None:
        raise RuntimeError("extractor down")

    monkeypatch.setattr(upkeep, "SESSION_END_HOOKS", [broken])
    session = _message(runtime, "t")
    handle_pending(runtime, session)
    with runtime.db.session() as s:
        s.exec(
            update(AgentSession)
            .where(col(AgentSession.id) == session)
            .values(updated_at=utcnow() - timedelta(hours=2))
        )
    assert upkeep.end_idle_sessions(runtime, idle=60) == [session]
    assert "extractor down" in caplog.text


def test_the_ticker_runs_its_jobs_until_stopped() -> None:
    ran = threading.Event()
    ticker = upkeep.Ticker([upkeep.Periodic("ran", 0.05, ran.set)]).start()
    try:
        assert ran.wait(5)
    finally:
        ticker.stop()


def test_the_ticker_runs_each_job_on_its_first_round_then_at_its_own_interval() -> None:
    fast: list[float] = []
    slow: list[int] = []
    four = threading.Event()

    def tick() -> None:
        fast.append(time.monotonic())
        if len(fast) >= 4:
            four.set()

    jobs = [
        upkeep.Periodic("fast", 0.05, tick),
        upkeep.Periodic("slow", 3600, lambda: slow.append(1)),
    ]
    ticker = upkeep.Ticker(jobs).start()
    try:
        assert four.wait(5)
    finally:
        ticker.stop()
    assert len(slow) == 1


@pytest.mark.parametrize("beat_interval", [45.0, 1000.0])
def test_beat_and_the_in_process_ticker_run_one_schedule(
    runtime: Runtime, beat_interval: float
) -> None:
    workers = runtime.settings.workers.model_copy(update={"beat_interval": beat_interval})
    settings = runtime.settings.model_copy(update={"workers": workers})
    ticker = upkeep.in_process_ticker(replace(runtime, settings=settings), lambda sid: None)
    in_process = {job.name: job.every for job in ticker.jobs}
    app = configure_celery(settings)
    try:
        beat = {name: entry["schedule"] for name, entry in app.conf.beat_schedule.items()}
        tasks = {entry["task"] for entry in app.conf.beat_schedule.values()}
    finally:
        configure_celery(runtime.settings)
    assert beat == in_process == {job.name: job.every(settings) for job in upkeep.JOBS}
    assert in_process == {
        "reconcile-index": beat_interval,
        "requeue-stale": beat_interval,
        "expire-approvals": beat_interval,
        "end-idle-sessions": max(beat_interval, 300.0),
        "rotate-tiers": 3600.0,
        "expire-memos": 3600.0,
    }
    import cairn.workers.tasks  # noqa: F401 (registers the tasks beat sends)

    assert tasks <= set(app.tasks)


def test_tier_rotation_runs_for_every_tenant(runtime: Runtime) -> None:
    _message(runtime, "t1")
    runtime.memory.remember("the build cache is on s3", Scope("globex", "cairn"))
    assert upkeep.rotate_tiers(runtime) == 2


def test_learning_extraction_is_a_session_end_hook() -> None:
    from cairn.workers.session_end import end_session

    assert end_session in upkeep.SESSION_END_HOOKS


def test_a_crash_while_the_hooks_run_leaves_the_session_to_be_reviewed_next_time(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    def dies(rt: Runtime, session_id: int) -> None:
        raise SystemExit("the worker is killed while the learnings are extracted")

    session = _message(runtime, "t")
    handle_pending(runtime, session)
    _age(runtime, AgentSession, "updated_at", 7200)
    monkeypatch.setattr(upkeep, "SESSION_END_HOOKS", [dies])
    with pytest.raises(SystemExit):
        upkeep.end_idle_sessions(runtime, idle=3600)
    assert EventLog(runtime.db).session(session).status == "open"  # not yet reviewed

    reviewed: list[int] = []
    monkeypatch.setattr(upkeep, "SESSION_END_HOOKS", [lambda rt, sid: reviewed.append(sid)])
    assert upkeep.end_idle_sessions(runtime, idle=3600) == [session]
    assert reviewed == [session]
    assert EventLog(runtime.db).session(session).status == "ended"
