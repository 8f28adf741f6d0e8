"""Several agents on Matrix, against a real Synapse on 127.0.0.1. Behind one bot user, the
issue's memo scenario: in thread A the ops agent learns that deploys are frozen and memos the
review agent; in thread B, asked to merge and deploy, the review agent answers with the freeze.
And an agent with a Matrix user of its own, beside the shared one.

The homeserver, people and bot come from the fixtures of :mod:`tests.e2e.test_matrix`.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable

import pytest

from cairn.bot.matrix import MatrixFrontend
from cairn.core.settings import load_settings
from cairn.db.models import AgentSession
from tests.e2e.test_matrix import (  # noqa: F401 - synapse is a fixture the others use
    Cairn,
    Person,
    Synapse,
    answers_to,
    cairn,
    joined,
    people,
    room_with_bot,
    settings_home,
    synapse,
    wait_for,
)
from tests.support.agents import FREEZE, declare_agents

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_ops_memos_review_in_one_thread_and_review_answers_with_it_in_another(
    cairn: Cairn,  # noqa: F811 - the fixture imported above
    people: Callable[[str], Person],  # noqa: F811
) -> None:
    declare_agents(settings_home())
    cairn.start()
    alice = people("alice")
    room = room_with_bot(alice, cairn)

    told = alice.send(room, f"ops: tell review that {FREEZE}", mention=cairn.id)
    wait_for(
        "ops to confirm the memo",
        lambda: [
            e
            for e in answers_to(alice, room, cairn.id, told)
            if e["content"]["body"].startswith("Memo sent to review.")
        ],
    )
    asked = alice.send(room, "review: can we merge and deploy PR 42?", mention=cairn.id)
    wait_for(
        "review to answer with the freeze",
        lambda: [
            e for e in answers_to(alice, room, cairn.id, asked) if FREEZE in e["content"]["body"]
        ],
    )
    sessions = cairn.db_rows(AgentSession, AgentSession.channel == room)
    assert sorted((s.thread_ref, s.agent) for s in sessions) == sorted(
        [(told, "ops"), (asked, "review")]
    )


def test_an_agent_with_its_own_matrix_user_answers_what_mentions_it(
    cairn: Cairn,  # noqa: F811
    people: Callable[[str], Person],  # noqa: F811
    synapse: Synapse,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    declare_agents(settings_home(), "own_identity = true\n")
    cairn.start()  # the shared identity: ops, and every agent without a user of its own
    assert cairn.pipeline is not None
    # review's own user, served by a second frontend on the same database, workers and
    # CAIRN_HOME (each account keeps its own sync state there), as a second deployment would be.
    review_account = synapse.register(f"review-{secrets.token_hex(3)}")
    monkeypatch.setenv("MATRIX_USER_ID", review_account.user_id)
    monkeypatch.setenv("MATRIX_PASSWORD", review_account.password)
    monkeypatch.setenv("CAIRN_AGENT", "review")
    settings = load_settings()
    assert settings.identity_agent == "review"
    review = MatrixFrontend(cairn.pipeline, settings)
    stop = threading.Event()
    thread = threading.Thread(target=review.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for("review's first sync", review.healthy)
        alice = people("alice")
        room = alice.create_room(invite=(cairn.id, review_account.user_id))
        wait_for("both bots to join", lambda: joined(alice, room, cairn.id))
        wait_for("review to join", lambda: joined(alice, room, review_account.user_id))

        assert review.state_file.path != cairn.frontend.state_file.path  # type: ignore[union-attr]
        asked = alice.send(room, "can we merge PR 42?", mention=review_account.user_id)
        wait_for("review's answer", lambda: answers_to(alice, room, review_account.user_id, asked))
        told = alice.send(room, f"remember {FREEZE}", mention=cairn.id)
        wait_for("ops' answer", lambda: answers_to(alice, room, cairn.id, told))
        time.sleep(1.5)  # room for a wrong second answer to arrive
        assert answers_to(alice, room, cairn.id, asked) == []
        assert answers_to(alice, room, review_account.user_id, told) == []
        assert len(answers_to(alice, room, review_account.user_id, asked)) == 1
        sessions = cairn.db_rows(AgentSession, AgentSession.channel == room)
        assert sorted((s.thread_ref, s.agent) for s in sessions) == sorted(
            [(asked, "review"), (told, "ops")]
        )
    finally:
        stop.set()
        thread.join(60)
