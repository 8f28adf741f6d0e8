"""Tool calls held for approval, decided in Matrix rooms by reactions, against a real Synapse.

The bot runs as in :mod:`tests.e2e.test_matrix` (the offline model, the embedded default) with
the test MCP server (:mod:`tests.support.mcp_server`, over stdio) declared as ``ops``, whose
``restart_*`` tools and ``crash`` need approval; that server writes every call it runs to a
file, which is how these tests know whether, and how often, a restart really ran. People ask with
``run ops__restart_service {...}``, and answer the request the bot posts with the reactions
real clients send through the homeserver.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from cairn.bot.matrix import MatrixFrontend
from cairn.core.settings import load_settings
from cairn.db.models import ApprovalStatus, OutboundMessage, ToolApproval
from tests.e2e import test_faults as faults
from tests.e2e.test_faults import Workers
from tests.e2e.test_matrix import (  # noqa: F401 - synapse is a fixture the others use
    Cairn,
    Person,
    answers_to,
    bot_messages,
    cairn,
    cairn_run,
    joined,
    people,
    room_with_bot,
    synapse,
    wait_for,
    wait_for_answer,
)
from tests.support.matrix_e2e import E2EPerson
from tests.support.mcp_server import read_calls, stdio_declaration
from tests.support.private_redis import PrivateRedis
from tests.support.synapse import Synapse

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

# Real ``cairn worker`` processes on a Redis of the test's own (the fault tests' fixtures).
private_redis = faults.private_redis
workers_for = faults.workers_for

RESTART = 'run ops__restart_service {"service": "payments"}'
RESTARTED = {"tool": "restart_service", "arguments": {"service": "payments", "reason": ""}}


def declare_ops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str = "", *, top: str = ""
) -> Path:
    """Declare the test MCP server as ``ops`` in a cairn.toml (``extra``: more of its keys,
    ``top``: what comes before it); returns the file where it records the calls it runs."""
    calls = tmp_path / "calls.jsonl"
    config = tmp_path / "cairn.toml"
    config.write_text(
        f"""{top}{stdio_declaration(calls)}
approval = "read"
approvals = {{ "restart_*" = "needs approval", "crash" = "needs approval" }}
timeout = 20
{extra}
"""
    )
    monkeypatch.setenv("CAIRN_CONFIG", str(config))
    return calls


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return declare_ops(tmp_path, monkeypatch)


def body(event: dict[str, Any]) -> str:
    return str(event["content"].get("body", ""))


def ask_for_restart(
    person: Person, room: str, bot: Cairn, text: str = RESTART
) -> tuple[str, dict[str, Any]]:
    """Ask the bot to restart payments (or what ``text`` asks); the message's event id and the
    bot's request."""
    asked = person.send(room, text, mention=bot.id)
    request = wait_for_answer(
        "the request for approval",
        person,
        room,
        bot.id,
        asked,
        where=lambda e: body(e).startswith("Approval needed"),
    )
    return asked, request


def the_approval(bot: Cairn) -> ToolApproval:
    (row,) = bot.db_rows(ToolApproval)
    return row


def said_in_thread(person: Person, room: str, bot: Cairn, root: str, text: str) -> list[str]:
    """The bodies of the bot's messages in the thread that contain ``text``."""
    return [body(e) for e in answers_to(person, room, bot.id, root) if text in body(e)]


def wait_said(person: Person, room: str, bot: Cairn, root: str, text: str) -> str:
    return wait_for(
        f"the bot to say {text!r} in the thread",
        lambda: said_in_thread(person, room, bot, root, text),
    )[0]


def request_shown(person: Person, room: str, request: dict[str, Any]) -> str:
    """The request's body as clients show it now (with its latest edit)."""
    (shown,) = [
        e
        for e in bot_messages(person, room, request["sender"])
        if e["event_id"] == request["event_id"]
    ]
    return body(shown)


def wait_request_ends(person: Person, room: str, request: dict[str, Any], end: str) -> str:
    return wait_for(
        f"the request to be edited to end with {end!r}",
        lambda: (shown := request_shown(person, room, request)).endswith(end) and shown,
    )


