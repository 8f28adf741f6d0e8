"""Cairn in end-to-end encrypted Matrix rooms, against a real Synapse on 127.0.0.1.

Two encrypting clients of our own, each with its own device: the person
(:class:`tests.support.matrix_e2e.E2EPerson`, matrix-nio with its own crypto store) and the
bot (Cairn's Matrix frontend, run as ``cairn run`` runs it, on the embedded default with the
offline model). The person creates an encrypted room or an encrypted direct chat, invites the
bot, and talks to it as Element would: encrypted mentions, thread replies, encrypted reactions,
redactions, edits. What the bot sends back must arrive encrypted and decrypt on the person's
device. A clear room beside them keeps working, and never hears what the encrypted ones said.
"""

from __future__ import annotations

import copy
import logging
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from nio import Event, MegolmEvent

from cairn.bot.matrix.store import CryptoStore
from cairn.bot.matrix.sync_state import StateFile
from cairn.bot.matrix.undecrypted import UNDECRYPTABLE_NOTICE
from cairn.db.models import MemoryAudit, MemoryRow, Reaction, SessionEvent
from tests.e2e.matrix_latency import measure
from tests.e2e.test_matrix import (  # noqa: F401 - synapse is the module-scoped homeserver fixture
    FACT,
    Cairn,
    Person,
    as_shown,
    settings_home,
    synapse,
    typing_users,
    wait_file_taken_in,
    wait_for,
)
from tests.support.chat_server import STAND_INS, model_env
from tests.support.matrix_e2e import E2EPerson
from tests.support.messages_server import Reply
from tests.support.synapse import Synapse

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SECRET_PLAN = "the merger with Initech closes on the ninth"
NOTICE_HEAD = UNDECRYPTABLE_NOTICE.split(":", 1)[0]


@pytest.fixture
def cairn(
    synapse: Synapse,  # noqa: F811 - the module-scoped homeserver imported above
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Cairn]:
    """The bot, encrypting; an undecryptable event waits 4 s before its sender is told."""
    monkeypatch.setenv("CAIRN_MATRIX_ENCRYPTION", "true")
    monkeypatch.setenv("CAIRN_MATRIX_KEY_WAIT_SECONDS", "4")
    bot = Cairn(synapse, synapse.register(f"cairn-{secrets.token_hex(3)}"), monkeypatch)
    try:
        yield bot
    finally:
        bot.stop()


@pytest.fixture
def people(
    synapse: Synapse,  # noqa: F811
    tmp_path: Path,
) -> Iterator[Callable[[str], E2EPerson]]:
    """People with encrypting clients, each a device of its own; stopped at the end."""
    made: list[E2EPerson] = []

    def make(name: str) -> E2EPerson:
        user = synapse.register(f"{name}-{secrets.token_hex(3)}")
        person = E2EPerson(synapse, user, tmp_path / f"store-{name}-{len(made)}").start()
        made.append(person)
        return person

    yield make
    for person in made:
        person.stop()


# --------------------------------------------------------------------------------------------
# What the person's device sees of the bot.


def _relation(event: Event) -> dict[str, Any]:
    content = event.source.get("content") or {}
    relation = content.get("m.relates_to") or {}
    return relation if isinstance(relation, dict) else {}


def _body(event: Event) -> str:
    return str((event.source.get("content") or {}).get("body", ""))


def bot_messages(person: E2EPerson, room: str, bot: str) -> list[Event]:
    """The bot's messages the person's device has seen in ``room``, decrypted where it could,
    as a client shows them: each with its latest edit (answers stream into edited messages)."""
    events = [
        e
        for e in person.events(room)
        if e.sender == bot and e.source.get("type") == "m.room.message"
    ]
    shown = as_shown([{**e.source, "event_id": e.event_id} for e in events])
    by_id = {e.event_id: e for e in events}
    folded = []
    for source in shown:
        event = copy.copy(by_id[source["event_id"]])  # keeps whether it was decrypted
        event.source = source
        folded.append(event)
    return folded


