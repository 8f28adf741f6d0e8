"""Cairn in Matrix rooms, against a real Synapse homeserver on 127.0.0.1.

Synapse (from PyPI, in its own virtualenv) runs for this module; each test registers its own
bot account and people, runs Cairn's Matrix frontend the way ``cairn run`` does (a thread with
a stop event, on the embedded default: SQLite, local Qdrant, offline model; the restart test
runs ``cairn run`` itself) and talks to it through the plain client-server API, as any Matrix
client would. Two tests put a model stand-in behind it, each on both, the Anthropic one and the
Chat Completions one (``STAND_INS``): a slow one, to see the bot typing, and one that is sent
an image.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import pytest
from sqlmodel import select

from cairn.bot.matrix import ENCRYPTION_OFF_NOTICE, MatrixFrontend
from cairn.bot.matrix.sync import SYNC_FILTER
from cairn.bot.matrix.sync_state import StateFile
from cairn.bot.pipeline import Pipeline
from cairn.core.errors import CairnError
from cairn.core.settings import load_settings
from cairn.db.models import (
    AgentSession,
    MemoryRow,
    OutboundMessage,
    OutboundStatus,
    SessionEvent,
)
from cairn.sessions.log import EventLog
from cairn.sessions.outbox import Said, say_in
from tests.support.chat_server import STAND_INS, model_env
from tests.support.heard import Heard
from tests.support.matrix_events import encryption_state, reaction, room_preset, thread_relation
from tests.support.messages_server import Reply
from tests.support.private_postgres import PrivatePostgres
from tests.support.synapse import Synapse, SynapseUnavailable, User, running_synapse

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

FACT = "deploys are frozen until Monday"
OLD_CLIENT = "old client: no m.mentions"
WAIT_SECONDS = 60.0
SYNC_TIMELINE_LIMIT = int(SYNC_FILTER["room"]["timeline"]["limit"])
T = TypeVar("T")


@pytest.fixture(scope="module")
def synapse() -> Iterator[Synapse]:
    """One homeserver for the module, stopped (and its data deleted) when the module ends."""
    try:
        with running_synapse() as server:
            yield server
            return
    except SynapseUnavailable as exc:
        reason = str(exc)
    # As the other service fixtures do: skip, unless CI demands the real thing.
    if os.environ.get("CAIRN_REQUIRE_SERVICES") == "1":
        pytest.fail(f"Synapse unavailable: {reason} [CAIRN_REQUIRE_SERVICES=1]", pytrace=False)
    pytest.skip(f"Synapse unavailable: {reason}")


# --------------------------------------------------------------------------------------------
# A person with a Matrix client: the plain client-server API over HTTP.


@dataclass
class Person:
    """Someone in the rooms, with an account on the homeserver."""

    synapse: Synapse
    user: User
    http: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.http = httpx.Client(
            base_url=f"{self.synapse.base_url}/_matrix/client/v3",
            headers={"Authorization": f"Bearer {self.user.access_token}"},
            timeout=30,
        )

    @property
    def id(self) -> str:
        return self.user.user_id

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = self.http.request(method, path, json=body)
        assert response.status_code == 200, f"{method} {path}: {response.text}"
        return response.json()

    def create_room(
        self,
        *,
        invite: tuple[str, ...] = (),
        encrypted: bool = False,
        public: bool = False,
        direct: bool = False,
    ) -> str:
        """A room: invite-only (``private_chat``), or anyone may join (``public``), or a direct
        chat (``direct``: ``trusted_private_chat`` flagged ``is_direct``, as clients make DMs)."""
        preset = room_preset(public=public, direct=direct)
        body: dict[str, Any] = {"preset": preset, "invite": list(invite), "is_direct": direct}
        if encrypted:
            body["initial_state"] = [encryption_state()]
        return str(self.call("POST", "/createRoom", body)["room_id"])

    def invite(self, room: str, user_id: str) -> None:
        self.call("POST", f"/rooms/{quote(room)}/invite", {"user_id": user_id})

    def send(
        self,
        room: str,
        body: str,
        *,
        mention: str | None = None,
        thread: str | None = None,
        content: dict[str, Any] | None = None,
    ) -> str:
        """Send a text message; ``mention`` puts that user into ``m.mentions``.

        ``mention=OLD_CLIENT`` sends no ``m.mentions`` at all, as clients before it did.
        """
        message: dict[str, Any] = {"msgtype": "m.text", "body": body}
        if mention != OLD_CLIENT:
            message["m.mentions"] = {"user_ids": [mention]} if mention else {}
        if thread:
            message["m.relates_to"] = thread_relation(thread)
        message.update(content or {})
        return self._put(room, "m.room.message", message)

    def react(self, room: str, target: str, key: str) -> str:
        return self._put(room, "m.reaction", reaction(target, key))

    def redact(self, room: str, event_id: str) -> str:
        path = f"/rooms/{quote(room)}/redact/{quote(event_id)}/{uuid.uuid4().hex}"
        return str(self.call("PUT", path, {})["event_id"])

    def kick(self, room: str, user_id: str) -> None:
        self.call("POST", f"/rooms/{quote(room)}/kick", {"user_id": user_id})

    def membership(self, room: str, user_id: str) -> str | None:
        path = f"/rooms/{quote(room)}/state/m.room.member/{quote(user_id)}"
        response = self.http.get(path)
        return str(response.json()["membership"]) if response.status_code == 200 else None

    def timeline(self, room: str) -> list[dict[str, Any]]:
        """The room's latest events, oldest first."""
        answer = self.call("GET", f"/rooms/{quote(room)}/messages?dir=b&limit=200")
        return list(reversed(answer["chunk"]))

    def _put(self, room: str, event_type: str, content: dict[str, Any]) -> str:
        path = f"/rooms/{quote(room)}/send/{event_type}/{uuid.uuid4().hex}"
        return str(self.call("PUT", path, content)["event_id"])


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = WAIT_SECONDS) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