def reactions_on(person: Person, room: str, event_id: str, sender: str) -> list[str]:
    return [
        e["content"]["m.relates_to"]["key"]
        for e in person.timeline(room)
        if e["type"] == "m.reaction"
        and e["sender"] == sender
        and e["content"].get("m.relates_to", {}).get("event_id") == event_id
    ]


def answers_for(person: Person, room: str, bot: Cairn, user_id: str) -> list[dict[str, Any]]:
    """The bot's notices addressed to ``user_id`` (mentioning them)."""
    return [
        e
        for e in bot_messages(person, room, bot.id)
        if e["content"].get("msgtype") == "m.notice"
        and e["content"].get("m.mentions", {}).get("user_ids") == [user_id]
        and body(e).startswith(f"{user_id}: ")
    ]


# --------------------------------------------------------------------------------------------


def test_a_room_admin_approves_with_a_reaction_and_the_call_runs_once(
    cairn: Cairn,  # noqa: F811 - the fixtures imported above
    people: Callable[[str], Person],  # noqa: F811
    calls: Path,
) -> None:
    cairn.start()
    alice = people("alice")  # created the room: an admin of it
    room = room_with_bot(alice, cairn)
    asked, request = ask_for_restart(alice, room, cairn)

    # One message in the thread, with how to answer it and the call as code.
    row = the_approval(cairn)
    content = request["content"]
    assert content["msgtype"] == "m.text"
    assert body(request).startswith(f"Approval needed (request #{row.id}): ")
    assert body(request).endswith("React ✅ to approve or ❌ to deny.")
    assert "<code>ops__restart_service</code>" in content["formatted_body"]
    assert (
        '<pre><code class="language-json">{\n  &quot;service&quot;: &quot;payments&quot;\n}'
        in (content["formatted_body"])
    )
    assert content["m.mentions"] == {"user_ids": [alice.id]}
    (outbox,) = cairn.db_rows(OutboundMessage, OutboundMessage.kind == "approval")
    assert outbox.message_ref == request["event_id"]  # what reactions find it by
    # The bot puts both answers on it, to click; they are not taken as its decision.
    wait_for(
        "the bot's own reactions on the request",
        lambda: sorted(reactions_on(alice, room, request["event_id"], cairn.id)) == ["✅", "❌"],
    )
    time.sleep(1)
    assert the_approval(cairn).status == ApprovalStatus.PENDING
    assert read_calls(calls) == []

    alice.react(room, request["event_id"], "✅")
    notice = wait_said(alice, room, cairn, asked, f"approved request #{row.id}: ran")
    assert notice.startswith(f"{alice.id} approved request #{row.id}: ran ops__restart_service in ")
    assert notice.endswith(" (ok).")
    reply = wait_said(alice, room, cairn, asked, "payments restarted")
    assert f"approved request #{row.id}" in reply
    assert read_calls(calls) == [{**RESTARTED, "pid": read_calls(calls)[0]["pid"]}]
    # The request no longer asks for an answer: it says who gave it.
    shown = wait_request_ends(alice, room, request, f"\n\nApproved by {alice.id}.")
    assert shown.startswith(f"Approval needed (request #{row.id}): ")
    assert "React ✅" not in shown
    decided = the_approval(cairn)
    assert (decided.status, decided.decided_by) == (ApprovalStatus.RAN, alice.id)
    time.sleep(1.5)  # room for a second run or a stray answer to show up
    assert len(read_calls(calls)) == 1
    assert answers_for(alice, room, cairn, alice.id) == []
    assert answers_for(alice, room, cairn, cairn.id) == []


