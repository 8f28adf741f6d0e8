"""Memos between agents on the real database: addressing, priority, expiry, receipts."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from cairn.db.models import utcnow
from cairn.errors import InvalidInput, NotFound
from cairn.memos import ALL_AGENTS, MemoBox
from cairn.runtime import Runtime


@pytest.fixture
def box(runtime: Runtime) -> MemoBox:
    return MemoBox(runtime.db)


def test_a_memo_reaches_its_recipient_and_no_other_agent(box: MemoBox) -> None:
    box.send("acme", "ops", "review", "deploys are frozen until Monday")
    assert [m.text for m in box.inbox("acme", "review")] == ["deploys are frozen until Monday"]
    assert box.inbox("acme", "oncall") == []
    assert box.inbox("globex", "review") == []


def test_a_broadcast_reaches_every_agent_but_the_sender(box: MemoBox) -> None:
    box.send("acme", "ops", ALL_AGENTS, "incident 42 is over")
    assert len(box.inbox("acme", "review")) == 1
    assert len(box.inbox("acme", "oncall")) == 1
    assert box.inbox("acme", "ops") == []


def test_higher_priority_comes_first_then_the_oldest(box: MemoBox) -> None:
    box.send("acme", "ops", "review", "low", priority=-1)
    box.send("acme", "ops", "review", "first normal")
    box.send("acme", "ops", "review", "urgent", priority=5)
    box.send("acme", "ops", "review", "second normal")
    assert [m.text for m in box.inbox("acme", "review")] == [
        "urgent",
        "first normal",
        "second normal",
        "low",
    ]


def test_expired_memos_are_not_delivered(box: MemoBox) -> None:
    box.send("acme", "ops", "review", "soon stale", expires_at=utcnow() + timedelta(seconds=1))
    assert box.inbox("acme", "review")
    time.sleep(1.2)
    assert box.inbox("acme", "review") == []


def test_read_and_acknowledged_state_is_per_recipient(box: MemoBox) -> None:
    memo = box.send("acme", "ops", ALL_AGENTS, "rotate the API keys")
    box.mark_read("acme", "review", [memo.id])
    [seen] = box.inbox("acme", "review")
    assert seen.read
    assert not seen.acknowledged
    assert box.inbox("acme", "review", include_read=False) == []
    assert box.acknowledge("acme", "review", memo.id).acknowledged
    assert box.inbox("acme", "review") == []
    [other] = box.inbox("acme", "oncall")
    assert not other.read


def test_acknowledging_someone_elses_memo_is_not_found(box: MemoBox) -> None:
    memo = box.send("acme", "ops", "review", "for review only")
    with pytest.raises(NotFound):
        box.acknowledge("acme", "oncall", memo.id)
    with pytest.raises(NotFound):
        box.acknowledge("globex", "review", memo.id)


@pytest.mark.parametrize(
    ("recipient", "text", "priority", "error"),
    [
        ("review", "", 0, "needs some text"),
        ("review", "x" * 4001, 0, "at most 4000"),
        ("Review Team", "hi", 0, "not an agent name"),
        ("review", "hi", 11, "priority"),
    ],
)
def test_bad_memos_are_refused(
    box: MemoBox, recipient: str, text: str, priority: int, error: str
) -> None:
    with pytest.raises(InvalidInput, match=error):
        box.send("acme", "ops", recipient, text, priority=priority)


def test_an_expiry_in_the_past_is_refused(box: MemoBox) -> None:
    with pytest.raises(InvalidInput, match="future"):
        box.send("acme", "ops", "review", "late", expires_at=utcnow() - timedelta(minutes=1))
