"""Long tool output reaches the model as a distilled artifact card, retrievable in full."""

from __future__ import annotations

import json

from cairn.memory import Scope, Source
from cairn.memory.context import ContextEngine
from cairn.runtime import Runtime
from cairn.sessions.events import ChatEvent
from cairn.sessions.ingest import ingest
from cairn.sessions.log import EventLog
from cairn.workers.tools import Toolbox


def test_a_long_recall_result_becomes_a_card_and_the_artifact_holds_it_all(
    runtime: Runtime,
) -> None:
    scope = Scope("acme", "cairn")
    for n in range(20):
        runtime.memory.remember(
            f"runbook step {n}: restart the payments worker pool {n} and watch the error "
            f"budget dashboard for ten minutes before moving on to the next region",
            scope,
        )
    log = EventLog(runtime.db)
    result = ingest(
        log,
        ChatEvent(
            platform="console",
            tenant="acme",
            channel="C",
            thread="t",
            user="ann",
            text="what is the runbook?",
        ),
        agent="cairn",
        max_chars=1000,
    )
    assert result.event_row is not None
    session = log.session(result.session_id or 0)
    event = log.event(result.event_row)
    assert event is not None
    turn = ContextEngine(runtime.db, runtime.settings.context).begin(session, event)
    toolbox = Toolbox(runtime.memory, scope, Source(author="ann"), turn)

    outcome = toolbox.run("recall", {"query": "runbook restart payments worker pool", "k": 20})
    assert outcome.content.startswith("[artifact ")
    assert "retrieve_artifact(" in outcome.content
    ref = outcome.content.split('retrieve_artifact("', 1)[1].split('"', 1)[0]

    page = toolbox.run("retrieve_artifact", {"id": ref, "limit": 100_000})
    full = json.loads(page.content)
    assert "runbook step 19" in json.dumps(full)
    assert len(outcome.content) < len(json.dumps(full))


def test_short_tool_output_is_passed_verbatim(runtime: Runtime) -> None:
    scope = Scope("acme", "cairn")
    toolbox = Toolbox(runtime.memory, scope, Source(author="ann"))
    outcome = toolbox.run("remember", {"text": "the VPN is vpn.acme.test"})
    assert json.loads(outcome.content)["status"] == "stored"