def test_a_denial_by_reaction_never_runs_the_call_and_the_model_is_told(
    cairn: Cairn,  # noqa: F811
    people: Callable[[str], Person],  # noqa: F811
    calls: Path,
) -> None:
    cairn.start()
    alice = people("alice")
    room = room_with_bot(alice, cairn)
    asked, request = ask_for_restart(alice, room, cairn)
    row = the_approval(cairn)

    alice.react(room, request["event_id"], "❌")
    notice = wait_said(alice, room, cairn, asked, f"denied request #{row.id}:")
    assert notice == f"{alice.id} denied request #{row.id}: ops__restart_service did not run."
    # The model's reply comes from the decision it was shown.
    wait_said(alice, room, cairn, asked, f"denied request #{row.id}, so ops__restart_service")
    assert the_approval(cairn).status == ApprovalStatus.DENIED
    wait_request_ends(alice, room, request, f"\n\nDenied by {alice.id}.")
    time.sleep(1.5)
    assert read_calls(calls) == []


def test_a_server_that_crashes_during_an_approved_call_is_reported_in_the_thread(
    cairn: Cairn,  # noqa: F811
    people: Callable[[str], Person],  # noqa: F811
    calls: Path,
) -> None:
    cairn.start()
    alice = people("alice")
    room = room_with_bot(alice, cairn)
    asked, request = ask_for_restart(alice, room, cairn, "run ops__crash")
    row = the_approval(cairn)
    alice.react(room, request["event_id"], "✅")
    notice = wait_said(alice, room, cairn, asked, f"approved request #{row.id}: ran ops__crash")
    assert notice.endswith(" (crashed).")
    wait_said(alice, room, cairn, asked, "ops__crash failed (crashed)")  # the model's reply
    assert [c["tool"] for c in read_calls(calls)] == ["crash"]
    ran = the_approval(cairn)
    assert (ran.status, ran.outcome) == (ApprovalStatus.RAN, "crashed")
    wait_request_ends(alice, room, request, f"\n\nApproved by {alice.id}.")


