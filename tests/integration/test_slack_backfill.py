"""Reading a thread's earlier messages within Slack's 2025 limits for apps outside the
Marketplace: the real Bolt app and slack_sdk against the Web API stand-in, which serves
conversations.replies as Slack does then (pages of 15, one request a minute per workspace)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from sqlmodel import col, select

from cairn.bot.slack.backfill import TIERS, ThreadReader
from cairn.bot.slack.web import web_client
from cairn.core.settings import load_settings
from cairn.db.models import AgentSession, EventKind, SessionEvent
from tests.support.slack_api import BOT_TOKEN, BOT_USER, SlackAPI
from tests.support.slack_harness import Harness, running_slack

CHANNEL = "C0CHAN"


def mention(text: str, *, ts: str, thread_ts: str) -> dict[str, Any]:
    return {
        "type": "app_mention",
        "user": "UANN",
        "text": f"<@{BOT_USER}> {text}",
        "ts": ts,
        "thread_ts": thread_ts,
        "channel": CHANNEL,
        "event_ts": ts,
    }


def said(text: str, *, ts: str, thread_ts: str, user: str = "UBOB") -> dict[str, Any]:
    return {"type": "message", "user": user, "text": text, "ts": ts, "thread_ts": thread_ts}


def thread(root: int, replies: int) -> list[dict[str, Any]]:
    """A thread at second ``root`` with ``replies`` replies, one a second after it."""
    ts = f"{root}.000100"
    return [
        said(f"message {n} of {root}", ts=f"{root + n}.000100", thread_ts=ts)
        for n in range(replies + 1)
    ]


def answers(h: Harness, thread_ts: str) -> list[dict[str, Any]]:
    return [p for p in h.api.posts(CHANNEL) if p.get("thread_ts") == thread_ts]


def test_two_threads_within_a_minute_are_read_once_and_both_mentions_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with running_slack(monkeypatch) as h:
        h.api.add_thread(CHANNEL, thread(1_700_000_000, 30) + thread(1_700_001_000, 3))
        started = time.monotonic()
        h.deliver(
            mention("what was decided?", ts="1700000500.000100", thread_ts="1700000000.000100")
        )
        h.deliver(mention("and here?", ts="1700001500.000100", thread_ts="1700001000.000100"))
        h.settle()
        assert time.monotonic() - started < 30  # no mention waited for the budget
        (call,) = h.api.calls("conversations.replies", ok_only=False)
        assert call.args["ts"] == "1700000000.000100"
        assert int(call.args["limit"]) <= 15
        assert len(answers(h, "1700000000.000100")) == 1
        assert len(answers(h, "1700001000.000100")) == 1
        logged = _logged(h)
        # The first thread: its first page (15 messages) as context, then the mention.
        assert logged["1700000000.000100"] == [
            *[f"message {n} of 1700000000" for n in range(15)],
            "what was decided?",
        ]
        # The second: answered without its earlier messages, the budget being spent.
        assert logged["1700001000.000100"] == ["and here?"]


def test_a_thread_mentioned_again_is_read_only_from_where_the_last_read_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with running_slack(
        monkeypatch, CAIRN_SLACK_FOLLOW_THREADS="false", CAIRN_SLACK_HISTORY_TIER="marketplace"
    ) as h:
        h.api.history_page, h.api.history_per_minute = 1000, None  # Tier 3, as Slack serves it
        root = "1700000000.000100"
        h.api.add_thread(CHANNEL, thread(1_700_000_000, 3))
        h.deliver(mention("first?", ts="1700000010.000100", thread_ts=root))
        h.settle()
        h.api.add_thread(CHANNEL, [said("a later word", ts="1700000020.000100", thread_ts=root)])
        h.deliver(mention("second?", ts="1700000030.000100", thread_ts=root))
        h.settle()
        first, second = h.api.calls("conversations.replies")
        assert "oldest" not in first.args
        assert second.args["oldest"] == "1700000003.000100"  # the newest message read before
        assert _logged(h)[root] == [
            *[f"message {n} of 1700000000" for n in range(4)],
            "first?",
            "a later word",
            "second?",
        ]
        assert len(answers(h, root)) == 2


def test_a_thread_already_followed_is_not_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    with running_slack(monkeypatch, CAIRN_SLACK_HISTORY_TIER="marketplace") as h:
        h.api.history_per_minute = None
        root = "1700000000.000100"
        h.api.add_thread(CHANNEL, thread(1_700_000_000, 3))
        h.deliver(mention("first?", ts="1700000010.000100", thread_ts=root))
        h.settle()
        h.deliver(mention("second?", ts="1700000030.000100", thread_ts=root))
        h.settle()
        assert len(h.api.calls("conversations.replies")) == 1
        assert len(answers(h, root)) == 2


def test_a_429_blocks_reading_until_retry_after_and_every_mention_is_answered(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cairn.bot.slack.backfill")
    with running_slack(monkeypatch, CAIRN_SLACK_HISTORY_TIER="marketplace") as h:
        h.api.history_per_minute = None
        roots = [f"{1_700_000_000 + 1000 * n}.000100" for n in range(3)]
        for n in range(3):
            h.api.add_thread(CHANNEL, thread(1_700_000_000 + 1000 * n, 2))
        h.api.fail("conversations.replies", status=429, retry_after=3)
        started = time.monotonic()
        h.deliver(mention("one?", ts="1700000500.000100", thread_ts=roots[0]))
        h.deliver(mention("two?", ts="1700001500.000100", thread_ts=roots[1]))
        h.settle()
        assert time.monotonic() - started < 3  # the 429 was not waited out in the handler
        (refused,) = h.api.calls("conversations.replies", ok_only=False)
        assert refused.status == 429
        assert len(answers(h, roots[0])) == 1
        assert len(answers(h, roots[1])) == 1
        assert _logged(h)[roots[0]] == ["one?"]
        assert _logged(h)[roots[1]] == ["two?"]
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        assert "rate-limited" in warnings[0].getMessage()

        time.sleep(max(0.0, started + 3.2 - time.monotonic()))
        h.deliver(mention("three?", ts="1700002500.000100", thread_ts=roots[2]))
        h.settle()
        calls = h.api.calls("conversations.replies", ok_only=False)
        assert [c.status for c in calls] == [429, 200]
        assert _logged(h)[roots[2]] == [
            *[f"message {n} of 1700002000" for n in range(3)],
            "three?",
        ]


def test_the_stand_in_limits_like_slack_and_the_bot_stays_within(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Configured as a Marketplace app while Slack treats it as one outside: Slack's own 429
    # stops the reads, and the answers still come.
    with running_slack(monkeypatch, CAIRN_SLACK_HISTORY_TIER="marketplace") as h:
        roots = [f"{1_700_000_000 + 1000 * n}.000100" for n in range(3)]
        for n in range(3):
            h.api.add_thread(CHANNEL, thread(1_700_000_000 + 1000 * n, 20))
        for n, root in enumerate(roots):
            h.deliver(mention(f"q{n}?", ts=f"{1_700_000_500 + 1000 * n}.000100", thread_ts=root))
        h.settle()
        statuses = [c.status for c in h.api.calls("conversations.replies", ok_only=False)]
        # The first page, the refused second page; then nothing until Retry-After.
        assert statuses == [200, 429]
        assert all(len(answers(h, root)) == 1 for root in roots)


def _logged(h: Harness) -> dict[str, list[str]]:
    """The texts of the logged messages by Slack thread, in order."""
    with h.pipeline.rt.db.session() as s:
        query = (
            select(AgentSession.thread_ref, SessionEvent.text)
            .join(AgentSession, col(AgentSession.id) == col(SessionEvent.session_id))
            .where(SessionEvent.kind == EventKind.MESSAGE)
            .order_by(col(SessionEvent.session_id), col(SessionEvent.seq))
        )
        rows = s.exec(query).all()
    found: dict[str, list[str]] = {}
    for thread_ref, text in rows:
        found.setdefault(thread_ref, []).append(text)
    return found


def test_the_budget_comes_back_after_a_minute_and_retry_after_is_honoured() -> None:
    now = [1000.0]
    reader = ThreadReader(TIERS["limited"], clock=lambda: now[0])
    with SlackAPI() as api:
        api.history_per_minute = None  # the reader alone keeps the pace here
        api.add_thread(CHANNEL, thread(1_700_000_000, 20) + thread(1_700_001_000, 2))
        client = web_client(load_settings(), BOT_TOKEN)
        client.base_url = api.base_url
        first, second = "1700000000.000100", "1700001000.000100"
        assert len(reader.read(client, "T0001", CHANNEL, first, before="1700000500.000100")) == 15
        assert reader.read(client, "T0001", CHANNEL, second, before="1700001500.000100") == []
        assert reader.read(client, "T0002", CHANNEL, second, before="1700001500.000100") != []
        now[0] += 60
        # The same thread again: from after the newest message read, the next page.
        again = reader.read(client, "T0001", CHANNEL, first, before="1700000500.000100")
        assert [m["ts"] for m in again] == [f"{1_700_000_015 + n}.000100" for n in range(6)]
        assert api.calls("conversations.replies")[-1].args["oldest"] == "1700000014.000100"
        now[0] += 60
        api.fail("conversations.replies", status=429, retry_after=120)
        assert reader.read(client, "T0001", CHANNEL, second, before="1700001500.000100") == []
        now[0] += 119
        assert reader.read(client, "T0001", CHANNEL, second, before="1700001500.000100") == []
        now[0] += 2
        assert len(reader.read(client, "T0001", CHANNEL, second, before="1700001500.000100")) == 3
        assert len(api.calls("conversations.replies", ok_only=False)) == 5