def bot_messages(person: Person, room: str, bot: str) -> list[dict[str, Any]]:
    """The bot's messages in ``room``, oldest first, as a client shows them: each with its
    latest edit (answers stream into a message that is edited as they are written)."""
    return as_shown(
        [
            e
            for e in person.timeline(room)
            if e["type"] == "m.room.message" and e["sender"] == bot and e.get("content")
        ]
    )


def edited(content: dict[str, Any]) -> str | None:
    """The event id ``content`` edits (``m.replace``), if it is an edit with new content."""
    relation = content.get("m.relates_to") or {}
    if relation.get("rel_type") == "m.replace" and isinstance(content.get("m.new_content"), dict):
        return str(relation["event_id"])
    return None


def as_shown(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One sender's ``events`` as a client shows them: an edited message with its latest
    ``m.new_content`` (keeping its own relation, which an edit cannot change), no edit listed."""
    latest = {
        target: e["content"]["m.new_content"]
        for e in events
        if (target := edited(e["content"])) is not None
    }
    shown = []
    for event in events:
        if edited(event["content"]) is not None:
            continue
        new = latest.get(event["event_id"])
        if new is not None:
            content = dict(new)
            if "m.relates_to" in event["content"]:
                content["m.relates_to"] = event["content"]["m.relates_to"]
            event = {**event, "content": content}
        shown.append(event)
    return shown


def _notice(event: dict[str, Any]) -> bool:
    return bool(event["content"]["msgtype"] == "m.notice")


def in_thread(event: dict[str, Any], root: str) -> bool:
    relation = event["content"].get("m.relates_to") or {}
    return relation.get("rel_type") == "m.thread" and relation.get("event_id") == root


def answers_to(person: Person, room: str, bot: str, root: str) -> list[dict[str, Any]]:
    return [e for e in bot_messages(person, room, bot) if in_thread(e, root)]


def wait_for_answer(
    what: str,
    person: Person,
    room: str,
    bot: str,
    root: str,
    where: Callable[[dict[str, Any]], bool] = lambda e: True,
) -> dict[str, Any]:
    """The first of the bot's messages in the thread on ``root`` that ``where`` accepts."""
    return wait_for(what, lambda: [e for e in answers_to(person, room, bot, root) if where(e)])[0]


# --------------------------------------------------------------------------------------------
# Cairn's Matrix frontend, run as `cairn run` runs it.


class Cairn:
    """The bot process: a pipeline and the Matrix frontend in a thread; restartable."""

    def __init__(self, synapse: Synapse, account: User, monkeypatch: pytest.MonkeyPatch) -> None:
        self.account = account
        self.base_url = synapse.base_url
        monkeypatch.setenv("MATRIX_HOMESERVER", synapse.base_url)
        monkeypatch.setenv("MATRIX_USER_ID", account.user_id)
        monkeypatch.setenv("MATRIX_PASSWORD", account.password)
        monkeypatch.setenv("CAIRN_REPLY_TIMEOUT", "60")
        self.pipeline: Pipeline | None = None
        self.frontend: MatrixFrontend | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[BaseException] = []

    @property
    def id(self) -> str:
        return self.account.user_id

    def start(self) -> None:
        settings = load_settings()
        self.pipeline = Pipeline.open(settings)
        self.frontend = MatrixFrontend(self.pipeline, settings)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="matrix-under-test", daemon=True)
        self._thread.start()
        frontend = self.frontend
        wait_for("the frontend's first sync", lambda: frontend.healthy())

    def _run(self) -> None:
        assert self.frontend is not None
        try:
            self.frontend.run(self._stop)
        except BaseException as exc:
            self.errors.append(exc)

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=60)
            assert not self._thread.is_alive(), "the Matrix frontend did not stop"
            self._thread = None
        if self.pipeline is not None:
            self.pipeline.close()
            self.pipeline = None
        assert not self.errors, self.errors

    def account_data(self, kind: str) -> Any:
        """The bot account's global account data of type ``kind`` (None if it has none)."""
        url = f"{self.base_url}/_matrix/client/v3/user/{quote(self.id)}/account_data/{kind}"
        response = httpx.get(
            url, headers={"Authorization": f"Bearer {self.account.access_token}"}, timeout=30
        )
        return response.json() if response.status_code == 200 else None

    def db_rows(self, model: type[T], *where: Any) -> list[T]:
        assert self.pipeline is not None
        with self.pipeline.rt.db.session() as s:
            return list(s.exec(select(model).where(*where)).all())  # type: ignore[call-overload]

    def answered(self, event_id: str) -> bool:
        """Whether every message answering the person's ``event_id`` is posted: an answer
        streamed into edited messages is final only then."""
        events = self.db_rows(SessionEvent, SessionEvent.event_ref == event_id)
        if not events:
            return False
        rows = self.db_rows(OutboundMessage, OutboundMessage.cause_event_id == events[0].id)
        return bool(rows) and all(r.status != OutboundStatus.PENDING for r in rows)