def test_a_worker_killed_while_a_call_waits_leaves_the_reaction_to_complete_it_once(
    cairn: Cairn,  # noqa: F811
    people: Callable[[str], Person],  # noqa: F811
    calls: Path,
    private_redis: PrivateRedis,
    workers_for: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As an operator runs it: `cairn run` and `cairn worker` processes on Redis.
    for name, value in {
        "CAIRN_BROKER_URL": private_redis.url,
        "CAIRN_STALE_AFTER": "2",
        "CAIRN_BEAT_INTERVAL": "1",
        "CAIRN_LOCK_TTL": "3",
    }.items():
        monkeypatch.setenv(name, value)
    workers: Workers = workers_for(dict(os.environ))
    asking = workers.start()
    alice = people("alice")
    with cairn_run(tmp_path / "run.log"):
        room = room_with_bot(alice, cairn)
        asked, request = ask_for_restart(alice, room, cairn)
        workers.kill(asking)  # nothing waits for the decision: no worker is needed now
        workers.start("--beat")
        alice.react(room, request["event_id"], "✅")
        notice = wait_said(alice, room, cairn, asked, "approved request #1: ran")
        assert notice.endswith(" (ok).")
        wait_said(alice, room, cairn, asked, "payments restarted")
        wait_request_ends(alice, room, request, f"\n\nApproved by {alice.id}.")
        time.sleep(2)  # long enough for a second run or a second answer to show up
    assert [c["tool"] for c in read_calls(calls)] == ["restart_service"]
    assert len(said_in_thread(alice, room, cairn, asked, "approved request #1: ran")) == 1
    assert len(said_in_thread(alice, room, cairn, asked, "payments restarted")) == 1


def test_someone_not_allowed_is_told_so_in_the_thread_and_an_admin_can_still_approve(
    cairn: Cairn,  # noqa: F811
    people: Callable[[str], Person],  # noqa: F811
    calls: Path,
) -> None:
    cairn.start()
    alice, bob = people("alice"), people("bob")
    # Room version 12: its creator is left out of the power levels, and is its admin still.
    room = alice.call(
        "POST",
        "/createRoom",
        {"preset": "private_chat", "invite": [cairn.id, bob.id], "room_version": "12"},
    )["room_id"]
    create = alice.call("GET", f"/rooms/{quote(room)}/state/m.room.create/")
    assert create["room_version"] == "12"
    bob.call("POST", f"/join/{quote(room)}", {})
    wait_for("the bot to join", lambda: joined(alice, room, cairn.id))
    asked, request = ask_for_restart(alice, room, cairn)
    row = the_approval(cairn)

    bob.react(room, request["event_id"], "✅")  # power level 0: not an admin
    (answer,) = wait_for(
        "the answer to bob", lambda: answers_for(alice, room, cairn, bob.id), timeout=30
    )
    assert body(answer) == (
        f"{bob.id}: You can't approve request #{row.id} (ops__restart_service): only "
        "workspace or room admins may. Nothing changed."
    )
    assert (
        f'<a href="https://matrix.to/#/{bob.id}">{bob.id}</a>: '
        in (answer["content"]["formatted_body"])
    )
    relation = answer["content"]["m.relates_to"]
    assert (relation["rel_type"], relation["event_id"]) == ("m.thread", asked)
    assert relation["m.in_reply_to"]["event_id"] == request["event_id"]
    assert the_approval(cairn).status == ApprovalStatus.PENDING
    assert read_calls(calls) == []

    alice.react(room, request["event_id"], "✅")  # the creator of a v12 room
    wait_said(alice, room, cairn, asked, f"{alice.id} approved request #{row.id}: ran")
    assert [c["tool"] for c in read_calls(calls)] == ["restart_service"]
    assert len(answers_for(alice, room, cairn, bob.id)) == 1


def test_a_second_reaction_by_the_same_person_does_not_decide_again(
    cairn: Cairn,  # noqa: F811
    people: Callable[[str], Person],  # noqa: F811
    calls: Path,
) -> None:
    cairn.start()
    alice = people("alice")
    room = room_with_bot(alice, cairn)
    asked, request = ask_for_restart(alice, room, cairn)
    row = the_approval(cairn)

    first = alice.react(room, request["event_id"], "✅")
    alice.react(room, request["event_id"], "❌")  # changed her mind: too late
    alice.redact(room, first)  # and took the first back: a decision stays taken
    (answer,) = wait_for("the answer to alice", lambda: answers_for(alice, room, cairn, alice.id))
    assert body(answer).startswith(
        f"{alice.id}: Request #{row.id} (ops__restart_service) was already approved by {alice.id}"
    )
    wait_said(alice, room, cairn, asked, "payments restarted")
    time.sleep(1.5)
    assert len(read_calls(calls)) == 1
    assert said_in_thread(alice, room, cairn, asked, "denied") == []
    assert len(said_in_thread(alice, room, cairn, asked, f"approved request #{row.id}: ran")) == 1
    assert the_approval(cairn).status == ApprovalStatus.RAN


def test_an_unanswered_request_expires_and_a_late_reaction_is_told_so(
    cairn: Cairn,  # noqa: F811
    people: Callable[[str], Person],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = declare_ops(tmp_path, monkeypatch, "approval_ttl = 1")
    monkeypatch.setenv("CAIRN_BEAT_INTERVAL", "1")
    cairn.start()
    alice = people("alice")
    room = room_with_bot(alice, cairn)
    asked, request = ask_for_restart(alice, room, cairn)
    row = the_approval(cairn)

    told = wait_said(alice, room, cairn, asked, "expired unanswered: it did not run")
    assert told == f"request #{row.id} (ops__restart_service) expired unanswered: it did not run."
    wait_said(alice, room, cairn, asked, f"Request #{row.id} expired unanswered, so")
    wait_request_ends(alice, room, request, "\n\nExpired unanswered: it did not run.")

    alice.react(room, request["event_id"], "✅")
    (answer,) = wait_for("the answer to alice", lambda: answers_for(alice, room, cairn, alice.id))
    assert body(answer) == (
        f"{alice.id}: Request #{row.id} (ops__restart_service) expired unanswered; it did not run."
    )
    assert the_approval(cairn).status == ApprovalStatus.EXPIRED
    assert read_calls(calls) == []


def test_in_an_encrypted_room_the_request_and_the_reaction_are_encrypted_and_it_runs_once(
    cairn: Cairn,  # noqa: F811
    synapse: Synapse,  # noqa: F811
    calls: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAIRN_MATRIX_ENCRYPTION", "true")
    cairn.start()
    with E2EPerson(
        synapse, synapse.register(f"alice-{secrets.token_hex(3)}"), tmp_path / "alice-store"
    ) as alice:
        room = alice.create_room(invite=(cairn.id,), encrypted=True)
        alice.wait_joined(room, cairn.id)
        asked = alice.send(room, RESTART, mention=cairn.id)
        request = alice.wait_for(
            lambda e: (
                e.sender == cairn.id
                and str((e.source.get("content") or {}).get("body", "")).startswith(
                    "Approval needed"
                )
            ),
            room=room,
            what="the request for approval",
        )
        assert getattr(request, "decrypted", False), "the request was posted in clear"
        assert "React ✅ to approve" in request.source["content"]["body"]
        relation = request.source["content"]["m.relates_to"]
        assert (relation["rel_type"], relation["event_id"]) == ("m.thread", asked)

        alice.react(room, str(request.event_id), "✅")
        ran = alice.wait_for_text(room, contains=": ran ops__restart_service", sender=cairn.id)
        assert ran[2].startswith(f"{alice.id} approved request #")
        alice.wait_for_text(room, contains="payments restarted", sender=cairn.id)
    assert [c["tool"] for c in read_calls(calls)] == ["restart_service"]


def test_a_request_posted_by_an_agents_own_matrix_user_is_decided_by_it_alone(
    cairn: Cairn,  # noqa: F811
    people: Callable[[str], Person],  # noqa: F811
    synapse: Synapse,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # review has a Matrix user of its own, served by a second frontend beside the shared one:
    # both see every reaction on review's request, the bot's own included.
    calls = declare_ops(
        tmp_path,
        monkeypatch,
        top='cairn_agent = "ops"\n[agents.ops]\n[agents.review]\nown_identity = true\n',
    )
    cairn.start()
    assert cairn.pipeline is not None
    review_account = synapse.register(f"review-{secrets.token_hex(3)}")
    monkeypatch.setenv("MATRIX_USER_ID", review_account.user_id)
    monkeypatch.setenv("MATRIX_PASSWORD", review_account.password)
    monkeypatch.setenv("CAIRN_AGENT", "review")
    review = MatrixFrontend(cairn.pipeline, load_settings())
    stop = threading.Event()
    thread = threading.Thread(target=review.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for("review's first sync", review.healthy)
        alice = people("alice")
        room = alice.create_room(invite=(cairn.id, review_account.user_id))
        wait_for("both bots to join", lambda: joined(alice, room, cairn.id))
        wait_for("review to join", lambda: joined(alice, room, review_account.user_id))
        asked = alice.send(room, RESTART, mention=review_account.user_id)
        request = wait_for_answer(
            "review's request",
            alice,
            room,
            review_account.user_id,
            asked,
            where=lambda e: body(e).startswith("Approval needed"),
        )
        wait_for(
            "review's own reactions on its request",
            lambda: (
                len(reactions_on(alice, room, request["event_id"], review_account.user_id)) == 2
            ),
        )
        alice.react(room, request["event_id"], "✅")
        ran = wait_for(
            "review's notice that it ran",
            lambda: [
                body(e)
                for e in answers_to(alice, room, review_account.user_id, asked)
                if ": ran ops__restart_service" in body(e)
            ],
        )
        assert ran[0].startswith(f"{alice.id} approved request #")
        time.sleep(1.5)  # room for a second decision or a stray answer to show up
        assert len(read_calls(calls)) == 1
        # Nobody was answered: not review's bot for its own reaction, not alice twice.
        for bot in (cairn.id, review_account.user_id):
            assert [
                body(e)
                for e in bot_messages(alice, room, bot)
                if e["content"].get("msgtype") == "m.notice"
                and "request #" in body(e)
                and "approved request" not in body(e)
            ] == []
        assert answers_to(alice, room, cairn.id, asked) == []
        assert the_approval(cairn).decided_by == alice.id
    finally:
        stop.set()
        thread.join(60)
