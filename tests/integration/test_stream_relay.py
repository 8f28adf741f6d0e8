"""The stream relay with Slack's writer against the Web API stand-in, fed pieces directly: the
cases a model rarely produces on cue (a reply that shrinks after a restart, a relay that never
saw the stream, a frontend that is not the stream's owner)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from cairn.bot.dedupe import LocalDedupe
from cairn.bot.slack.streaming import SlackWriter
from cairn.bot.slack.web import web_client
from cairn.bot.slack.workspaces import BotIdentity, SingleWorkspace
from cairn.bot.streaming import BUSY, StreamRelay
from cairn.runtime import Runtime
from cairn.sessions.log import EventLog, ThreadRef
from cairn.sessions.stream import LocalStreams, StreamPiece
from cairn.sessions.streamed import StreamedReplies
from tests.support.slack_api import BOT_ID, BOT_TOKEN, BOT_USER, SlackAPI

CHANNEL, THREAD, TENANT = "C0RELAY", "1700000700.000100", "slack:T0001"


@pytest.fixture
def api() -> Iterator[SlackAPI]:
    with SlackAPI() as stand_in:
        yield stand_in


def _relay(runtime: Runtime, api: SlackAPI, dedupe: LocalDedupe) -> StreamRelay:
    slack = runtime.settings.slack.model_copy(
        update={"api_url": api.base_url, "message_chars": 200, "stream_interval": 0.05}
    )
    settings = runtime.settings.model_copy(update={"slack": slack})
    client = web_client(settings, BOT_TOKEN)
    workspaces = SingleWorkspace(client, BotIdentity(BOT_USER, BOT_ID, "T0001"))
    writer = SlackWriter(workspaces, settings, set())
    return StreamRelay(LocalStreams(), "slack:", writer, runtime.db, dedupe, prefix=True)


def _cause(runtime: Runtime) -> int:
    log = EventLog(runtime.db)
    session = log.open_session(ThreadRef("slack", TENANT, CHANNEL, THREAD), "ops")
    event = log.append(session.id or 0, TENANT, "message", text="how?", user="UANN")
    assert event.id is not None
    return event.id


def _piece(cause: int, kind: str, text: str = "", attempt: str = "a1") -> StreamPiece:
    return StreamPiece(
        TENANT,
        cause,
        kind,
        text,
        CHANNEL,
        THREAD,
        "UANN",
        "",
        attempt,  # type: ignore[arg-type]
    )


def _thread(api: SlackAPI) -> list[dict]:
    return [m for m in api.posts(CHANNEL) if m.get("thread_ts") == THREAD]


def test_a_reply_that_shrinks_after_a_restart_ends_in_fewer_messages_none_left_over(
    runtime: Runtime, api: SlackAPI
) -> None:
    relay = _relay(runtime, api, LocalDedupe())
    cause = _cause(runtime)
    words = " ".join(f"word{n}" for n in range(120))  # ~900 characters: five messages of 200
    for chunk in words.split(" "):
        relay.take(_piece(cause, "text", chunk + " "))
        relay.flush_due()
    for _ in range(50):  # the rest shows at the throttle's pace (0.05 s here)
        time.sleep(0.02)
        relay.flush_due()
    streamed = _thread(api)
    assert len(streamed) >= 4
    assert StreamedReplies(runtime.db).refs(cause)  # recorded before more was shown
    # The turn runs again (its worker died) and this time answers briefly.
    relay.take(_piece(cause, "text", "Short answer.", attempt="a2"))
    refs = relay.final(TENANT, cause, CHANNEL, THREAD, "Short answer, final.")
    assert isinstance(refs, list)
    assert len(refs) == 1
    relay.done(TENANT, cause)
    (message,) = _thread(api)
    assert message["text"] == "Short answer, final."
    assert not message["streaming"]
    assert len(api.calls("chat.delete")) == len(streamed) - 1
    assert StreamedReplies(runtime.db).refs(cause) == []


def test_a_relay_that_never_saw_the_stream_finishes_it_from_the_record(
    runtime: Runtime, api: SlackAPI
) -> None:
    dedupe = LocalDedupe()
    first = _relay(runtime, api, dedupe)
    cause = _cause(runtime)
    first.take(_piece(cause, "text", "Roll back with "))
    assert [m["text"] for m in _thread(api)] == ["Roll back with"]
    # That frontend dies (its claim goes with its memory); another finishes the reply.
    dedupe.release(f"stream:slack:{TENANT}:{cause}")
    second = _relay(runtime, api, dedupe)
    refs = second.final(TENANT, cause, CHANNEL, THREAD, "Roll back with the previous tag.")
    assert isinstance(refs, list)
    second.done(TENANT, cause)
    (message,) = _thread(api)
    assert message["text"] == "Roll back with the previous tag."
    assert refs == [f"m:{CHANNEL}:{message['ts']}"]
    assert api.calls("chat.postMessage") == []


def test_while_another_frontend_owns_a_stream_its_final_reply_waits(
    runtime: Runtime, api: SlackAPI
) -> None:
    dedupe = LocalDedupe()  # shared, as Redis is between frontends
    owner, other = _relay(runtime, api, dedupe), _relay(runtime, api, dedupe)
    cause = _cause(runtime)
    owner.take(_piece(cause, "text", "Roll back "))
    other.take(_piece(cause, "text", "Roll back "))  # not its stream: ignored
    assert len(_thread(api)) == 1
    assert other.final(TENANT, cause, CHANNEL, THREAD, "Roll back now.") == BUSY
    refs = owner.final(TENANT, cause, CHANNEL, THREAD, "Roll back now.")
    owner.done(TENANT, cause)
    assert isinstance(refs, list)
    assert [m["text"] for m in _thread(api)] == ["Roll back now."]
    # Once done, nobody streams it again, and a reply never streamed posts as usual.
    assert other.final(TENANT, _cause(runtime), CHANNEL, THREAD, "x") is None


def test_a_stream_claimed_but_not_yet_shown_holds_back_another_frontends_whole_post(
    runtime: Runtime, api: SlackAPI
) -> None:
    dedupe = LocalDedupe()
    owner, other = _relay(runtime, api, dedupe), _relay(runtime, api, dedupe)
    cause = _cause(runtime)
    # The owner took the reply (a status came first) but has no message of it yet.
    owner.take(_piece(cause, "status", "searching memory..."))
    assert _thread(api) == []
    assert StreamedReplies(runtime.db).refs(cause) == []
    # Posting it whole now would leave the owner's coming message beside it.
    assert other.final(TENANT, cause, CHANNEL, THREAD, "Roll back now.") == BUSY
    owner.take(_piece(cause, "text", "Roll back "))
    refs = owner.final(TENANT, cause, CHANNEL, THREAD, "Roll back now.")
    owner.done(TENANT, cause)
    assert isinstance(refs, list)
    assert [m["text"] for m in _thread(api)] == ["Roll back now."]


def test_a_piece_arriving_after_a_whole_post_opens_no_message_at_any_frontend(
    runtime: Runtime, api: SlackAPI
) -> None:
    dedupe = LocalDedupe()
    poster, late = _relay(runtime, api, dedupe), _relay(runtime, api, dedupe)
    cause = _cause(runtime)
    assert poster.final(TENANT, cause, CHANNEL, THREAD, "Roll back now.") is None
    assert poster.final(TENANT, cause, CHANNEL, THREAD, "Roll back now.") is None  # a retry
    poster.done(TENANT, cause)  # the delivery posted it whole
    late.take(_piece(cause, "text", "Roll back "))  # still on its way to another frontend
    late.flush_due()
    assert _thread(api) == []
    assert late.streaming() == []


def test_a_piece_overtaken_by_the_final_reply_changes_nothing_it_shows(
    runtime: Runtime, api: SlackAPI
) -> None:
    relay = _relay(runtime, api, LocalDedupe())
    cause = _cause(runtime)
    relay.take(_piece(cause, "text", "Roll back with the previous "))
    refs = relay.final(TENANT, cause, CHANNEL, THREAD, "Roll back with the previous tag.")
    assert isinstance(refs, list)
    # A piece of the stream reaches the relay after the final text did (it was queued behind
    # others while the final reply came through the outbox), before the delivery's done().
    relay.take(_piece(cause, "text", "ta"))
    time.sleep(0.1)  # past the throttle (0.05 s here)
    relay.flush_due()
    relay.done(TENANT, cause)
    (message,) = _thread(api)
    assert message["text"] == "Roll back with the previous tag."