def settings_home() -> Path:
    return Path(os.environ["CAIRN_HOME"])


@contextlib.contextmanager
def cairn_run(log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``cairn run`` as a child process with this test's environment; SIGTERM at the end."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "cairn", "run"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ),
        )
        try:
            yield process
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                code = process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                code = None
    assert code == 0, f"cairn run exited with {code}: {log_path.read_text()[-3000:]}"


@pytest.fixture
def people(synapse: Synapse) -> Callable[[str], Person]:
    def make(name: str) -> Person:
        return Person(synapse, synapse.register(f"{name}-{secrets.token_hex(3)}"))

    return make


@pytest.fixture
def cairn(synapse: Synapse, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cairn]:
    bot = Cairn(synapse, synapse.register(f"cairn-{secrets.token_hex(3)}"), monkeypatch)
    try:
        yield bot
    finally:
        bot.stop()


def joined(person: Person, room: str, user_id: str) -> bool:
    return person.membership(room, user_id) == "join"


def room_with_bot(
    alice: Person, cairn: Cairn, *, public: bool = False, direct: bool = False
) -> str:
    room = alice.create_room(invite=(cairn.id,), public=public, direct=direct)
    wait_for("the bot to join", lambda: joined(alice, room, cairn.id))
    return room


# --------------------------------------------------------------------------------------------
# The scenarios


def test_an_invite_from_the_bots_homeserver_is_accepted(
    cairn: Cairn, people: Callable[[str], Person]
) -> None:
    cairn.start()
    room_with_bot(people("alice"), cairn)  # waits until the bot has joined


