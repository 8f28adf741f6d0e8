"""Answers as they are written, on Matrix: Cairn's Matrix frontend against a real Synapse on
127.0.0.1, a model stand-in that writes slowly (each test runs on both: the real anthropic SDK
against the Messages API one, the real openai SDK against the Chat Completions one,
``STAND_INS``), and a person with an encrypting matrix-nio client of their own
(:class:`E2EPerson`).

What the person's device receives is what is checked: the first text of the answer as a message
in the thread on their question, early; then ``m.replace`` edits whose ``m.new_content`` grows,
no more of them than the cap; the last one the whole answer rendered as a reply posted at once
is; one message (never a second); in an encrypted room all of it encrypted. Long answers split
across messages at the size limit, each ending final. Streaming off: one message, no edit.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from nio import Event

from cairn.bot.matrix.render import split_text, to_html
from cairn.db.models import OutboundMessage, OutboundStatus, SessionEvent
from cairn.sessions.streamed import StreamedReplies
from tests.e2e.test_matrix import (  # noqa: F401 - synapse is the module-scoped homeserver fixture
    Cairn,
    synapse,
    wait_for,
)
from tests.support.chat_server import STAND_INS, model_env
from tests.support.matrix_e2e import E2EPerson
from tests.support.messages_server import MessagesServer, Reply
from tests.support.synapse import Synapse

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ANSWER = (
    "Roll back with the previous tag first. Then watch the error rate for ten minutes, and "
    "if it stays under one percent, tell the on-call that the incident is over and write "
    "the **timeline** in the incident document before the end of the day."
)
# The stand-in writes 8 characters per piece: ANSWER takes about 2 s at this pace.
DELTA_DELAY = 0.06
STEPS = [
    f"**Step {i}**: check the runbook, then the dashboards, then tell the team." for i in range(40)
]
LONG_ANSWER = "\n\n".join(STEPS)


# --------------------------------------------------------------------------------------------
# What the person's device saw of the bot.


def _content(event: Event) -> dict[str, Any]:
    content = event.source.get("content") or {}
    return content if isinstance(content, dict) else {}


def _relation(event: Event) -> dict[str, Any]:
    relation = _content(event).get("m.relates_to") or {}
    return relation if isinstance(relation, dict) else {}


class Seen:
    """The bot's messages in a thread and the edits of them, as the person's device has them."""

    def __init__(self, person: E2EPerson, room: str, bot: str, root: str) -> None:
        events = [
            e
            for e in person.events(room)
            if e.sender == bot and e.source.get("type") == "m.room.message"
        ]
        self.originals = [
            e
            for e in events
            if _relation(e).get("rel_type") == "m.thread" and _relation(e).get("event_id") == root
        ]
        ids = {e.event_id for e in self.originals}
        self.edits = [
            e
            for e in events
            if _relation(e).get("rel_type") == "m.replace" and _relation(e).get("event_id") in ids
        ]

    def edits_of(self, event_id: str) -> list[Event]:
        return [e for e in self.edits if _relation(e)["event_id"] == event_id]

    def shown(self, original: Event) -> dict[str, Any]:
        """What a client shows for ``original``: its last edit's new content, or itself."""
        edits = self.edits_of(original.event_id)
        return dict(_content(edits[-1])["m.new_content"]) if edits else _content(original)

    def bodies(self) -> list[str]:
        return [str(self.shown(e)["body"]) for e in self.originals]


def seen_once(
    person: E2EPerson,
    room: str,
    bot: str,
    root: str,
    done: Callable[[Seen], bool],
    timeout: float = 60.0,
) -> Seen:
    """What the person saw once ``done`` says it is complete."""

    def probe() -> Seen | None:
        seen = Seen(person, room, bot, root)
        return seen if done(seen) else None

    return wait_for("the whole answer", probe, timeout)


# --------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture
def cairn(
    synapse: Synapse,  # noqa: F811 - the module-scoped homeserver imported above
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Cairn]:
    monkeypatch.setenv("CAIRN_MATRIX_ENCRYPTION", "true")
    monkeypatch.setenv("CAIRN_MATRIX_STREAM_INTERVAL", "0.25")
    bot = Cairn(synapse, synapse.register(f"cairn-{secrets.token_hex(3)}"), monkeypatch)
    try:
        yield bot
    finally:
        bot.stop()


@pytest.fixture
def alice(synapse: Synapse, tmp_path: Path) -> Iterator[E2EPerson]:  # noqa: F811
    user = synapse.register(f"alice-{secrets.token_hex(3)}")
    with E2EPerson(synapse, user, tmp_path / "store-alice") as person:
        yield person


SlowModel = Callable[[str, float], contextlib.AbstractContextManager[MessagesServer]]


