"""An agent with a Slack bot identity of its own, beside the shared identity of the others.

Both frontends share the database, the workers and the Redis dedupe, as two deployments of one
Cairn would. A message mentioning one bot reaches both apps (one as ``app_mention``, the other
as a plain ``message``), in either order; only the mentioned identity answers, as its agent.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlmodel import select

from cairn.bot.slack import SlackFrontend
from cairn.core.settings import load_settings
from cairn.db.models import OutboundMessage, SessionEvent
from tests.support.agents import declare_agents
from tests.support.slack_api import BOT_TOKEN, BOT_USER
from tests.support.slack_harness import Harness, running_slack

CHANNEL = "C0CHAN"
REVIEW_TOKEN = "xoxb-review-token"
REVIEW_USER = "UREVIEWBOT"


def _event(kind: str, bot: str, text: str, ts: str, thread_ts: str | None = None) -> dict:
    event = {
        "type": kind,
        "channel_type": "channel",
        "user": "UANN",
        "text": f"<@{bot}> {text}",
        "ts": ts,
        "channel": CHANNEL,
        "event_ts": ts,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


@pytest.fixture
def pair(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory, redis_url: str
) -> Iterator[tuple[Harness, Harness]]:
    """The shared identity (ops, the default) and review's own, on one set of stand-ins."""
    home = tmp_path_factory.mktemp("home")
    declare_agents(home, "own_identity = true\n")
    monkeypatch.setenv("CAIRN_HOME", str(home))
    monkeypatch.setenv("CAIRN_REDIS_URL", redis_url)
    with running_slack(monkeypatch) as shared:
        shared.api.tokens[REVIEW_TOKEN] = ("T0001", REVIEW_USER, "BREVIEW")
        monkeypatch.setenv("SLACK_BOT_TOKEN", REVIEW_TOKEN)
        monkeypatch.setenv("CAIRN_AGENT", "review")
        settings = load_settings()
        assert settings.identity_agent == "review"
        frontend = SlackFrontend(shared.pipeline, settings)
        stop = threading.Event()
        thread = threading.Thread(target=frontend.run, args=(stop,), daemon=True)
        thread.start()
        try:
            assert frontend.ready.wait(15), "review's Slack frontend did not start"
            yield shared, Harness(shared.api, None, frontend, shared.pipeline)
        finally:
            stop.set()
            thread.join(20)


def _posts_by_token(h: Harness) -> list[tuple[str, str, str]]:
    """The bot messages in the workspace, oldest first, as (the token of the identity that
    posted it, its thread, its final text): posted whole or streamed, whichever it was."""
    tokens = {user: token for token, (_, user, _) in h.api.tokens.items()}
    started = {
        c.token for c in h.api.calls() if c.method in ("chat.postMessage", "chat.startStream")
    }
    posts = [(tokens[m["user"]], str(m.get("thread_ts")), str(m["text"])) for m in h.api.posts()]
    assert {token for token, _, _ in posts} <= started  # each posted with its own token
    return posts


@pytest.mark.parametrize("mentioned_first", [True, False])
def test_only_the_mentioned_identity_answers_as_its_agent(
    pair: tuple[Harness, Harness], mentioned_first: bool
) -> None:
    shared, review = pair
    ts = "1700000200.000100"
    asked = "can we merge PR 42?"
    # review's app hears an app_mention; the shared app hears the same message as a message.
    deliveries = [
        (review, _event("app_mention", REVIEW_USER, asked, ts)),
        (shared, _event("message", REVIEW_USER, asked, ts)),
    ]
    if not mentioned_first:
        deliveries.reverse()
    for harness, event in deliveries:
        harness.deliver(event)
        harness.settle()
    review.settle()
    posts = _posts_by_token(shared)
    with shared.pipeline.rt.db.session() as s:
        rows = list(s.exec(select(OutboundMessage)).all())
    assert [(token, thread) for token, thread, _ in posts] == [(REVIEW_TOKEN, ts)]
    assert [(row.agent, row.kind) for row in rows] == [("review", "reply")]

    # The shared identity still answers its own mentions, as the default agent.
    other = "1700000300.000100"
    shared.deliver(_event("app_mention", BOT_USER, "is the deploy done?", other))
    review.deliver(_event("message", BOT_USER, "is the deploy done?", other))
    shared.settle()
    review.settle()
    posts = _posts_by_token(shared)
    assert [(token, thread) for token, thread, _ in posts] == [
        (REVIEW_TOKEN, ts),
        (BOT_TOKEN, other),
    ]
    with shared.pipeline.rt.db.session() as s:
        agents = [row.agent for row in s.exec(select(OutboundMessage)).all()]
    assert agents == ["review", "ops"]


def test_a_mention_in_a_thread_heard_first_by_the_other_identity_is_still_answered(
    pair: tuple[Harness, Harness],
) -> None:
    shared, review = pair
    root, follow_up = "1700000400.000100", "1700000401.000100"
    review.deliver(_event("app_mention", REVIEW_USER, "review PR 7 please", root))
    review.settle()
    # The shared identity follows the thread too, so it logs the follow-up first, as context;
    # review's own copy, a moment later, makes that logged message review's work.
    shared.deliver(_event("message", REVIEW_USER, "and PR 8?", follow_up, thread_ts=root))
    shared.settle()
    review.deliver(_event("app_mention", REVIEW_USER, "and PR 8?", follow_up, thread_ts=root))
    review.settle()
    shared.settle()
    posts = _posts_by_token(shared)
    assert [(token, thread) for token, thread, _ in posts] == [
        (REVIEW_TOKEN, root),
        (REVIEW_TOKEN, root),
    ]
    assert "PR 8" in posts[1][2]
    with shared.pipeline.rt.db.session() as s:
        messages = [
            (e.agent, e.status, e.data.get("addressed"))
            for e in s.exec(select(SessionEvent).where(SessionEvent.kind == "message")).all()
        ]
    assert messages == [("review", "done", True), ("review", "done", True)]
