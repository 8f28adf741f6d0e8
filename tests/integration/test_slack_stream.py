"""Answers as they are written, on Slack: the real Bolt frontend and slack_sdk against the Web
API stand-in, the real anthropic SDK against a Messages API stand-in that writes slowly.

What a person sees is read back from the stand-in after every call: the message grows, ends as
the model's whole answer, in one message (never a second one), with few calls; where Slack
refuses a stream the message is posted once and updated; a 429 slows it and loses nothing.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlmodel import select

from cairn.bot.slack.mrkdwn import to_mrkdwn
from cairn.db.models import OutboundMessage
from cairn.sessions.streamed import StreamedReplies
from tests.support.messages_server import MessagesServer, Reply, text_message
from tests.support.slack_api import BOT_USER, SlackAPI
from tests.support.slack_harness import running_slack

pytestmark = [pytest.mark.timeout(120)]

CHANNEL = "C0STREAM"
ANSWER = (
    "Roll back with the previous tag first. Then watch the error rate for ten minutes, and "
    "if it stays under one percent, tell the on-call that the incident is over and write "
    "the **timeline** in the incident document before the end of the day."
)
STREAM_METHODS = ("chat.startStream", "chat.appendStream", "chat.stopStream")


def mention(ts: str, text: str = "how do I roll back?", channel: str = CHANNEL) -> dict[str, Any]:
    return {
        "type": "app_mention",
        "user": "UANN",
        "text": f"<@{BOT_USER}> {text}",
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
    }


class Seen:
    """What the thread showed after each call of the bot: (method, when, texts of its messages)."""

    def __init__(self, api: SlackAPI, channel: str, thread: str) -> None:
        self.api, self.channel, self.thread = api, channel, thread
        self.lock = threading.Lock()
        self.shown: list[tuple[str, float, list[str]]] = []
        api.after_call = self._after

    def _after(self, method: str, args: dict[str, Any]) -> None:
        if not method.startswith("chat."):
            return
        # Called with the stand-in's lock free: read the thread as a person would now.
        texts = [m["text"] for m in self.replies()]
        with self.lock:
            self.shown.append((method, time.monotonic(), texts))

    def replies(self) -> list[dict[str, Any]]:
        return [m for m in self.api.posts(self.channel) if m.get("thread_ts") == self.thread]


@pytest.fixture
def slow_model() -> Iterator[MessagesServer]:
    with MessagesServer(
        api_key="sk-test",
        responder=lambda request: Reply(body=text_message(ANSWER), delta_delay=0.06),
    ) as model:
        yield model


def _slack(monkeypatch: pytest.MonkeyPatch, model: MessagesServer, **env: str) -> Any:
    return running_slack(
        monkeypatch,
        ANTHROPIC_API_KEY="sk-test",
        ANTHROPIC_BASE_URL=model.base_url,
        CAIRN_SLACK_STREAM_INTERVAL="0.25",
        **env,
    )


def _grew(shown: list[tuple[str, float, list[str]]]) -> list[str]:
    """The texts the one reply message showed, in order, checking it only ever grew."""
    texts = [texts[0] for _, _, texts in shown if texts]
    for before, after in itertools.pairwise(texts):
        assert after.startswith(before), (before, after)
    return texts


def test_a_reply_streams_into_one_message_that_grows_to_the_whole_answer(
    monkeypatch: pytest.MonkeyPatch, slow_model: MessagesServer
) -> None:
    with _slack(monkeypatch, slow_model) as slack:
        seen = Seen(slack.api, CHANNEL, "1700000500.000100")
        slack.deliver(mention("1700000500.000100"))
        slack.settle(timeout=60)
        replies = seen.replies()
        assert [m["text"] for m in replies] == [ANSWER]  # one message, the whole answer
        assert not replies[0]["streaming"]
        texts = _grew(seen.shown)
        assert len(set(texts)) >= 3, texts  # seen growing, not all at once
        assert texts[0] != ANSWER
        starts = slack.api.calls("chat.startStream")
        assert len(starts) == 1
        assert starts[0].args["thread_ts"] == "1700000500.000100"
        assert starts[0].args["recipient_user_id"] == "UANN"  # whom a channel stream answers
        assert starts[0].args["recipient_team_id"] == "T0001"
        assert len(slack.api.calls("chat.stopStream")) == 1
        assert slack.api.calls("chat.postMessage") == []
        assert slack.api.calls("chat.update") == []
        # Throttled: the model wrote ~40 pieces over ~2.5 s; at most one call per 0.25 s.
        calls = [c for c in slack.api.calls() if c.method in STREAM_METHODS]
        assert len(calls) <= 2.5 / 0.25 + 4, len(calls)
        # The final stop is not throttled: it comes when the answer is complete.
        gaps = [b.at - a.at for a, b in itertools.pairwise(calls[:-1])]
        assert min(gaps) >= 0.2, gaps
        # Reactions to the streamed message reach the reply's memories: the outbox row says
        # it is the reply; and the record of streamed messages is gone with the final text.
        db = slack.pipeline.rt.db
        with db.session() as s:
            row = s.exec(select(OutboundMessage).where(OutboundMessage.kind == "reply")).one()
        assert row.message_ref == f"{CHANNEL}:{replies[0]['ts']}"
        assert StreamedReplies(db).refs(row.cause_event_id) == []


def test_where_slack_refuses_a_stream_the_reply_is_posted_once_and_updated(
    monkeypatch: pytest.MonkeyPatch, slow_model: MessagesServer
) -> None:
    with _slack(monkeypatch, slow_model) as slack:
        slack.api.refuse("chat.startStream", "not_allowed", times=5)
        seen = Seen(slack.api, CHANNEL, "1700000510.000100")
        slack.deliver(mention("1700000510.000100"))
        slack.settle(timeout=60)
        assert [m["text"] for m in seen.replies()] == [to_mrkdwn(ANSWER)]
        assert len(slack.api.calls("chat.postMessage")) == 1
        updates = slack.api.calls("chat.update")
        assert 2 <= len(updates) <= 2.5 / 0.25 + 4
        texts = [t for _, _, t in seen.shown if t]
        assert len({t[0] for t in texts}) >= 3  # seen growing
        # The channel is remembered: the next reply there does not ask again.
        before = len(slack.api.calls("chat.startStream", ok_only=False))
        slack.deliver(mention("1700000520.000100"))
        slack.settle(timeout=60)
        assert len(slack.api.calls("chat.startStream", ok_only=False)) == before


def test_a_429_slows_the_stream_and_loses_nothing(
    monkeypatch: pytest.MonkeyPatch, slow_model: MessagesServer
) -> None:
    with _slack(monkeypatch, slow_model) as slack:
        slack.api.fail("chat.appendStream", status=429, retry_after=1, times=1)
        seen = Seen(slack.api, CHANNEL, "1700000530.000100")
        slack.deliver(mention("1700000530.000100"))
        slack.settle(timeout=60)
        assert [m["text"] for m in seen.replies()] == [ANSWER]
        _grew(seen.shown)
        every = slack.api.calls(ok_only=False)
        limited = next(c for c in every if c.status == 429)
        after = [c for c in every if c.at > limited.at and c.method in STREAM_METHODS]
        assert after, "nothing was shown after the 429"
        assert after[0].at - limited.at >= 0.95  # Slack's Retry-After was honoured


def test_a_final_429_is_retried_and_the_answer_is_not_lost(
    monkeypatch: pytest.MonkeyPatch, slow_model: MessagesServer
) -> None:
    with _slack(monkeypatch, slow_model) as slack:
        slack.api.fail("chat.stopStream", status=429, retry_after=1, times=2)
        seen = Seen(slack.api, CHANNEL, "1700000540.000100")
        slack.deliver(mention("1700000540.000100"))
        slack.settle(timeout=60)
        assert [m["text"] for m in seen.replies()] == [ANSWER]
        assert len(slack.api.calls("chat.startStream")) == 1


def test_a_long_answer_streams_across_messages_at_slacks_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    paragraphs = [f"Step {n}: " + "check the dashboards and the logs again. " * 6 for n in range(8)]
    long_answer = "\n\n".join(paragraphs)
    with (
        MessagesServer(
            api_key="sk-test",
            responder=lambda request: Reply(body=text_message(long_answer), delta_delay=0.01),
        ) as model,
        _slack(monkeypatch, model, CAIRN_SLACK_MESSAGE_CHARS="600") as slack,
    ):
        seen = Seen(slack.api, CHANNEL, "1700000550.000100")
        slack.deliver(mention("1700000550.000100"))
        slack.settle(timeout=90)
        replies = seen.replies()
        assert len(replies) >= 3
        assert all(len(m["text"]) <= 600 for m in replies)
        assert all(not m["streaming"] for m in replies)
        joined = "\n\n".join(m["text"].strip() for m in replies)
        assert joined.split() == long_answer.split()  # every word, once, in order
        assert slack.api.calls("chat.delete") == []