@pytest.fixture(params=sorted(STAND_INS))
def slow_model(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> SlowModel:
    """``slow_model(answer, delay)``: a model that writes ``answer`` for every request, one piece
    each ``delay`` seconds, with Cairn pointed at it; each provider's stand-in in turn."""
    provider = str(request.param)
    server_class, written = STAND_INS[provider]

    @contextlib.contextmanager
    def started(answer: str, delay: float) -> Iterator[MessagesServer]:
        with server_class(
            api_key="k",
            responder=lambda _: Reply(body=written(answer), delta_delay=delay),
        ) as model:
            for name, value in model_env(provider, model).items():
                monkeypatch.setenv(name, value)
            yield model

    return started


def ask(cairn: Cairn, alice: E2EPerson, *, encrypted: bool) -> tuple[str, str]:
    """Start the bot, put it in a room with alice and ask it; (room, question's event id)."""
    cairn.start()
    room = alice.create_room(invite=(cairn.id,), encrypted=encrypted)
    alice.wait_joined(room, cairn.id)
    return room, alice.send(room, "how do I roll back?", mention=cairn.id)


def reply_row(cairn: Cairn) -> OutboundMessage:
    def sent() -> list[OutboundMessage]:
        return cairn.db_rows(
            OutboundMessage,
            OutboundMessage.kind == "reply",
            OutboundMessage.status == OutboundStatus.SENT,
        )

    (row,) = wait_for("the reply recorded as sent", sent)
    return row


# --------------------------------------------------------------------------------------------
# The scenarios


@pytest.mark.parametrize("encrypted", [False, True], ids=["clear-room", "encrypted-room"])
def test_an_answer_streams_into_one_message_edited_until_it_is_whole(
    cairn: Cairn, alice: E2EPerson, slow_model: SlowModel, encrypted: bool
) -> None:
    with slow_model(ANSWER, DELTA_DELAY):
        room, question = ask(cairn, alice, encrypted=encrypted)
        seen = seen_once(alice, room, cairn.id, question, lambda s: ANSWER in s.bodies())
        time.sleep(1.5)  # anything that would still come (a second message, a late edit)
        seen = Seen(alice, room, cairn.id, question)

    # One message, first showing the beginning of the answer only.
    (original,) = seen.originals
    first = str(_content(original)["body"])
    assert first
    assert first != ANSWER
    assert ANSWER.startswith(first.rstrip()), first
    assert _relation(original)["m.in_reply_to"]["event_id"] == question
    assert _content(original)["m.mentions"] == {"user_ids": [alice.id]}

    # Then edits, each showing more, throttled and capped (20 by default).
    edits = seen.edits_of(original.event_id)
    assert 2 <= len(edits) <= 20 + 1, len(edits)
    bodies = [str(_content(e)["m.new_content"]["body"]) for e in edits]
    for before, after in itertools.pairwise([first, *bodies]):
        assert after.startswith(before.rstrip()), (before, after)
        assert len(after) > len(before), (before, after)
    for edit in edits:
        content = _content(edit)
        assert content["body"] == "* " + content["m.new_content"]["body"]
        assert content["m.mentions"] == {}  # an edit notifies nobody again
        assert "m.relates_to" not in content["m.new_content"]

    # The last edit is the whole answer, rendered as a reply posted at once is.
    final = _content(edits[-1])["m.new_content"]
    assert final["body"] == ANSWER
    assert final["msgtype"] == "m.text"
    assert final["format"] == "org.matrix.custom.html"
    assert final["formatted_body"] == to_html(ANSWER)
    assert "<strong>timeline</strong>" in final["formatted_body"]
    assert final["m.mentions"] == {"user_ids": [alice.id]}

    # Seen early: the first message came well before the answer was whole.
    assert edits[-1].server_timestamp - original.server_timestamp >= 1000

    # Encrypted in an encrypted room (edits too), in clear in a clear one.
    for event in (original, *edits):
        assert bool(getattr(event, "decrypted", False)) is encrypted

    # Reactions point at the original message; nothing of the stream is left over; the bot
    # did not take its own edits in.
    row = reply_row(cairn)
    assert row.message_ref == original.event_id
    assert cairn.pipeline is not None
    assert StreamedReplies(cairn.pipeline.rt.db).refs(row.cause_event_id) == []
    edit_ids = [e.event_id for e in edits]
    assert cairn.db_rows(SessionEvent, SessionEvent.event_ref.in_(edit_ids)) == []  # type: ignore[union-attr]


def test_a_long_answer_streams_across_messages_split_at_the_size_limit(
    cairn: Cairn, alice: E2EPerson, monkeypatch: pytest.MonkeyPatch, slow_model: SlowModel
) -> None:
    monkeypatch.setenv("CAIRN_MATRIX_MESSAGE_BYTES", "1000")
    parts = split_text(LONG_ANSWER, 1000)
    assert len(parts) >= 3
    with slow_model(LONG_ANSWER, 0.02):
        room, question = ask(cairn, alice, encrypted=False)
        seen = seen_once(
            alice, room, cairn.id, question, lambda s: "Step 39" in "".join(s.bodies())
        )
        time.sleep(1.5)
        seen = Seen(alice, room, cairn.id, question)

    # Each part its own message, each ending as the split of the whole answer says.
    assert seen.bodies() == parts
    assert [seen.shown(e)["formatted_body"] for e in seen.originals] == [to_html(p) for p in parts]
    assert all(len(body.encode()) <= 1000 for body in seen.bodies())
    assert all(_relation(e)["event_id"] == question for e in seen.originals)
    # The earlier parts streamed: more text was shown in them than they first had.
    assert seen.edits_of(seen.originals[0].event_id)
    assert reply_row(cairn).message_ref == seen.originals[0].event_id


def test_edits_stop_at_the_cap_and_the_final_edit_is_whole(
    cairn: Cairn, alice: E2EPerson, monkeypatch: pytest.MonkeyPatch, slow_model: SlowModel
) -> None:
    monkeypatch.setenv("CAIRN_MATRIX_STREAM_EDITS", "3")
    monkeypatch.setenv("CAIRN_MATRIX_STREAM_INTERVAL", "0.1")
    answer = " ".join(STEPS[:15])  # ~1100 characters: ~140 pieces over ~8 s
    with slow_model(answer, DELTA_DELAY):
        room, question = ask(cairn, alice, encrypted=False)
        seen = seen_once(alice, room, cairn.id, question, lambda s: answer in s.bodies())
        time.sleep(1.5)
        seen = Seen(alice, room, cairn.id, question)

    (original,) = seen.originals
    edits = seen.edits_of(original.event_id)
    assert len(edits) == 3 + 1, [_content(e)["m.new_content"]["body"][-20:] for e in edits]
    assert _content(edits[-1])["m.new_content"]["body"] == answer
    assert _content(edits[-2])["m.new_content"]["body"] != answer  # the cap held it back
    # The capped edits came while the model still wrote; the final one when it was done.
    assert edits[-1].server_timestamp - edits[-2].server_timestamp >= 2000


def test_with_streaming_off_the_answer_is_one_message_never_edited(
    cairn: Cairn, alice: E2EPerson, monkeypatch: pytest.MonkeyPatch, slow_model: SlowModel
) -> None:
    monkeypatch.setenv("CAIRN_MATRIX_STREAM", "false")
    with slow_model(ANSWER, DELTA_DELAY):
        room, question = ask(cairn, alice, encrypted=False)
        seen = seen_once(alice, room, cairn.id, question, lambda s: ANSWER in s.bodies())
        time.sleep(1.5)
        seen = Seen(alice, room, cairn.id, question)

    (original,) = seen.originals
    assert _content(original)["body"] == ANSWER
    assert _content(original)["formatted_body"] == to_html(ANSWER)
    assert seen.edits == []
    assert reply_row(cairn).message_ref == original.event_id


def test_a_frontend_restarted_mid_stream_finishes_the_same_message(
    cairn: Cairn, alice: E2EPerson, monkeypatch: pytest.MonkeyPatch, slow_model: SlowModel
) -> None:
    answer = " ".join(STEPS[:8])  # ~600 characters: ~75 pieces over ~4.5 s
    # A turn cut by the stop is taken up again by the restarted bot's upkeep, once its session
    # counts as stale: soon here, rather than after the default minute.
    monkeypatch.setenv("CAIRN_STALE_AFTER", "2")
    monkeypatch.setenv("CAIRN_BEAT_INTERVAL", "1")
    monkeypatch.setenv("CAIRN_LOCK_TTL", "3")
    with slow_model(answer, DELTA_DELAY):
        room, question = ask(cairn, alice, encrypted=True)
        # Stopped once the message has been edited at least once: it is recorded by then (a
        # stop inside the first record's write is ADR 0027's known gap).
        wait_for("a first edit", lambda: Seen(alice, room, cairn.id, question).edits)
        cairn.stop()  # mid-answer: what was streamed is recorded, the rest is not shown yet
        cairn.start()
        seen = seen_once(
            alice, room, cairn.id, question, lambda s: answer in s.bodies(), timeout=150
        )
        time.sleep(1.5)
        seen = Seen(alice, room, cairn.id, question)

    (original,) = seen.originals  # the restarted frontend edited it, posted no second one
    assert _content(original)["body"] != answer
    assert _content(seen.edits_of(original.event_id)[-1])["m.new_content"]["body"] == answer
    assert reply_row(cairn).message_ref == original.event_id
