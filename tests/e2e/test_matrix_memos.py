"""Several agents behind one Matrix bot, against a real Synapse on 127.0.0.1: the issue's memo
scenario. In thread A the ops agent learns that deploys are frozen and memos the review agent;
in thread B, asked to merge and deploy, the review agent answers with the freeze.

The homeserver, people and bot come from the fixtures of :mod:`tests.e2e.test_matrix`.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cairn.db.models import AgentSession
from tests.e2e.test_matrix import (  # noqa: F401 - synapse is a fixture the others use
    Cairn,
    Person,
    answers_to,
    cairn,
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
