"""The Slack frontend as Slack sees it: the real Bolt app fed signed HTTP requests and Socket
Mode envelopes, its Web API calls served by the local stand-in, the real pipeline and in-process
workers with the offline model behind it."""

from __future__ import annotations

import json
import time
import urllib.parse
from typing import Any

import pytest
from sqlmodel import col, select

from cairn.db.models import EventKind, SessionEvent
from cairn.memory import Scope, Source, Visibility
from tests.support.slack_api import BOT_ID, BOT_USER, event_payload, signed_headers
from tests.support.slack_harness import SIGNING_SECRET, Harness, running_slack
from tests.support.tcp_proxy import TcpProxy

CHANNEL = "C0CHAN"
TS = "1700000100.000100"


def mention(text: str, *, ts: str = TS, thread_ts: str | None = None, user: str = "UANN") -> dict:
    event = {
        "type": "app_mention",
        "user": user,
        "text": f"<@{BOT_USER}> {text}",
        "ts": ts,
        "channel": CHANNEL,
        "event_ts": ts,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


def message(
    text: str,
    *,
    ts: str,
    thread_ts: str | None = None,
    user: str = "UANN",
    channel: str = CHANNEL,
    **extra: Any,
) -> dict:
    event = {
        "type": "message",
        "channel_type": "im" if channel.startswith("D") else "channel",
        "user": user,
        "text": text,
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        **extra,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


def logged(h: Harness, kind: str | None = None) -> list[SessionEvent]:
    with h.pipeline.rt.db.session() as s:
        query = select(SessionEvent).order_by(col(SessionEvent.session_id), col(SessionEvent.seq))
        if kind is not None:
            query = query.where(SessionEvent.kind == kind)
        return list(s.exec(query).all())


@pytest.fixture
def http(monkeypatch: pytest.MonkeyPatch):
    with running_slack(monkeypatch) as harness:
        yield harness


@pytest.fixture
def socket(monkeypatch: pytest.MonkeyPatch):
    with running_slack(monkeypatch, socket_mode=True) as harness:
        yield harness


# --- conversations ---------------------------------------------------------------------------


def test_mention_gets_one_reply_in_its_own_thread(http: Harness) -> None:
    http.deliver(mention("what do you know about deploys?"))
    http.settle()
    posts = http.api.posts()
    assert len(posts) == 1
    assert posts[0]["channel"] == CHANNEL
    assert posts[0]["thread_ts"] == TS
    assert "don't remember anything about deploys" in posts[0]["text"]


def test_mention_inside_a_thread_is_answered_in_that_thread(http: Harness) -> None:
    root = "1700000000.000100"
    http.api.add_thread(CHANNEL, [message("we deploy on Tuesdays", ts=root, user="UBOB")])
    http.deliver(mention("what do you know about deploys?", thread_ts=root))
    http.settle()
    (post,) = http.api.posts()
    assert post["thread_ts"] == root


def test_the_same_event_delivered_three_times_is_answered_once(http: Harness) -> None:
    payload = event_payload(mention("what do you know about deploys?"))
    statuses = [http.post(payload, retry_num=n)[0] for n in (None, 1, 2)]
    http.settle()
    assert statuses == [200, 200, 200]
    assert len(http.api.posts()) == 1
    assert len(logged(http, EventKind.MESSAGE)) == 1


def test_socket_mode_retries_are_answered_once(socket: Harness) -> None:
    assert socket.socket is not None
    payload = event_payload(mention("what do you know about deploys?"))
    for attempt in range(3):
        envelope = socket.socket.send(payload, retry_attempt=attempt)
        assert socket.socket.ack_delay(envelope) < 3.0
    socket.settle()
    assert len(socket.api.posts()) == 1


def test_app_mention_and_message_for_one_ts_give_one_reply(socket: Harness) -> None:
    text = "what do you know about deploys?"
    socket.deliver(mention(text))
    socket.deliver(message(f"<@{BOT_USER}> {text}", ts=TS))
    socket.settle()
    assert len(socket.api.posts()) == 1
    assert len(logged(socket, EventKind.MESSAGE)) == 1


def test_a_message_arriving_before_its_app_mention_still_gets_one_reply(http: Harness) -> None:
    text = "what do you know about deploys?"
    http.deliver(message(f"<@{BOT_USER}> {text}", ts=TS))
    http.deliver(mention(text))
    http.settle()
    (post,) = http.api.posts()
    assert post["thread_ts"] == TS


def test_the_bots_own_messages_and_other_bots_are_ignored(http: Harness) -> None:
    http.deliver(mention("what do you know about deploys?"))
    http.settle()
    own = message(f"<@{BOT_USER}> hi", ts="1700000200.000100", user=BOT_USER, bot_id=BOT_ID)
    other = message(
        f"<@{BOT_USER}> what do you know about cats?",
        ts="1700000300.000100",
        user="UOTHERBOT",
        bot_id="BOTHER",
    )
    http.deliver(own)
    http.deliver(other)
    http.settle()
    assert len(http.api.posts()) == 1
    assert len(logged(http, EventKind.MESSAGE)) == 1


def test_other_bots_are_answered_when_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    with running_slack(monkeypatch, CAIRN_SLACK_ALLOW_BOTS="true") as h:
        h.deliver(
            message(
                f"<@{BOT_USER}> what do you know about cats?",
                ts=TS,
                user="UOTHERBOT",
                bot_id="BOTHER",
            )
        )
        h.settle()
        assert len(h.api.posts()) == 1


def test_thread_messages_reach_the_session_but_only_questions_are_answered(http: Harness) -> None:
    http.deliver(mention("remember the VPN is vpn.example.com"))
    http.settle()
    before = len(http.api.posts())
    http.deliver(message("thanks, that helps", ts="1700000200.000100", thread_ts=TS))
    http.settle()
    assert len(http.api.posts()) == before  # stored as context, not answered
    http.deliver(message("what do you know about the VPN?", ts="1700000300.000100", thread_ts=TS))
    http.settle()
    posts = http.api.posts()
    assert len(posts) == before + 1
    assert "vpn.example.com" in posts[-1]["text"]
    assert posts[-1]["thread_ts"] == TS
    texts = [e.text for e in logged(http, EventKind.MESSAGE)]
    assert texts == [
        "remember the VPN is vpn.example.com",
        "thanks, that helps",
        "what do you know about the VPN?",
    ]


def test_messages_outside_the_bots_threads_are_not_read(http: Harness) -> None:
    http.deliver(message("what do you know about deploys?", ts="1700000200.000100"))
    http.deliver(message("a reply?", ts="1700000300.000100", thread_ts="1700000200.000100"))
    http.settle()
    assert http.api.posts() == []
    assert logged(http) == []


def test_thread_following_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    with running_slack(monkeypatch, CAIRN_SLACK_FOLLOW_THREADS="false") as h:
        h.deliver(mention("what do you know about deploys?"))
        h.settle()
        h.deliver(message("what about cats?", ts="1700000300.000100", thread_ts=TS))
        h.settle()
        assert len(h.api.posts()) == 1
        assert len(logged(h, EventKind.MESSAGE)) == 1


def test_a_mention_mid_thread_first_reads_the_earlier_messages(http: Harness) -> None:
    root = "1700000000.000100"
    http.api.add_thread(
        CHANNEL,
        [
            message("the staging VPN moved to vpn2.example.com", ts=root, user="UBOB"),
            message("since when?", ts="1700000010.000100", thread_ts=root, user="UCAT"),
            message("since Monday", ts="1700000020.000100", thread_ts=root, user="UBOB"),
        ],
    )
    http.deliver(mention("what do you know about deploys?", ts="1700000030.000100", thread_ts=root))
    http.settle()
    assert [c.args["ts"] for c in http.api.calls("conversations.replies")] == [root]
    events = logged(http, EventKind.MESSAGE)
    assert [(e.user, e.text) for e in events] == [
        ("UBOB", "the staging VPN moved to vpn2.example.com"),
        ("UCAT", "since when?"),
        ("UBOB", "since Monday"),
        ("UANN", "what do you know about deploys?"),
    ]
    assert [e.data["addressed"] for e in events] == [False, False, False, True]
    assert len({e.session_id for e in events}) == 1
    assert len(http.api.posts()) == 1


def test_direct_messages_are_answered_with_the_assistant_status(http: Harness) -> None:
    http.deliver(message("what do you know about deploys?", ts=TS, channel="D0DM"))
    http.settle()
    (post,) = http.api.posts()
    assert post["channel"] == "D0DM"
    statuses = http.api.workspace.statuses
    # While the agent recalls, the status says so (the offline model always recalls first).
    assert statuses == [
        ("D0DM", TS, "is thinking..."),
        ("D0DM", TS, "searching memory..."),
        ("D0DM", TS, ""),
    ]
    assert http.api.calls("reactions.add") == []


def test_in_channels_a_reaction_shows_the_bot_is_working_and_goes_away(http: Harness) -> None:
    http.deliver(mention("what do you know about deploys?"))
    http.settle()
    (added,) = http.api.calls("reactions.add")
    (removed,) = http.api.calls("reactions.remove")
    assert added.args == {"channel": CHANNEL, "timestamp": TS, "name": "eyes"}
    assert removed.args == added.args
    shown = [c for c in http.api.calls() if c.method in ("chat.postMessage", "chat.startStream")]
    assert removed.at >= shown[0].at


def test_answers_are_posted_as_slack_mrkdwn(http: Harness) -> None:
    http.deliver(mention("remember **bold** claims & <angle> brackets"))
    http.settle()
    texts = [p["text"] for p in http.api.posts()]
    assert "remembered: *bold* claims &amp; &lt;angle&gt; brackets" in texts


# --- reactions -------------------------------------------------------------------------------


def reaction(kind: str, emoji: str, ts: str, *, user: str = "UANN") -> dict:
    return {
        "type": kind,
        "user": user,
        "reaction": emoji,
        "item": {"type": "message", "channel": CHANNEL, "ts": ts},
        "item_user": BOT_USER,
        "event_ts": f"{time.time():.6f}",
    }


def test_reaction_added_then_removed_is_two_feedback_events_the_second_undoing(
    socket: Harness,
) -> None:
    socket.deliver(mention("remember deploys are frozen on Fridays"))
    socket.settle()
    notice = next(p for p in socket.api.posts() if p["text"].startswith("remembered:"))
    rt = socket.pipeline.rt
    scope = Scope("slack:T0001", rt.settings.agent)
    (memory,) = rt.memory.newest(scope)
    assert not memory.confirmed

    # Its author's own confirmation never counts (issue 30): another member's does.
    socket.deliver(reaction("reaction_added", "white_check_mark", notice["ts"], user="UBOB"))
    socket.settle()
    confirmed = rt.memory.get(memory.id, scope)
    assert confirmed is not None
    assert confirmed.confirmed
    assert confirmed.validity == 1.0

    socket.deliver(reaction("reaction_removed", "white_check_mark", notice["ts"], user="UBOB"))
    socket.settle()
    undone = rt.memory.get(memory.id, scope)
    assert undone is not None
    assert not undone.confirmed
    assert undone.validity == 0.0

    feedback = logged(socket, EventKind.REACTION)
    assert [(e.text, e.data["removed"]) for e in feedback] == [
        ("white_check_mark", False),
        ("white_check_mark", True),
    ]
    assert feedback[0].seq < feedback[1].seq
    assert {e.session_id for e in feedback} == {logged(socket, EventKind.MESSAGE)[0].session_id}


def test_the_bots_own_working_reaction_is_not_feedback(http: Harness) -> None:
    http.deliver(mention("remember deploys are frozen on Fridays"))
    http.settle()
    http.deliver(reaction("reaction_added", "eyes", TS, user=BOT_USER))
    http.settle()
    assert logged(http, EventKind.REACTION) == []


# --- the Web API misbehaving -----------------------------------------------------------------


@pytest.fixture
def unstreamed(monkeypatch: pytest.MonkeyPatch):
    """Replies posted whole (CAIRN_SLACK_STREAM_MODE=off): every answer is a chat.postMessage."""
    with running_slack(monkeypatch, CAIRN_SLACK_STREAM_MODE="off") as harness:
        yield harness


def test_a_429_on_chat_post_message_still_delivers_the_reply_once(unstreamed: Harness) -> None:
    http = unstreamed
    http.api.fail("chat.postMessage", status=429, retry_after=1)
    http.deliver(mention("what do you know about deploys?"))
    http.settle()
    assert len(http.api.posts()) == 1
    attempts = http.api.calls("chat.postMessage", ok_only=False)
    assert [c.status for c in attempts] == [429, 200]
    assert attempts[1].at - attempts[0].at >= 1.0  # Retry-After honoured


def test_a_dropped_connection_is_retried(unstreamed: Harness) -> None:
    http = unstreamed
    http.api.drop("chat.postMessage")
    http.deliver(mention("what do you know about deploys?"))
    http.settle()
    assert len(http.api.posts()) == 1


def test_a_long_answer_is_split_and_a_reaction_on_any_part_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with running_slack(monkeypatch, CAIRN_SLACK_MESSAGE_CHARS="200") as h:
        rt = h.pipeline.rt
        scope = Scope("slack:T0001", rt.settings.agent)
        for n in range(8):
            rt.memory.remember(f"deploy fact number {n} is worth keeping in mind", scope)
        h.deliver(mention("what do you know about deploy?"))
        h.settle()
        parts = h.api.posts()
        assert len(parts) > 1
        assert all(len(p["text"]) <= 200 for p in parts)
        assert all(p["thread_ts"] == TS for p in parts)
        h.deliver(reaction("reaction_added", "+1", parts[-1]["ts"]))
        h.settle()
        (feedback,) = logged(h, EventKind.REACTION)
        assert feedback.data["target"] == f"{CHANNEL}:{parts[0]['ts']}"


# --- transport -------------------------------------------------------------------------------


def test_a_bad_signature_is_refused_and_nothing_is_enqueued(http: Harness) -> None:
    payload = event_payload(mention("what do you know about deploys?"))
    assert http.post(payload, secret="not-the-secret")[0] == 401
    assert http.post(payload, timestamp=int(time.time()) - 600)[0] == 401  # stale
    body = json.dumps(payload).encode()
    assert http.post_raw(body, {"Content-Type": "application/json"})[0] == 401  # unsigned
    time.sleep(0.3)
    http.settle()
    assert logged(http) == []
    assert http.api.posts() == []


def test_url_verification_is_answered(http: Harness) -> None:
    body = json.dumps({"type": "url_verification", "challenge": "abc", "token": "t"}).encode()
    status, _, answer = http.exchange(body, signed_headers(SIGNING_SECRET, body))
    assert status == 200
    assert json.loads(answer) == {"challenge": "abc"}


def test_healthz_reflects_the_socket(socket: Harness) -> None:
    status, body = socket.health()
    assert status == 200
    assert body["checks"]["socket"] is True
    assert socket.socket is not None
    socket.socket.stop()
    socket.api.socket = None  # and Slack refuses new connections
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and socket.health()[0] == 200:
        time.sleep(0.1)
    status, body = socket.health()
    assert status == 503
    assert body["checks"]["socket"] is False


def test_healthz_reflects_the_queue(monkeypatch: pytest.MonkeyPatch, redis_url: str) -> None:
    parts = urllib.parse.urlsplit(redis_url)
    with TcpProxy(parts.hostname or "127.0.0.1", parts.port or 6379) as proxy:
        through_proxy = f"redis://127.0.0.1:{proxy.port}{parts.path}"
        with running_slack(monkeypatch, CAIRN_REDIS_URL=through_proxy) as h:
            status, body = h.health()
            assert status == 200
            assert body["checks"]["queue"] is True
            proxy.cut()  # Redis goes away
            status, body = h.health()
            assert status == 503
            assert body["checks"]["queue"] is False


def test_events_are_deduplicated_across_frontends_through_redis(
    monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    payload = event_payload(mention("what do you know about deploys?"))
    with running_slack(monkeypatch, CAIRN_REDIS_URL=redis_url) as first:
        first.post(payload)
        first.settle()
        assert len(first.api.posts()) == 1
    with running_slack(monkeypatch, CAIRN_REDIS_URL=redis_url) as second:
        second.post(payload, retry_num=1)
        second.settle()
        # The retry stopped at the shared dedupe: nothing reached this frontend's pipeline.
        assert second.frontend.dedupe.claim(f"slack:event:{payload['event_id']}", 60) is False
        assert second.api.posts() == []


# --- App Home and /cairn ---------------------------------------------------------------------


def test_app_home_shows_only_the_memories_of_the_viewers_workspace(http: Harness) -> None:
    rt = http.pipeline.rt
    agent = rt.settings.agent
    rt.memory.remember(
        "ours: the deploy train leaves at noon",
        Scope("slack:T0001", agent),
        visibility=Visibility.TEAM,
        source=Source(author="UANN"),
    )
    rt.memory.remember("theirs: a secret of another workspace", Scope("slack:T0002", agent))
    http.deliver({"type": "app_home_opened", "user": "UANN", "channel": "D0DM", "tab": "home"})
    http.api.wait_for(lambda: http.api.workspace.views.get("UANN"), what="views.publish")
    view = json.dumps(http.api.workspace.views["UANN"])
    assert "ours: the deploy train leaves at noon" in view
    assert "theirs" not in view


def _block_action(h: Harness, action_id: str, memory_id: int, user: str) -> int:
    payload = {
        "type": "block_actions",
        "team": {"id": "T0001", "domain": "test"},
        "user": {"id": user, "team_id": "T0001"},
        "api_app_id": "ACAIRN",
        "trigger_id": "1.2.3",
        "view": {"id": "V1", "type": "home"},
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": f"memory_{memory_id}",
                "value": str(memory_id),
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    body = urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()
    headers = signed_headers(SIGNING_SECRET, body)
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    return http_status(h, body, headers)


def http_status(h: Harness, body: bytes, headers: dict[str, str]) -> int:
    return h.post_raw(body, headers)[0]


def test_app_home_buttons_confirm_and_retract_under_the_reaction_rules(http: Harness) -> None:
    rt = http.pipeline.rt
    scope = Scope("slack:T0001", rt.settings.agent)
    ann = rt.memory.remember("ann's fact", scope, source=Source(author="UANN")).memory
    assert _block_action(http, "cairn_confirm", ann.id, "UBOB") == 200
    http.api.wait_for(lambda: http.api.workspace.views.get("UBOB"), what="the redrawn home")
    assert http.api.wait_for(lambda: (m := rt.memory.get(ann.id, scope)) and m.confirmed)

    assert _block_action(http, "cairn_retract", ann.id, "UBOB") == 200  # not the author
    http.api.wait_for(lambda: (m := rt.memory.get(ann.id, scope)) and m.disputes == 1)
    still = rt.memory.get(ann.id, scope)
    assert still is not None
    assert not still.retracted

    assert _block_action(http, "cairn_retract", ann.id, "UANN") == 200  # the author
    assert http.api.wait_for(lambda: (m := rt.memory.get(ann.id, scope)) and m.retracted)


def _slash(h: Harness, text: str, user: str = "UANN") -> dict[str, Any]:
    form = {
        "token": "t",
        "team_id": "T0001",
        "team_domain": "test",
        "channel_id": CHANNEL,
        "channel_name": "general",
        "user_id": user,
        "user_name": "ann",
        "command": "/cairn",
        "text": text,
        "api_app_id": "ACAIRN",
        "response_url": h.api.response_url,
        "trigger_id": "1.2.3",
    }
    before = len(h.api.responses)
    body = urllib.parse.urlencode(form).encode()
    headers = signed_headers(SIGNING_SECRET, body)
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    status, took = h.post_raw(body, headers)
    assert status == 200
    assert took < 3.0
    h.api.wait_for(lambda: len(h.api.responses) > before, what="the command's answer")
    return h.api.responses[-1]


def test_slash_command_remembers_recalls_forgets_and_reports(http: Harness) -> None:
    answer = _slash(http, "remember the on-call phone is in the top drawer")
    assert answer["response_type"] == "ephemeral"
    assert answer["text"].startswith("Remembered (#")
    assert "top drawer" in _slash(http, "recall on-call phone")["text"]
    assert "Only its author" in _slash(http, "forget on-call phone", user="UBOB")["text"]
    assert _slash(http, "forget on-call phone")["text"].startswith("Retracted")
    assert "don't remember" in _slash(http, "recall on-call phone")["text"]
    assert "healthy" in _slash(http, "status")["text"]
    assert "/cairn remember" in _slash(http, "help")["text"]


def test_slash_command_over_socket_mode(socket: Harness) -> None:
    assert socket.socket is not None
    command = {
        "team_id": "T0001",
        "channel_id": CHANNEL,
        "user_id": "UANN",
        "command": "/cairn",
        "text": "remember lunch is at one",
        "api_app_id": "ACAIRN",
        "response_url": socket.api.response_url,
        "trigger_id": "1.2.3",
    }
    envelope = socket.socket.send(command, kind="slash_commands")
    assert socket.socket.ack_delay(envelope) < 3.0
    socket.api.wait_for(lambda: socket.api.responses, what="the command's answer")
    assert "lunch is at one" in socket.api.responses[-1]["text"]
