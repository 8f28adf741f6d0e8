"""Where a memory was said reaches the model by name (issue 30): the conversation's name the
frontend gave with the message is kept on the memory and shown wherever the memory is recalled,
which for a private conversation is only that conversation. Through ingest, the worker's turn
and session end, on the embedded default's real storage."""

from __future__ import annotations

import json

from cairn.db.models import EventKind
from cairn.llm.types import LLMRequest, LLMResponse, TextBlock
from cairn.runtime import Runtime
from cairn.sessions.log import EventLog, ThreadRef
from cairn.workers.session_end import end_session
from tests.integration.test_learnings import ScriptedLLM as LearningLLM
from tests.integration.test_memory_poisoning import _memory, _say
from tests.support.scripted_llm import ScriptedLLM


def _asked(
    rt: Runtime, question: str, channel: str, conversation: str = "", private: bool = False
) -> LLMRequest:
    """What the model is sent when bob asks ``question`` in ``channel``."""
    model = ScriptedLLM(LLMResponse((TextBlock("ok"),)))
    rt._llm = model
    _say(rt, question, user="bob", channel=channel, conversation=conversation, private=private)
    (request,) = model.requests
    return request


def _memory_lines(request: LLMRequest) -> list[str]:
    return [x for x in request.context.splitlines() if x.startswith("- memory #")]


def test_a_memory_said_in_a_named_channel_is_recalled_elsewhere_with_that_name(
    runtime: Runtime,
) -> None:
    fact = "the staging cluster is stg-eu-2"
    _say(runtime, f"remember {fact}", user="ann", channel="C-ops", conversation="#ops")
    assert _memory(runtime, fact).source_conversation == "#ops"
    request = _asked(runtime, "which is the staging cluster?", "C-gen", "#general")
    (line,) = _memory_lines(request)
    assert line.startswith(f'- memory #{_memory(runtime, fact).id} [fact] from ann in "#ops" on ')
    assert line.endswith(json.dumps(fact))


def test_a_private_rooms_name_is_shown_only_where_its_memory_is_recalled(
    runtime: Runtime,
) -> None:
    fact = "the payroll export runs at 02:00"
    room, name = "!payroll", "Payroll leads"
    _say(runtime, f"remember {fact}", user="ann", channel=room, conversation=name, private=True)
    assert _memory(runtime, fact).private_to == room
    asked = _asked(runtime, "when does the payroll export run?", room, name, private=True)
    (line,) = _memory_lines(asked)
    assert ' from ann in "Payroll leads" on ' in line
    elsewhere = _asked(runtime, "when does the payroll export run?", "C-gen", "#general")
    assert _memory_lines(elsewhere) == []
    assert name not in repr(elsewhere)


def test_a_memory_from_a_conversation_without_a_name_says_no_place(runtime: Runtime) -> None:
    fact = "the build cache lives on cache-3"
    _say(runtime, f"remember {fact}", user="ann")
    assert _memory(runtime, fact).source_conversation == ""
    (line,) = _memory_lines(_asked(runtime, "where does the build cache live?", "C1"))
    assert line.startswith(f"- memory #{_memory(runtime, fact).id} [fact] from ann on ")


def test_a_learning_keeps_the_name_of_the_conversation_it_was_drawn_from(
    runtime: Runtime,
) -> None:
    events = EventLog(runtime.db)
    session = events.open_session(ThreadRef("console", "acme", "C-inc", "incident-7"), "cairn")
    for text, data in (
        ("the bridge is on channel 7", {"private": False, "conversation": "#incidents"}),
        ("ok", {"private": False}),  # a message its frontend named nothing for
    ):
        events.append(session.id or 0, "acme", EventKind.MESSAGE, text=text, user="ann", data=data)
    runtime._llm = LearningLLM(json.dumps([{"kind": "fact", "text": "The bridge is on ch 7."}]))
    (learned,) = end_session(runtime, session.id or 0)
    assert _memory(runtime, learned.text).source_conversation == "#incidents"
