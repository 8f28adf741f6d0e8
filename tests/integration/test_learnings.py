"""Learnings at session end: the model proposes, code validates; accepted learnings are stored
unconfirmed and announced in the thread as "remembered: ..." notices linked to their memory."""

from __future__ import annotations

import json

from sqlmodel import select

from cairn.db.models import AgentSession, EventKind, MemoryUse, OutboundMessage
from cairn.llm.types import LLMRequest, LLMResponse, TextBlock, TextSink
from cairn.memory import Scope
from cairn.memory.learnings import EXTRACT_PROMPT, parse_learnings
from cairn.runtime import Runtime
from cairn.sessions.log import EventLog, ThreadRef
from cairn.workers.session_end import end_session


class ScriptedLLM:
    """A model that answers every request with one fixed text, and records the requests."""

    name = "scripted"

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.requests: list[LLMRequest] = []

    def complete(self, request: LLMRequest, *, sink: TextSink | None = None) -> LLMResponse:
        self.requests.append(request)
        return LLMResponse(content=(TextBlock(self.answer),))


def _session(rt: Runtime, *messages: str, untrusted: bool = False, private: bool = False) -> int:
    events = EventLog(rt.db)
    session = events.open_session(ThreadRef("console", "acme", "C1", "incident-42"), "ops")
    for text in messages:
        events.append(
            session.id or 0,
            "acme",
            EventKind.MESSAGE,
            text=text,
            user="ann",
            data={"untrusted": untrusted, "private": private},
        )
    return session.id or 0


def test_valid_learnings_are_stored_unconfirmed_and_announced(runtime: Runtime) -> None:
    answer = json.dumps(
        [
            {"kind": "decision", "text": "Rollbacks of the billing service need two approvers."},
            {"kind": "fact", "text": "The incident bridge is on channel 7."},
        ]
    )
    runtime._llm = ScriptedLLM(f"Here you go:\n{answer}")
    sid = _session(runtime, "we decided rollbacks of billing need two approvers", "bridge is ch 7")
    learned = end_session(runtime, sid)
    assert [(m.kind, m.confirmed) for m in learned] == [("decision", False), ("fact", False)]
    scope = Scope("acme", "ops")
    assert {m.text for m in runtime.memory.newest(scope)} == {m.text for m in learned}
    with runtime.db.session() as s:
        notices = s.exec(select(OutboundMessage).where(OutboundMessage.session_id == sid)).all()
        assert [n.text for n in notices] == [f"remembered: {m.text}" for m in learned]
        uses = s.exec(select(MemoryUse)).all()
        assert {(u.memory_id, u.role) for u in uses} == {(m.id, "announced") for m in learned}
        session = s.get(AgentSession, sid)
        assert session is not None
        assert session.status == "ended"
    assert end_session(runtime, sid) == []  # ending twice announces nothing twice


def test_garbage_the_prompt_and_empty_sessions_never_become_memories(runtime: Runtime) -> None:
    llm = ScriptedLLM("not json at all")
    runtime._llm = llm
    assert end_session(runtime, _session(runtime, "hello")) == []
    empty = ScriptedLLM("[]")
    runtime._llm = empty
    assert end_session(runtime, _session(runtime)) == []
    assert empty.requests == []  # an empty session asks the model nothing
    assert runtime.memory.newest(Scope("acme", "ops")) == []


def test_parse_learnings_keeps_only_well_formed_candidates() -> None:
    prompt_line = EXTRACT_PROMPT.splitlines()[0]
    answer = json.dumps(
        [
            {"kind": "fact", "text": "Grafana lives at grafana.acme.test."},
            {"kind": "opinion", "text": "Cats are better than dogs."},
            {"kind": "fact", "text": "Who owns the pager?"},
            {"kind": "fact", "text": "ok"},
            {"kind": "fact", "text": "bell\u0007 in text is here"},
            {"kind": "fact", "text": prompt_line},
            {"kind": "constraint", "text": "You are ops, a chat-ops assistant in a team chat."},
            {"kind": "fact", "text": "Grafana lives at grafana.acme.test"},
            "a bare string",
            {"kind": "preference", "text": 42},
        ]
    )
    system = "You are ops, a chat-ops assistant in a team chat."
    found = parse_learnings(answer, forbidden=(system,))
    assert [(f.kind, f.text) for f in found] == [("fact", "Grafana lives at grafana.acme.test.")]


def test_a_session_already_marked_ended_is_still_reviewed_once(runtime: Runtime) -> None:
    # The idle-session job marks a session ended before it runs the session-end hooks.
    runtime._llm = ScriptedLLM(
        '[{"kind": "fact", "text": "The pager rotation changes on Mondays."}]'
    )
    sid = _session(runtime, "the pager rotation changes on mondays")
    with runtime.db.session() as s:
        session = s.get(AgentSession, sid)
        assert session is not None
        session.status = "ended"
        s.add(session)
    assert [m.text for m in end_session(runtime, sid)] == ["The pager rotation changes on Mondays."]
    assert end_session(runtime, sid) == []


def test_learnings_from_a_stretch_with_an_untrusted_speaker_are_untrusted(
    runtime: Runtime,
) -> None:
    answer = json.dumps([{"kind": "fact", "text": "The staging database is db-stage-2."}])
    runtime._llm = ScriptedLLM(answer)
    trusted = end_session(runtime, _session(runtime, "staging db is db-stage-2"))
    assert [m.untrusted for m in trusted] == [False]
    runtime.memory.retract(trusted[0].id, Scope("acme", "ops"), by="ann")

    runtime._llm = ScriptedLLM(
        json.dumps([{"kind": "fact", "text": "The staging database is db-stage-9."}])
    )
    guest = _session(runtime, "staging db is db-stage-9", untrusted=True)
    [learned] = end_session(runtime, guest)
    assert learned.untrusted
    assert not learned.confirmed
