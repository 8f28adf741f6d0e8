"""Memos between agents on the real database: addressing, priority, expiry, receipts."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from cairn.core.errors import InvalidInput, NotFound
from cairn.db.models import utcnow
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


def test_old_memos_do_not_crowd_out_new_ones_and_any_memo_can_be_acknowledged(
    box: MemoBox,
) -> None:
    old = [box.send("acme", "ops", "review", f"old note {n}") for n in range(30)]
    box.mark_read("acme", "review", [m.id for m in old])
    fresh = box.send("acme", "ops", "review", "new note")
    # Read memos are left out before the page is cut, so the new one is on it.
    assert [m.text for m in box.inbox("acme", "review", include_read=False, limit=5)] == [
        "new note"
    ]
    assert len(box.inbox("acme", "review", limit=5)) == 5
    # The 30th memo is past the first page of the inbox, yet it can be acknowledged.
    assert box.acknowledge("acme", "review", old[-1].id).acknowledged
    assert old[-1].id not in [m.id for m in box.inbox("acme", "review", limit=100)]
    assert fresh.id in [m.id for m in box.inbox("acme", "review", limit=100)]


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


def test_upkeep_deletes_memos_long_past_their_expiry_and_keeps_the_rest(
    runtime: Runtime, box: MemoBox
) -> None:
    from sqlmodel import select

    from cairn.db.models import MemoReceipt
    from cairn.workers.upkeep import expire_memos

    stale = box.send(
        "acme", "ops", "review", "old news", expires_at=utcnow() + timedelta(seconds=1)
    )
    box.mark_read("acme", "review", [stale.id])
    fresh = box.send("acme", "ops", "review", "still due", expires_at=utcnow() + timedelta(days=1))
    lasting = box.send("acme", "ops", "review", "no expiry")
    time.sleep(1.2)
    # Within the keep window nothing is deleted; the expired memo is simply not delivered.
    assert expire_memos(runtime) == 0
    assert [m.id for m in box.inbox("acme", "review")] == [fresh.id, lasting.id]
    # Far enough past its expiry it goes, with its receipt; the others stay.
    keep = timedelta(seconds=runtime.settings.workers.memo_keep_expired)
    later = utcnow() + keep + timedelta(seconds=5)
    assert box.purge_expired(older_than=keep, now=later) == 1
    assert [m.id for m in box.inbox("acme", "review")] == [fresh.id, lasting.id]
    with runtime.db.session() as s:
        assert s.exec(select(MemoReceipt).where(MemoReceipt.memo_id == stale.id)).all() == []
    assert box.purge_expired(older_than=keep, now=later) == 0  # done once, nothing left


def test_a_memo_sent_from_a_private_conversation_is_shown_only_there(box: MemoBox) -> None:
    box.send("acme", "ops", "review", "my salary is 123456", private_to="D1")
    box.send("acme", "ops", "review", "deploys are frozen")
    public = [m.text for m in box.inbox("acme", "review")]
    assert public == ["deploys are frozen"]
    other_dm = [m.text for m in box.inbox("acme", "review", private_to="D2")]
    assert other_dm == ["deploys are frozen"]
    same_dm = {m.text for m in box.inbox("acme", "review", private_to="D1")}
    assert same_dm == {"my salary is 123456", "deploys are frozen"}
    operator = {m.text for m in box.inbox("acme", "review", every_conversation=True)}
    assert operator == same_dm
    secret = next(m for m in box.inbox("acme", "review", private_to="D1") if "salary" in m.text)
    with pytest.raises(NotFound):
        box.acknowledge("acme", "review", secret.id)
    assert box.acknowledge("acme", "review", secret.id, private_to="D1").acknowledged