def test_an_invite_from_a_user_not_allowed_is_declined(
    cairn: Cairn, people: Callable[[str], Person], monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, mallory = people("alice"), people("mallory")
    monkeypatch.setenv("CAIRN_MATRIX_ALLOWED_INVITERS", alice.id)
    cairn.start()
    refused = mallory.create_room(invite=(cairn.id,))
    accepted = alice.create_room(invite=(cairn.id,))
    wait_for("the allowed invite to be accepted", lambda: joined(alice, accepted, cairn.id))
    wait_for(
        "the other invite to be declined",
        lambda: mallory.membership(refused, cairn.id) == "leave",
    )


def test_a_mention_gets_one_reply_in_a_thread_on_it_and_a_follow_up_continues_the_session(
    cairn: Cairn, people: Callable[[str], Person]
) -> None:
    cairn.start()
    alice = people("alice")
    room = room_with_bot(alice, cairn)
    alice.send(room, "just chatting, not for the bot")
    mention = alice.send(room, f"cairn: remember {FACT}", mention=cairn.id)

    notice = wait_for_answer(
        "the remembered notice",
        alice,
        room,
        cairn.id,
        mention,
        where=lambda e: e["content"]["body"] == f"remembered: {FACT}",
    )
    answers = answers_to(alice, room, cairn.id, mention)
    assert [e["content"]["msgtype"] for e in answers] == ["m.text", "m.notice"]
    relation = notice["content"]["m.relates_to"]
    assert relation["is_falling_back"] is True
    assert relation["m.in_reply_to"]["event_id"] == mention
    assert answers[0]["content"]["m.mentions"] == {"user_ids": [alice.id]}

    follow_up = alice.send(room, "what do you know about deploys?", thread=mention)
    wait_for_answer(
        "the answer in the thread",
        alice,
        room,
        cairn.id,
        mention,
        where=lambda e: FACT in e["content"]["body"] and e["content"]["msgtype"] == "m.text",
    )
    sessions = cairn.db_rows(AgentSession, AgentSession.channel == room)
    assert [s.thread_ref for s in sessions] == [mention]
    messages = cairn.db_rows(SessionEvent, SessionEvent.session_id == sessions[0].id)
    asked = [e.event_ref for e in messages if e.kind == "message"]
    assert asked == [mention, follow_up]
    # Only the mention and its thread were taken in; the chatter was not.
    assert len(cairn.db_rows(SessionEvent, SessionEvent.kind == "message")) == 2
    time.sleep(1.5)
    assert len(answers_to(alice, room, cairn.id, mention)) == 3  # one reply per message, + notice


def test_in_a_direct_chat_a_message_without_a_mention_is_for_the_bot_even_after_a_restart(
    cairn: Cairn, people: Callable[[str], Person]
) -> None:
    cairn.start()
    alice, bob = people("alice"), people("bob")
    room = room_with_bot(alice, cairn, direct=True)
    asked = alice.send(room, f"remember {FACT}")  # no mention: a direct chat needs none
    wait_for_answer(
        "the remembered notice",
        alice,
        room,
        cairn.id,
        asked,
        where=lambda e: e["content"]["body"] == f"remembered: {FACT}",
    )
    # The bot keeps it in its account data, as the spec asks of whoever is invited to a DM.
    direct = cairn.account_data("m.direct")
    assert direct == {alice.id: [room]}

    cairn.stop()
    cairn.start()  # a new process reads it back
    again = alice.send(room, "what do you know about deploys?")
    wait_for_answer(
        "the answer after a restart",
        alice,
        room,
        cairn.id,
        again,
        where=lambda e: FACT in e["content"]["body"] and e["content"]["msgtype"] == "m.text",
    )

    # With someone else in the room it is a room like any other: only mentions are read.
    alice.invite(room, bob.id)
    bob.call("POST", f"/join/{quote(room)}", {})
    chatter = bob.send(room, "just chatting with alice")
    mention = bob.send(room, "cairn: what is frozen?", mention=cairn.id)
    wait_for_answer("the answer to the mention", bob, room, cairn.id, mention)
    assert not cairn.answered(chatter)
    assert answers_to(bob, room, cairn.id, chatter) == []

    # An ordinary invite-only room with one person is no direct chat.
    other = room_with_bot(alice, cairn)
    ignored = alice.send(other, "not for the bot")
    mention = alice.send(other, "cairn: are you there?", mention=cairn.id)
    wait_for_answer("the answer in the other room", alice, other, cairn.id, mention)
    assert not cairn.answered(ignored)


def test_a_memory_from_one_public_room_is_recalled_in_another_room_of_the_homeserver(
    cairn: Cairn, people: Callable[[str], Person]
) -> None:
    cairn.start()
    alice, bob = people("alice"), people("bob")
    first = room_with_bot(alice, cairn, public=True)
    second = room_with_bot(bob, cairn, public=True)
    mention = alice.send(first, f"remember {FACT}", mention=cairn.id)
    wait_for_answer(
        "the remembered notice",
        alice,
        first,
        cairn.id,
        mention,
        where=lambda e: "remembered" in e["content"]["body"],
    )
    question = bob.send(second, "Are deploys frozen?", mention=cairn.id)
    # The answer streams: read it once it is whole.
    wait_for("the whole answer", lambda: cairn.answered(question))
    answer = wait_for_answer(
        "the answer in the other room",
        bob,
        second,
        cairn.id,
        question,
        where=lambda e: FACT in e["content"]["body"],
    )
    assert FACT in answer["content"]["body"]
    assert {s.tenant_id for s in cairn.db_rows(AgentSession)} == {"matrix:localhost"}


def test_a_reaction_on_the_remembered_notice_confirms_it_and_its_redaction_undoes_it(
    cairn: Cairn, people: Callable[[str], Person]
) -> None:
    cairn.start()
    alice = people("alice")
    room = room_with_bot(alice, cairn)
    mention = alice.send(room, f"remember {FACT}", mention=cairn.id)
    notice = wait_for_answer("the remembered notice", alice, room, cairn.id, mention, _notice)

    def memory() -> MemoryRow:
        (row,) = cairn.db_rows(MemoryRow, MemoryRow.text == FACT)
        return row

    assert not memory().confirmed
    # Another member of the room confirms it (its author's own word never counts: issue 30).
    bob = people("bob")
    alice.invite(room, bob.id)
    bob.call("POST", f"/join/{quote(room)}", {})
    reaction = bob.react(room, notice["event_id"], "✅")
    wait_for("the memory to be confirmed", lambda: memory().confirmed)
    assert memory().validity > 0

    bob.redact(room, reaction)
    wait_for("the confirmation to be undone", lambda: not memory().confirmed)
    assert memory().validity <= 0
    # The acknowledgements stay out of the room: only the reply and the notice are there.
    time.sleep(1)
    assert len(bot_messages(alice, room, cairn.id)) == 2


def test_after_a_restart_nothing_is_replayed_and_a_message_sent_while_down_is_answered_once(
    cairn: Cairn, people: Callable[[str], Person], tmp_path: Path
) -> None:
    # Cairn as an operator runs it: `cairn run`, stopped with SIGTERM and started again.
    alice = people("alice")
    with cairn_run(tmp_path / "first.log"):
        room = room_with_bot(alice, cairn)
        before = alice.send(room, "what do you know?", mention=cairn.id)
        wait_for_answer("the first answer", alice, room, cairn.id, before)
    state = json.loads(StateFile(settings_home() / "matrix", cairn.id).path.read_text())

    while_down = alice.send(room, f"remember {FACT}", mention=cairn.id)
    with cairn_run(tmp_path / "second.log"):
        wait_for_answer(
            "the answer to the message sent while down",
            alice,
            room,
            cairn.id,
            while_down,
            where=_notice,
        )
        time.sleep(3)  # time for any replay to show up
    assert len(answers_to(alice, room, cairn.id, before)) == 1
    assert [e["content"]["msgtype"] for e in answers_to(alice, room, cairn.id, while_down)] == [
        "m.text",
        "m.notice",
    ]
    after = json.loads(StateFile(settings_home() / "matrix", cairn.id).path.read_text())
    assert after["device_id"] == state["device_id"]  # the same device: no second login
    assert after["since"] != state["since"]


def test_after_a_restart_in_a_quiet_spell_the_bot_still_knows_its_rooms_and_posts_there(
    cairn: Cairn, people: Callable[[str], Person]
) -> None:
    # Nothing happens between the stop and the start, so the first sync after the restart
    # (full state, from the saved token) ends at the very token it started from. matrix-nio
    # drops a response whose token it already holds: the rooms must still be learnt from it,
    # or every reply written now (a turn cut by the stop, a notice) is given up as "not in
    # that room".
    alice = people("alice")
    cairn.start()
    room = room_with_bot(alice, cairn)
    question = alice.send(room, "what do you know?", mention=cairn.id)
    wait_for_answer("the first answer", alice, room, cairn.id, question)
    state_file = StateFile(settings_home() / "matrix", cairn.id)

    def settled() -> bool:  # the bot's own reply and typing are behind its saved token
        before = json.loads(state_file.path.read_text())["since"]
        time.sleep(2.0)
        return bool(json.loads(state_file.path.read_text())["since"] == before)

    wait_for("the bot's sync to settle", settled)
    cairn.stop()
    cairn.start()
    (session,) = cairn.db_rows(AgentSession, AgentSession.channel == room)
    assert cairn.pipeline is not None
    assert session.id is not None
    cause = EventLog(cairn.pipeline.rt.db).append(
        session.id, session.tenant_id, "message", text="(a turn cut by the stop)"
    )
    assert cause.id is not None
    with cairn.pipeline.rt.db.session() as s:
        say_in(s, session, cause.id, [Said("notice", "back after the restart")], agent="")
    wait_for_answer(
        "the notice written after the restart",
        alice,
        room,
        cairn.id,
        question,
        where=lambda e: e["content"]["body"] == "back after the restart",
    )
    (row,) = cairn.db_rows(OutboundMessage, OutboundMessage.cause_event_id == cause.id)
    assert row.status == OutboundStatus.SENT, row


def test_mentions_sent_while_the_database_is_down_are_answered_once_in_order_after_it_returns(
    cairn: Cairn,
    people: Callable[[str], Person],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with PrivatePostgres() as postgres:
        monkeypatch.setenv("CAIRN_DATABASE_URL", postgres.url())
        alice = people("alice")
        cairn.start()
        room = room_with_bot(alice, cairn)
        root = alice.send(room, "remember fact number 1", mention=cairn.id)
        wait_for_answer("the first notice", alice, room, cairn.id, root, where=_notice)

        postgres.stop()
        for n in (2, 3, 4):
            alice.send(room, f"remember fact number {n}", mention=cairn.id, thread=root)
        time.sleep(3)  # the sync holds the batch: its since token is not saved
        postgres.start()

        def remembered() -> list[str]:
            return [
                e["content"]["body"]
                for e in answers_to(alice, room, cairn.id, root)
                if _notice(e) and e["content"]["body"].startswith("remembered:")
            ]

        wanted = [f"remembered: fact number {n}" for n in (1, 2, 3, 4)]
        wait_for("the notices of 2-4", lambda: remembered() == wanted, timeout=90)
        time.sleep(3)  # time for any replay to show up
        assert remembered() == wanted  # each once, in order
        cairn.stop()  # while the private server still runs
    assert "could not take in Matrix event" not in caplog.text


def test_an_encrypted_room_gets_one_clear_message_that_encryption_is_off(
    cairn: Cairn, people: Callable[[str], Person], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_MATRIX_ENCRYPTION", "false")
    cairn.start()
    alice = people("alice")
    room = alice.create_room(invite=(cairn.id,), encrypted=True)
    wait_for("the bot to join", lambda: joined(alice, room, cairn.id))
    wait_for(
        "the encryption notice",
        lambda: [
            e
            for e in bot_messages(alice, room, cairn.id)
            if e["content"]["body"] == ENCRYPTION_OFF_NOTICE
        ],
    )
    cairn.stop()
    cairn.start()
    alice.send(room, "hello")  # wakes a sync with the room in it
    time.sleep(2)
    assert len(bot_messages(alice, room, cairn.id)) == 1


@pytest.mark.parametrize("provider", sorted(STAND_INS))
def test_a_long_markdown_answer_comes_in_parts_while_the_bot_shows_it_is_typing(
    cairn: Cairn, people: Callable[[str], Person], monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    steps = [f"**Step {i}**: " + "check the runbook and the dashboards. " * 12 for i in range(60)]
    long_answer = "\n\n".join(steps)
    assert len(long_answer.encode()) > 2 * 12_000

    server_class, answer = STAND_INS[provider]

    def slow_model(request: dict[str, Any]) -> Reply:
        return Reply(body=answer(long_answer), delay=4.0)

    with server_class(api_key="k", responder=slow_model) as model:
        for name, value in model_env(provider, model).items():
            monkeypatch.setenv(name, value)
        cairn.start()
        alice = people("alice")
        room = room_with_bot(alice, cairn)
        since = [alice.call("GET", "/sync?timeout=0")["next_batch"]]
        question = alice.send(room, "how do I roll back?", mention=cairn.id)

        wait_for(
            "the bot to be typing", lambda: cairn.id in (typing_users(alice, room, since) or ())
        )
        parts = wait_for(
            "the whole answer",
            lambda: (
                (found := answers_to(alice, room, cairn.id, question))
                and "Step 59" in found[-1]["content"]["body"]
                and found
            ),
        )
    assert len(parts) >= 3
    assert all(len(p["content"]["body"].encode()) <= 12_000 for p in parts)
    assert all(p["content"]["format"] == "org.matrix.custom.html" for p in parts)
    assert "<strong>Step 0</strong>" in parts[0]["content"]["formatted_body"]
    joined_text = " ".join(p["content"]["body"] for p in parts)
    assert joined_text.split() == long_answer.split()
    assert [p["content"]["m.relates_to"]["event_id"] for p in parts] == [question] * len(parts)


def typing_users(person: Person, room: str, since: list[str]) -> set[str] | None:
    """Who types in ``room`` per the next sync after ``since[0]`` (advanced); None: no news."""
    answer = person.call("GET", f"/sync?timeout=1000&since={quote(since[0])}")
    since[0] = answer["next_batch"]
    ephemeral = answer.get("rooms", {}).get("join", {}).get(room, {}).get("ephemeral", {})
    for event in ephemeral.get("events", []):
        if event["type"] == "m.typing":
            return set(event["content"]["user_ids"])
    return None


def test_a_bot_removed_from_a_room_leaves_it_cleanly(
    cairn: Cairn, people: Callable[[str], Person]
) -> None:
    cairn.start()
    alice = people("alice")
    room = room_with_bot(alice, cairn)
    kept = room_with_bot(alice, cairn)
    alice.kick(room, cairn.id)
    bot = Person(alice.synapse, cairn.account)  # the bot account's own view of its rooms

    def forgotten() -> bool:
        answer = bot.call("GET", "/sync?timeout=0&filter=" + quote(LEFT_ROOMS_FILTER))
        return room not in answer.get("rooms", {}).get("leave", {})

    wait_for("the bot to forget the room it was removed from", forgotten)
    assert cairn.frontend is not None
    assert cairn.frontend.healthy()
    question = alice.send(kept, "what do you know?", mention=cairn.id)
    wait_for_answer("an answer in the other room", alice, kept, cairn.id, question)


LEFT_ROOMS_FILTER = json.dumps({"room": {"include_leave": True, "timeline": {"limit": 1}}})


class Outage:
    """A TCP relay in front of the homeserver that can be cut (an outage) and restored."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self._listener: socket.socket | None = None
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Refuse new connections and break the open ones."""
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
            self._listener.close()
            self._listener = None
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            server = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self._open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def test_the_bot_reconnects_after_the_homeserver_was_away(
    synapse: Synapse,
    cairn: Cairn,
    people: Callable[[str], Person],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outage = Outage(int(synapse.base_url.rsplit(":", 1)[1]))
    outage.restore()
    try:
        monkeypatch.setenv("MATRIX_HOMESERVER", outage.url)
        cairn.start()
        alice = people("alice")
        room = room_with_bot(alice, cairn)
        frontend = cairn.frontend
        assert frontend is not None

        outage.cut()
        wait_for("the frontend to notice", lambda: not frontend.healthy())
        question = alice.send(room, "what do you know?", mention=cairn.id)
        time.sleep(2)
        outage.restore()
        wait_for("the frontend to be back", frontend.healthy)
        wait_for_answer("the answer", alice, room, cairn.id, question)
        time.sleep(1)
        assert len(answers_to(alice, room, cairn.id, question)) == 1
    finally:
        outage.cut()


def test_a_mention_buried_under_a_long_outage_is_still_answered(
    cairn: Cairn, people: Callable[[str], Person]
) -> None:
    # More happens while Cairn is down than one sync returns, so it pages back for the rest.
    cairn.start()
    alice = people("alice")
    room = room_with_bot(alice, cairn)
    cairn.stop()
    buried = alice.send(room, "what do you know?", mention=cairn.id)
    for i in range(SYNC_TIMELINE_LIMIT + 20):
        alice.send(room, f"chatter {i}")
    cairn.start()
    wait_for_answer("the buried mention's answer", alice, room, cairn.id, buried)
    time.sleep(1)
    assert len(answers_to(alice, room, cairn.id, buried)) == 1


def test_an_old_client_mentions_by_name_and_continues_by_replying_to_the_bot(
    cairn: Cairn, people: Callable[[str], Person]
) -> None:
    cairn.start()
    alice = people("alice")
    room = room_with_bot(alice, cairn)
    name = cairn.id.partition(":")[0].lstrip("@")  # the display name Synapse gave the bot
    mention = alice.send(room, f"{name}: remember {FACT}", mention=OLD_CLIENT)
    notice = wait_for_answer("the remembered notice", alice, room, cairn.id, mention, _notice)
    assert notice["content"]["body"] == f"remembered: {FACT}"  # the name was not remembered

    # A client without threads replies to the bot's message, quoting it.
    reply = alice.send(
        room,
        f"> <{cairn.id}> remembered: {FACT}\n\nwhat do you know about deploys?",
        mention=OLD_CLIENT,
        content={"m.relates_to": {"m.in_reply_to": {"event_id": notice["event_id"]}}},
    )
    wait_for_answer(
        "the answer to the reply, in the same thread",
        alice,
        room,
        cairn.id,
        mention,
        where=lambda e: e["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == reply,
    )
    (session,) = cairn.db_rows(AgentSession, AgentSession.channel == room)
    (asked,) = cairn.db_rows(SessionEvent, SessionEvent.event_ref == reply)
    assert asked.session_id == session.id
    assert asked.text == "what do you know about deploys?"


def test_a_message_over_the_limit_is_answered_with_the_reason(
    cairn: Cairn, people: Callable[[str], Person], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_MAX_MESSAGE_CHARS", "100")
    cairn.start()
    alice = people("alice")
    room = room_with_bot(alice, cairn)
    mention = alice.send(room, "please read this log: " + "x" * 300, mention=cairn.id)
    refusal = wait_for_answer("the refusal", alice, room, cairn.id, mention)
    assert "CAIRN_MAX_MESSAGE_CHARS" in refusal["content"]["body"]
    assert refusal["content"]["msgtype"] == "m.notice"
    assert cairn.db_rows(SessionEvent) == []


def test_the_bot_can_log_in_with_an_access_token_instead_of_a_password(
    cairn: Cairn, people: Callable[[str], Person], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MATRIX_PASSWORD")
    monkeypatch.setenv("MATRIX_ACCESS_TOKEN", cairn.account.access_token)
    cairn.start()
    alice = people("alice")
    room = room_with_bot(alice, cairn)
    question = alice.send(room, "what do you know?", mention=cairn.id)
    wait_for_answer("the answer", alice, room, cairn.id, question)
    state = json.loads(StateFile(settings_home() / "matrix", cairn.id).path.read_text())
    assert state["access_token"] == ""  # the token stays in the environment, not on disk
    assert state["device_id"]


def test_a_rejected_access_token_stops_the_frontend_with_what_to_fix(
    cairn: Cairn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MATRIX_PASSWORD")
    monkeypatch.setenv("MATRIX_ACCESS_TOKEN", "not-a-valid-token")
    settings = load_settings()
    pipeline = Pipeline.open(settings)
    try:
        frontend = MatrixFrontend(pipeline, settings)
        with pytest.raises(CairnError, match="MATRIX_ACCESS_TOKEN"):
            frontend.run(threading.Event())
    finally:
        pipeline.close()


def uploaded(person: Person, name: str, content: bytes, media: str) -> str:
    """The ``mxc://`` address of ``content`` uploaded by ``person`` as ``name``."""
    response = httpx.post(
        f"{person.synapse.base_url}/_matrix/media/v3/upload?filename={name}",
        content=content,
        headers={"Authorization": f"Bearer {person.user.access_token}", "Content-Type": media},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    return str(response.json()["content_uri"])


def wait_file_taken_in(cairn: Cairn, name: str) -> None:
    """Wait until the message with the file ``name`` is logged, its card made (the gate and
    the distillers take about 15 s on 5 MB)."""
    wait_for(
        f"{name} to be taken in",
        lambda: [e for e in cairn.db_rows(SessionEvent) if f"attached file {name}" in e.text],
        timeout=120,
    )


def test_a_5mb_log_sent_in_a_thread_is_read_without_its_password_and_a_line_of_it_answered(
    cairn: Cairn, people: Callable[[str], Person], tmp_path: Path
) -> None:
    from tests.integration.test_console_attachments import PASSWORD, big_log, stored_anywhere

    cairn.start()
    alice = people("alice")
    room = room_with_bot(alice, cairn)
    root = alice.send(room, "cairn: api-3 is failing, I'll send the log", mention=cairn.id)
    wait_for_answer("the first answer", alice, room, cairn.id, root)
    content = big_log(tmp_path / "api-3.log").read_bytes()
    info = {"mimetype": "text/plain", "size": len(content)}
    url = uploaded(alice, "api-3.log", content, "text/plain")
    alice.send(
        room, "api-3.log", thread=root, content={"msgtype": "m.file", "url": url, "info": info}
    )
    wait_file_taken_in(cairn, "api-3.log")
    alice.send(room, "what happened to req-041999?", thread=root)
    answer = wait_for_answer(
        "the answer from the log",
        alice,
        room,
        cairn.id,
        root,
        where=lambda e: "line 42000:" in e["content"]["body"],
    )
    assert "req-041999 GET /v1/orders/293993" in answer["content"]["body"]
    assert PASSWORD not in json.dumps(alice.timeline(room))
    assert stored_anywhere(settings_home(), PASSWORD) == []


def test_an_image_sent_in_a_thread_is_fetched_and_recorded_as_a_card_with_its_size(
    cairn: Cairn, people: Callable[[str], Person]
) -> None:
    from tests.unit.test_image_headers import png

    cairn.start()
    alice = people("alice")
    room = room_with_bot(alice, cairn)
    root = alice.send(room, "cairn: p99 is up since the deploy", mention=cairn.id)
    wait_for_answer("the first answer", alice, room, cairn.id, root)
    data = png(640, 480)
    info = {"mimetype": "image/png", "size": len(data), "w": 640, "h": 480}
    url = uploaded(alice, "p99.png", data, "image/png")
    alice.send(
        room, "p99.png", thread=root, content={"msgtype": "m.image", "url": url, "info": info}
    )
    [message] = wait_for(
        "p99.png to be taken in",
        lambda: [e for e in cairn.db_rows(SessionEvent) if "attached image p99.png" in e.text],
        timeout=60,
    )
    assert f"image, 640x480, {len(data)} bytes, not read" in message.text


@pytest.mark.parametrize("provider", sorted(STAND_INS))
def test_with_images_on_an_image_sent_in_a_thread_reaches_the_model_as_an_image(
    cairn: Cairn,
    people: Callable[[str], Person],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    provider: str,
) -> None:
    from tests.integration.test_image_attachments import picture

    data = picture(tmp_path / "p99.gif", (320, 200), kind="GIF")
    seen = "p99 doubled at 10:42."
    server_class, answer = STAND_INS[provider]
    with server_class(api_key="k", responder=lambda request: Reply(body=answer(seen))) as model:
        for name, value in model_env(provider, model).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("CAIRN_MODEL_IMAGES", "1")
        cairn.start()
        alice = people("alice")
        room = room_with_bot(alice, cairn)
        root = alice.send(room, "cairn: p99 is up since the deploy", mention=cairn.id)
        wait_for_answer("the first answer", alice, room, cairn.id, root)
        info = {"mimetype": "image/gif", "size": len(data), "w": 320, "h": 200}
        url = uploaded(alice, "p99.gif", data, "image/gif")
        alice.send(
            room, "p99.gif", thread=root, content={"msgtype": "m.image", "url": url, "info": info}
        )
        wait_for("the answer about the image", lambda: answers_to(alice, room, cairn.id, root)[1:])
    first, second = [r.body for r in model.requests if r.method == "POST"]
    assert Heard(provider, first).images == []
    assert len(Heard(provider, second).images) == 1
    turn = second["messages"][-1]
    encoded = base64.b64encode(data).decode()
    if provider == "openai":  # a Chat Completions image_url part with a data URL
        assert turn["content"][-1] == {
            "type": "image_url",
            "image_url": {"url": f"data:image/gif;base64,{encoded}"},
        }
    else:  # a Messages API image block
        assert turn["content"][-1]["source"] == {
            "type": "base64",
            "media_type": "image/gif",
            "data": encoded,
        }
    assert f"image, 320x200, {len(data)} bytes, shown to the model" in turn["content"][0]["text"]