def answers_to(person: E2EPerson, room: str, bot: str, root: str) -> list[Event]:
    """The bot's messages in the thread on ``root``."""
    return [
        e
        for e in bot_messages(person, room, bot)
        if _relation(e).get("rel_type") == "m.thread" and _relation(e).get("event_id") == root
    ]


def wait_answer(
    person: E2EPerson,
    room: str,
    bot: str,
    root: str,
    where: Callable[[Event], bool] = lambda e: True,
    timeout: float = 60,
) -> Event:
    """The first bot message in the thread on ``root`` that ``where`` accepts."""
    return wait_for(
        f"the bot's answer to {root}",
        lambda: [e for e in answers_to(person, room, bot, root) if where(e)],
        timeout,
    )[0]


def is_notice(event: Event) -> bool:
    return (event.source.get("content") or {}).get("msgtype") == "m.notice"


def encrypted_room_with_bot(person: E2EPerson, cairn: Cairn, *, direct: bool = False) -> str:
    room = person.create_room(invite=(cairn.id,), encrypted=True, direct=direct)
    person.wait_joined(room, cairn.id)
    return room


def memory(cairn: Cairn, text: str) -> MemoryRow:
    (row,) = cairn.db_rows(MemoryRow, MemoryRow.text == text)
    return row


# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("direct", [False, True], ids=["encrypted-room", "encrypted-dm"])
def test_an_encrypted_conversation_works_as_a_clear_one_and_stays_in_its_room(
    cairn: Cairn,
    people: Callable[[str], E2EPerson],
    direct: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    cairn.start()
    alice = people("alice")
    room = encrypted_room_with_bot(alice, cairn, direct=direct)
    assert alice.room_encrypted(room)

    # A mention gets a reply and a "remembered" notice in a thread on it, both encrypted.
    mention = alice.send(room, f"cairn: remember {SECRET_PLAN}", mention=cairn.id)
    notice = wait_answer(alice, room, cairn.id, mention, is_notice)
    assert _body(notice) == f"remembered: {SECRET_PLAN}"
    answers = answers_to(alice, room, cairn.id, mention)
    assert len(answers) == 2
    assert all(getattr(e, "decrypted", False) for e in answers), "the bot answered in clear"
    row = memory(cairn, SECRET_PLAN)
    assert row.private_to == room  # what is said in an encrypted room is private to it

    # A follow-up in the thread, without a mention, continues the same session.
    follow_up = alice.send(room, "what is closing?", thread=mention)
    answer = wait_answer(
        alice, room, cairn.id, mention, lambda e: "Initech" in _body(e) and not is_notice(e)
    )
    assert getattr(answer, "decrypted", False)
    sessions = {
        e.session_id
        for e in cairn.db_rows(SessionEvent, SessionEvent.event_ref.in_([mention, follow_up]))
    }
    assert len(sessions) == 1  # one session for the mention and its follow-up

    # An encrypted reaction reaches the feedback path: its author's own confirmation is
    # refused and audited (issue 30), and redacting it is taken in as its undoing.
    assert not row.confirmed
    reaction = alice.react(room, str(notice.event_id), "✅")
    wait_for(
        "the confirmation to be weighed",
        lambda: (
            [a.action for a in cairn.db_rows(MemoryAudit, MemoryAudit.memory_id == row.id)]
            == ["confirm-refused"]
        ),
    )
    assert not memory(cairn, SECRET_PLAN).confirmed
    alice.redact(room, reaction)
    wait_for(
        "the reaction's redaction to be taken in",
        lambda: [r.removed_at is not None for r in cairn.db_rows(Reaction)] == [True],
    )

    # A clear public room beside it works, and never hears what the encrypted room said.
    bob = people("bob")
    clear = bob.create_room(invite=(cairn.id,), encrypted=False, public=True)
    bob.wait_joined(clear, cairn.id)
    question = bob.send(clear, "what do you know about a merger?", mention=cairn.id)
    reply = wait_answer(bob, clear, cairn.id, question)
    assert not getattr(reply, "decrypted", False)  # a clear room gets clear answers
    assert "Initech" not in _body(reply)

    time.sleep(1.5)  # time for a second answer to show, if one were coming
    assert len(answers_to(alice, room, cairn.id, mention)) == 3  # reply, notice, answer
    # Nothing logged, by Cairn or by nio, carries what was said in the encrypted room.
    leaked = [r.name for r in caplog.records if "Initech" in r.getMessage()]
    assert not leaked, f"logged in plain text by {leaked}"


def test_an_edit_that_adds_the_mention_is_answered_once_where_the_message_is(
    cairn: Cairn, people: Callable[[str], E2EPerson]
) -> None:
    cairn.start()
    alice = people("alice")
    room = encrypted_room_with_bot(alice, cairn)
    forgot = alice.send(room, f"remember {FACT}")
    time.sleep(1)
    assert not bot_messages(alice, room, cairn.id)  # not mentioned: not read
    alice.edit(room, forgot, f"cairn: remember {FACT}", mention=cairn.id)
    notice = wait_answer(alice, room, cairn.id, forgot, is_notice)
    assert _body(notice) == f"remembered: {FACT}"
    # Editing it again (a typo fixed) does not ask a second time.
    alice.edit(room, forgot, f"cairn: remember {FACT}!", mention=cairn.id)
    time.sleep(2)
    assert len(answers_to(alice, room, cairn.id, forgot)) == 2


def test_a_message_whose_keys_come_late_is_answered_once_they_do_even_across_a_restart(
    cairn: Cairn, people: Callable[[str], E2EPerson]
) -> None:
    cairn.start()
    alice = people("alice")
    room = encrypted_room_with_bot(alice, cairn)
    first, release_first = alice.send_withheld(room, "cairn: what do you know?", mention=cairn.id)
    time.sleep(2)
    assert not answers_to(alice, room, cairn.id, first)  # no keys, no answer (and no crash)
    release_first()
    wait_answer(alice, room, cairn.id, first)

    # Kept in the state file: the keys arrive while the bot is down.
    second, release_second = alice.send_withheld(room, f"cairn: remember {FACT}", mention=cairn.id)
    wait_for("the bot to keep the event", lambda: _kept(cairn, second))
    cairn.stop()
    release_second()
    cairn.start()
    wait_answer(alice, room, cairn.id, second, is_notice)
    time.sleep(2)
    assert len(answers_to(alice, room, cairn.id, first)) == 1
    assert len(answers_to(alice, room, cairn.id, second)) == 2  # the answer and its notice
    assert not _kept(cairn, second)


def test_a_message_whose_keys_never_come_gets_one_notice_and_no_answer(
    cairn: Cairn, people: Callable[[str], E2EPerson]
) -> None:
    cairn.start()
    alice = people("alice")
    room = encrypted_room_with_bot(alice, cairn)
    lost = alice.send_undecryptable(room, "cairn: this never decrypts")
    notice = wait_answer(alice, room, cairn.id, lost, is_notice, timeout=30)
    assert _body(notice).startswith(NOTICE_HEAD)
    assert cairn.frontend is not None
    assert cairn.frontend.state.device_id in _body(notice)
    # The room goes on: a readable mention is answered after it.
    mention = alice.send(room, "cairn: still there?", mention=cairn.id)
    wait_answer(alice, room, cairn.id, mention)
    # Restarted, the bot does not tell again (the state file says it told).
    cairn.stop()
    cairn.start()
    time.sleep(3)
    assert len(answers_to(alice, room, cairn.id, lost)) == 1
    assert not cairn.errors


def test_messages_of_one_session_whose_keys_never_come_get_one_notice_between_them(
    cairn: Cairn, people: Callable[[str], E2EPerson]
) -> None:
    cairn.start()
    alice = people("alice")
    room = encrypted_room_with_bot(alice, cairn)
    first, second, third = alice.send_undecryptable_many(
        room, ["cairn: one", "cairn: two", "cairn: three"]
    )
    wait_answer(alice, room, cairn.id, first, is_notice, timeout=30)
    time.sleep(6)  # past the wait of the later two as well
    told = [e for e in bot_messages(alice, room, cairn.id) if _body(e).startswith(NOTICE_HEAD)]
    assert len(told) == 1
    assert cairn.frontend is not None
    kept = cairn.frontend.state.undecrypted
    assert all(kept[event_id]["told"] for event_id in (first, second, third))


def test_after_a_restart_the_next_encrypted_message_is_answered_once_and_nothing_replayed(
    cairn: Cairn, people: Callable[[str], E2EPerson]
) -> None:
    cairn.start()
    alice = people("alice")
    room = encrypted_room_with_bot(alice, cairn, direct=True)
    before = alice.send(room, "cairn: what do you know?", mention=cairn.id)
    wait_answer(alice, room, cairn.id, before)
    unmentioned = alice.send(room, "and what is new?")  # a direct chat needs no mention
    wait_answer(alice, room, cairn.id, unmentioned)
    device = cairn.frontend.state.device_id if cairn.frontend else ""
    cairn.stop()

    while_down = alice.send(room, f"cairn: remember {FACT}", mention=cairn.id)
    cairn.start()
    wait_answer(alice, room, cairn.id, while_down, is_notice)
    in_thread = alice.send(room, "and what else?", thread=while_down)
    wait_answer(
        alice, room, cairn.id, while_down, lambda e: not is_notice(e) and e.event_id != in_thread
    )
    time.sleep(3)  # time for any replay to show up
    assert len(answers_to(alice, room, cairn.id, before)) == 1
    assert len(answers_to(alice, room, cairn.id, while_down)) == 3
    assert cairn.frontend is not None
    assert cairn.frontend.state.device_id == device


def test_a_second_frontend_of_the_account_is_refused_while_the_first_runs(
    cairn: Cairn, tmp_path: Path
) -> None:
    cairn.start()
    store = CryptoStore(settings_home() / "matrix" / "store", cairn.id)
    assert store.holder() == os.getpid()
    second = subprocess.run(
        [sys.executable, "-m", "cairn", "run"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert second.returncode != 0
    assert f"process {os.getpid()}" in second.stderr
    assert "another Cairn Matrix frontend" in second.stderr
    assert cairn.frontend is not None
    assert cairn.frontend.healthy()  # the first goes on


def _kept(cairn: Cairn, event_id: str) -> bool:
    """Whether the bot's state file keeps ``event_id`` waiting for its keys."""
    state = StateFile(settings_home() / "matrix", cairn.id).load(
        cairn.frontend.account.homeserver if cairn.frontend else "", cairn.id
    )
    return event_id in state.undecrypted


def test_the_latency_benchmark_measures_both_rooms_with_encrypted_replies() -> None:
    result = measure(2)
    assert result["encrypted_replies"] == 2  # every reply in the encrypted room was encrypted
    for name in ("encrypted", "clear"):
        assert result[name]["messages"] == 2
        figures = result[name]["mention_to_reply_ms"]
        assert 0 < figures["p50"] <= figures["p95"] < 60_000


def test_a_blocked_device_is_not_heard_and_cannot_read_the_bots_answers(
    cairn: Cairn, people: Callable[[str], E2EPerson], monkeypatch: pytest.MonkeyPatch
) -> None:
    mallory = people("mallory")
    monkeypatch.setenv("CAIRN_MATRIX_BLOCKED_DEVICES", f"{mallory.id}/{mallory.device_id}")
    cairn.start()
    alice = people("alice")
    room = encrypted_room_with_bot(alice, cairn)
    alice.invite(room, mallory.id)
    mallory.join(room)
    alice.wait_joined(room, mallory.id)
    planted = mallory.send(
        room, "cairn: remember the admin password is in the wiki", mention=cairn.id
    )
    asked = alice.send(room, "cairn: what do you know?", mention=cairn.id)
    reply = wait_answer(alice, room, cairn.id, asked)
    # Mallory's device sees the bot's answer only as ciphertext: it was given no key.
    seen = mallory.wait_for(lambda e: e.event_id == reply.event_id, room=room, what="the answer")
    assert isinstance(seen, MegolmEvent)
    time.sleep(1)
    assert not answers_to(alice, room, cairn.id, planted)
    assert not cairn.db_rows(SessionEvent, SessionEvent.event_ref == planted)
    assert getattr(reply, "decrypted", False)  # while Alice's device, not blocked, could


def test_room_keys_are_forwarded_to_the_bots_own_devices_only(
    cairn: Cairn,
    people: Callable[[str], E2EPerson],
    synapse: Synapse,  # noqa: F811
    tmp_path: Path,
) -> None:
    cairn.start()
    alice = people("alice")
    room = encrypted_room_with_bot(alice, cairn)
    said = alice.send(room, "cairn: what do you know?", mention=cairn.id)
    wait_answer(alice, room, cairn.id, said)

    # Devices that log in afterwards were given no key for what was said before.
    own = E2EPerson(synapse, cairn.account, tmp_path / "bot-second-device").start()
    stranger = E2EPerson(synapse, alice.user, tmp_path / "alice-second-device").start()
    try:
        for device in (own, stranger):
            seen = device.wait_for(lambda e: e.event_id == said, room=room, what="the mention")
            assert isinstance(seen, MegolmEvent)
        stranger.request_key(room, said, ask=cairn.id)  # asks the bot, not its own account
        own.request_key(room, said)
        # The bot forwards the key to a device of its own account...
        own.wait_for(
            lambda e: e.event_id == said and getattr(e, "decrypted", False),
            room=room,
            what="the mention decrypted with the forwarded key",
        )
        # ...and to nobody else's (asked first, the stranger had as long as it took).
        time.sleep(2)
        (still,) = [e for e in stranger.events(room) if e.event_id == said]
        assert isinstance(still, MegolmEvent)
    finally:
        own.stop()
        stranger.stop()


@pytest.mark.parametrize("provider", sorted(STAND_INS))
def test_in_an_encrypted_room_the_bot_types_while_it_works_and_a_long_answer_comes_in_parts(
    cairn: Cairn,
    people: Callable[[str], E2EPerson],
    synapse: Synapse,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
) -> None:
    long_answer = "\n\n".join(
        f"**Step {i}**: " + "check the runbook and the dashboards. " * 12 for i in range(60)
    )
    server_class, answer = STAND_INS[provider]

    def slow_model(request: dict[str, Any]) -> Reply:
        return Reply(body=answer(long_answer), delay=4.0)

    with server_class(api_key="k", responder=slow_model) as model:
        for name, value in model_env(provider, model).items():
            monkeypatch.setenv(name, value)
        cairn.start()
        alice = people("alice")
        room = encrypted_room_with_bot(alice, cairn)
        # Typing notices are not encrypted: alice's other device reads them from its sync.
        watcher = Person(synapse, alice.user)
        since = [watcher.call("GET", "/sync?timeout=0")["next_batch"]]
        question = alice.send(room, "cairn: how do I roll back?", mention=cairn.id)
        wait_for(
            "the bot to be typing", lambda: cairn.id in (typing_users(watcher, room, since) or ())
        )
        last = wait_answer(alice, room, cairn.id, question, lambda e: "Step 59" in _body(e))
    parts = answers_to(alice, room, cairn.id, question)
    assert parts[-1].event_id == last.event_id
    assert len(parts) >= 3
    assert all(getattr(p, "decrypted", False) for p in parts)
    assert " ".join(_body(p) for p in parts).split() == long_answer.split()


def test_an_encrypted_5mb_log_is_decrypted_read_without_its_password_and_a_line_answered(
    cairn: Cairn, people: Callable[[str], E2EPerson], tmp_path: Path
) -> None:
    from tests.integration.test_console_attachments import PASSWORD, big_log, stored_anywhere

    cairn.start()
    alice = people("alice")
    room = encrypted_room_with_bot(alice, cairn)
    root = alice.send(room, "cairn: api-3 is failing, here is its log", mention=cairn.id)
    wait_answer(alice, room, cairn.id, root)
    alice.send_file(room, "api-3.log", big_log(tmp_path / "api-3.log").read_bytes(), thread=root)
    wait_file_taken_in(cairn, "api-3.log")
    alice.send(room, "what happened to req-041999?", thread=root)
    answer = wait_answer(alice, room, cairn.id, root, lambda e: "line 42000:" in _body(e))
    assert "req-041999 GET /v1/orders/293993" in _body(answer)
    assert stored_anywhere(Path(os.environ["CAIRN_HOME"]), PASSWORD) == []
