"""Memories from untrusted authors start unconfirmed and rank lower until a person confirms them;
platform admins may retract anyone's memory by reaction. On the embedded default's real storage,
through ingest, the worker's turn and the feedback path."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from cairn.core.settings import MemorySettings, Settings, load_settings
from cairn.memory import Scope, Source
from cairn.memory.ranking import Standing, modifier
from cairn.runtime import Runtime, build_runtime, reset_runtime
from cairn.sessions.events import ChatEvent, EventType
from cairn.sessions.ingest import Admission, ingest
from cairn.sessions.log import EventLog
from cairn.workers.turn import handle_pending
from tests.integration.test_session_flow import _deliver, _outbound

SCOPE = Scope("acme", "cairn")


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("CAIRN_UNTRUSTED_USERS", '["mallory"]')
    return load_settings()


@pytest.fixture
def runtime(settings: Settings) -> Iterator[Runtime]:
    rt = build_runtime(settings)
    reset_runtime(rt)
    yield rt
    reset_runtime(None)
    rt.close()


def _say(rt: Runtime, text: str, *, user: str, untrusted: bool = False, thread: str = "t1") -> int:
    event = ChatEvent(
        "console", "acme", "C1", thread, user, text=text, untrusted=untrusted, private=False
    )
    result = ingest(EventLog(rt.db), event, agent="cairn", max_chars=1000)
    assert result.session_id is not None
    handle_pending(rt, result.session_id)
    return result.session_id


def _react(rt: Runtime, target: str, emoji: str, *, user: str, admin: bool = False) -> None:
    event = ChatEvent(
        "console",
        "acme",
        "C1",
        "t1",
        user,
        type=EventType.REACTION_ADDED,
        reaction=emoji,
        target_id=target,
        event_id=f"{target}-{emoji}-{user}",
        admin=admin,
        private=False,
    )
    result = ingest(EventLog(rt.db), event, agent="cairn", max_chars=1000)
    assert result.admission is Admission.QUEUED
    assert result.session_id is not None
    handle_pending(rt, result.session_id)


def test_the_untrusted_weight_lowers_the_rank_until_confirmed() -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    base = Standing(now, validity=0.0, usefulness=0.0, disputes=0, tier="hot", same_place=False)
    trusted = modifier(MemorySettings(weight_untrusted=0.6), base, now)
    doubted = replace(base, untrusted=True)
    assert modifier(MemorySettings(weight_untrusted=0.6), doubted, now) == pytest.approx(
        0.6 * trusted
    )
    assert modifier(MemorySettings(weight_untrusted=1.0), doubted, now) == trusted


def test_a_configured_untrusted_users_memory_starts_unconfirmed_and_flagged(
    runtime: Runtime,
) -> None:
    _say(runtime, "remember the build cache lives on cache-3", user="mallory")
    _say(runtime, "remember the build runner lives on runner-7", user="ann", thread="t2")
    by_text = {m.text: m for m in runtime.memory.newest(SCOPE)}
    assert by_text["the build cache lives on cache-3"].untrusted
    assert not by_text["the build cache lives on cache-3"].confirmed
    assert not by_text["the build runner lives on runner-7"].untrusted


def test_a_guest_flagged_by_the_frontend_is_untrusted(runtime: Runtime) -> None:
    _say(runtime, "remember the wiki moved to wiki-2", user="gus", untrusted=True)
    (memory,) = runtime.memory.newest(SCOPE)
    assert memory.untrusted


def test_an_untrusted_memory_ranks_below_an_equally_relevant_one_until_confirmed(
    runtime: Runtime,
) -> None:
    trusted = runtime.memory.remember("The release manager this week is Ann", SCOPE)
    doubtful = runtime.memory.remember(
        "The release manager this week is Bob", SCOPE, source=Source(author="x", untrusted=True)
    )
    query = "who is the release manager this week?"
    found = [r.memory.id for r in runtime.memory.recall(query, SCOPE, 2)]
    assert found == [trusted.memory.id, doubtful.memory.id]
    scores = {r.memory.id: r.score for r in runtime.memory.recall(query, SCOPE, 2)}
    assert scores[doubtful.memory.id] < 0.8 * scores[trusted.memory.id]

    runtime.memory.adjust(doubtful.memory.id, validity=1.0, confirmed=True)
    lifted = {r.memory.id: r.score for r in runtime.memory.recall(query, SCOPE, 2)}
    assert lifted[doubtful.memory.id] > scores[doubtful.memory.id] / 0.6 * 0.95


def test_a_platform_admin_retracts_someone_elses_memory_and_a_member_disputes(
    runtime: Runtime,
) -> None:
    session_id = _say(runtime, "remember the on-call phone is in drawer 2", user="ann")
    notice = next(m for m in _outbound(runtime, session_id) if m.kind == "notice")
    target = _deliver(runtime, notice)
    _react(runtime, target, "x", user="bob")
    (memory,) = runtime.memory.newest(SCOPE)
    assert (memory.retracted, memory.disputes) == (False, 1)
    _react(runtime, target, "wastebasket", user="boss", admin=True)
    (gone,) = runtime.memory.newest(SCOPE, include_retracted=True)
    assert gone.retracted
    assert runtime.memory.recall("where is the on-call phone?", SCOPE) == []
