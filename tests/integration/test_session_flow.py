"""A session end to end inside one process: ingest, dedupe, the worker's turn, the outbox,
reactions and their undo, on real SQLite and real Qdrant local mode."""

from __future__ import annotations

import threading

import pytest
from sqlmodel import col, select

from cairn.core.errors import InvalidInput, LLMError
from cairn.core.settings import load_settings
from cairn.db.models import DeadLetter, EventStatus, OutboundMessage, SessionEvent
from cairn.llm.types import LLMRequest, LLMResponse, TextBlock, TextSink, ToolUseBlock
from cairn.memory import Scope
from cairn.runtime import Runtime
from cairn.sessions.events import ChatEvent, EventType
from cairn.sessions.ingest import Admission, ingest
from cairn.sessions.log import EventLog
from cairn.workers.turn import handle_pending
from tests.support.scripted_llm import ScriptedLLM as _Scripted


def _msg(
    text: str, *, thread: str = "t1", user: str = "ann", event_id: str = "", message_id: str = ""
) -> ChatEvent:
    return ChatEvent(
        platform="console",
        tenant="acme",
        channel="C1",
        thread=thread,
        user=user,
        text=text,
        event_id=event_id,
        message_id=message_id,
        private=False,  # a public channel: these tests read the workspace's memory
    )


def _send(rt: Runtime, event: ChatEvent) -> int:
    result = ingest(EventLog(rt.db), event, agent="cairn", max_chars=1000)
    assert result.admission is Admission.QUEUED
    assert result.session_id is not None
    handle_pending(rt, result.session_id)
    return result.session_id


def _outbound(rt: Runtime, session_id: int) -> list[OutboundMessage]:
    with rt.db.session() as s:
        return list(
            s.exec(
                select(OutboundMessage)
                .where(OutboundMessage.session_id == session_id)
                .order_by(col(OutboundMessage.id))
            ).all()
        )


def _deliver(rt: Runtime, message: OutboundMessage) -> str:
    """Mark a message posted, as a frontend does, and return its platform id."""
    with rt.db.session() as s:
        row = s.get(OutboundMessage, message.id)
        assert row is not None
        row.status, row.message_ref = "sent", f"msg-{row.id}"
        s.add(row)
    return f"msg-{message.id}"


def _react(
    rt: Runtime,
    target: str,
    emoji: str,
    *,
    user: str = "ann",
    removed: bool = False,
    event_id: str | None = None,
) -> Admission:
    event = ChatEvent(
        platform="console",
        tenant="acme",
        channel="C1",
        thread="t1",
        user=user,
        type=EventType.REACTION_REMOVED if removed else EventType.REACTION_ADDED,
        reaction=emoji,
        target_id=target,
        event_id=event_id or f"r-{emoji}-{user}-{removed}-{threading.get_ident()}-{id(target)}",
        private=False,
    )
    result = ingest(EventLog(rt.db), event, agent="cairn", max_chars=1000)
    if result.session_id is not None and result.admission is Admission.QUEUED:
        handle_pending(rt, result.session_id)
    return result.admission


def test_every_step_of_a_turn_is_in_the_event_log_in_order(runtime: Runtime) -> None:
    session_id = _send(runtime, _msg("remember the build cache lives on s3://cache"))
    kinds = [(e.kind, e.status) for e in EventLog(runtime.db).events(session_id)]
    assert kinds == [
        ("message", "done"),
        ("tool_call", "done"),
        ("tool_result", "done"),
        ("reply", "done"),
        ("notice", "done"),
    ]
    said = [(m.kind, m.text) for m in _outbound(runtime, session_id)]
    assert said[1] == ("notice", "remembered: the build cache lives on s3://cache")


def test_a_redelivered_event_is_taken_once(runtime: Runtime) -> None:
    log = EventLog(runtime.db)
    first = ingest(log, _msg("hello", event_id="Ev1"), agent="cairn", max_chars=100)
    again = ingest(log, _msg("hello", event_id="Ev1"), agent="cairn", max_chars=100)
    assert (first.admission, again.admission) == (Admission.QUEUED, Admission.DUPLICATE)


def test_one_message_delivered_under_two_event_ids_is_taken_once(runtime: Runtime) -> None:
    log = EventLog(runtime.db)
    mention = ingest(
        log, _msg("hi", event_id="Ev1", message_id="1700.01"), agent="c", max_chars=100
    )
    message = ingest(
        log, _msg("hi", event_id="Ev2", message_id="1700.01"), agent="c", max_chars=100
    )
    assert (mention.admission, message.admission) == (Admission.QUEUED, Admission.DUPLICATE)


def test_bad_input_is_refused_and_nothing_is_written(runtime: Runtime) -> None:
    log = EventLog(runtime.db)
    with pytest.raises(InvalidInput):
        ingest(log, _msg("x" * 1001), agent="cairn", max_chars=1000)
    with runtime.db.session() as s:
        assert s.exec(select(SessionEvent)).all() == []


def test_messages_of_one_thread_are_handled_in_arrival_order(runtime: Runtime) -> None:
    log = EventLog(runtime.db)
    texts = [f"remember fact number {i} is {i * 7}" for i in range(6)]
    session_id = None
    for text in texts:
        session_id = ingest(log, _msg(text), agent="cairn", max_chars=1000).session_id
    assert session_id is not None
    workers = [
        threading.Thread(target=handle_pending, args=(runtime, session_id)) for _ in range(3)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    notices = [m.text for m in _outbound(runtime, session_id) if m.kind == "notice"]
    assert notices == [f"remembered: {t.removeprefix('remember ')}" for t in texts]


def test_running_a_session_twice_posts_nothing_twice(runtime: Runtime) -> None:
    session_id = _send(runtime, _msg("remember the wiki is at wiki.acme.test"))
    before = len(_outbound(runtime, session_id))
    assert handle_pending(runtime, session_id) == 0
    assert len(_outbound(runtime, session_id)) == before


class _DiesAfterRemembering:
    """Asks to remember a fact; the first attempt dies once the memory is stored (as a worker
    killed mid-turn does), the next answers."""

    name = "dies-after-remembering"

    def __init__(self) -> None:
        self.died = False

    def complete(self, request: LLMRequest, *, sink: TextSink | None = None) -> LLMResponse:
        if request.messages[-1].role != "user" or not any(
            getattr(b, "type", "") == "tool_result" for b in request.messages[-1].content
        ):
            return LLMResponse(
                (ToolUseBlock("u1", "remember", {"text": "the wiki moved to wiki.acme.test"}),),
                stop_reason="tool_use",
            )
        if not self.died:
            self.died = True
            raise RuntimeError("killed mid-turn")
        return LLMResponse((TextBlock("Noted."),))


def test_a_turn_redone_after_dying_announces_what_its_first_attempt_stored(
    runtime: Runtime,
) -> None:
    runtime._llm = _DiesAfterRemembering()
    result = ingest(EventLog(runtime.db), _msg("note the wiki move"), agent="cairn", max_chars=1000)
    assert result.session_id is not None
    with pytest.raises(RuntimeError, match="killed mid-turn"):
        handle_pending(runtime, result.session_id)
    assert _outbound(runtime, result.session_id) == []  # nothing was said: the turn died
    handle_pending(runtime, result.session_id)  # the task's retry
    kinds = [(m.kind, m.text) for m in _outbound(runtime, result.session_id)]
    assert kinds == [
        ("reply", "Noted."),
        ("notice", "remembered: the wiki moved to wiki.acme.test"),
    ]


class _Failing:
    name = "failing"

    def complete(self, request: LLMRequest, *, sink: TextSink | None = None) -> LLMResponse:
        raise LLMError("the model is overloaded (529) after 4 retries")


def test_a_failing_model_gets_an_apology_not_silence(runtime: Runtime) -> None:
    runtime._llm = _Failing()
    session_id = _send(runtime, _msg("what's up?"))
    [apology] = _outbound(runtime, session_id)
    assert apology.kind == "error"
    assert "Sorry" in apology.text
    assert "529" in apology.text
    [message] = [e for e in EventLog(runtime.db).events(session_id) if e.kind == "message"]
    assert message.status == EventStatus.FAILED


def test_tool_calls_are_logged_before_the_next_model_call(runtime: Runtime) -> None:
    seen: list[list[str]] = []
    model = _Scripted(
        LLMResponse(
            (ToolUseBlock("u1", "remember", {"text": "prod runs k8s 1.31"}),),
            stop_reason="tool_use",
        ),
        LLMResponse((TextBlock("Noted."),)),
    )
    original = model.complete

    def spy(request: LLMRequest, *, sink: TextSink | None = None) -> LLMResponse:
        session = EventLog(runtime.db).events(1)
        seen.append([e.kind for e in session])
        return original(request, sink=sink)

    model.complete = spy  # type: ignore[method-assign]
    runtime._llm = model
    _send(runtime, _msg("prod is on k8s 1.31, keep that in mind"))
    assert seen[1][-2:] == ["tool_call", "tool_result"]
    # The second call carries the tool result back to the model.
    last = model.requests[1].messages[-1]
    assert last.role == "user"
    assert last.content[0].type == "tool_result"


def test_the_model_cannot_write_outside_the_thread_tenant(runtime: Runtime) -> None:
    model = _Scripted(
        LLMResponse(
            (
                ToolUseBlock(
                    "u1",
                    "remember",
                    {"text": "planted", "tenant": "globex", "visibility": "public"},
                ),
            ),
            stop_reason="tool_use",
        ),
        LLMResponse((TextBlock("ok"),)),
    )
    runtime._llm = model
    _send(runtime, _msg("please store this"))
    [memory] = runtime.memory.newest(Scope("acme", "cairn"))
    assert (memory.tenant, memory.visibility) == ("acme", "private")
    assert runtime.memory.newest(Scope("globex", "cairn")) == []


def test_a_model_that_never_stops_calling_tools_is_cut_off(runtime: Runtime) -> None:
    loop = LLMResponse((ToolUseBlock("u", "recall", {"query": "x"}),), stop_reason="tool_use")
    runtime._llm = _Scripted(*[loop] * 20)
    runtime.settings = load_settings(CAIRN_MAX_TOOL_ROUNDS=3)
    session_id = _send(runtime, _msg("loop forever"))
    [reply] = _outbound(runtime, session_id)
    assert "stopped after 3 rounds" in reply.text


def _remembered(rt: Runtime) -> tuple[int, str]:
    session_id = _send(rt, _msg("remember the pager rotation flips on Tuesdays"))
    notice = next(m for m in _outbound(rt, session_id) if m.kind == "notice")
    return session_id, _deliver(rt, notice)


def test_confirming_a_notice_raises_validity_and_removing_it_undoes_that(
    runtime: Runtime,
) -> None:
    _, target = _remembered(runtime)
    [memory] = runtime.memory.newest(Scope("acme", "cairn"))
    # Another member's word (its author's own never counts).
    assert _react(runtime, target, "white_check_mark", user="bob") is Admission.QUEUED
    confirmed = runtime.memory.get(memory.id, Scope("acme", "cairn"))
    assert confirmed is not None
    assert (confirmed.validity, confirmed.confirmed) == (1.0, True)
    _react(runtime, target, "white_check_mark", user="bob", removed=True)
    undone = runtime.memory.get(memory.id, Scope("acme", "cairn"))
    assert undone is not None
    assert (undone.validity, undone.confirmed) == (0.0, False)


def test_the_same_person_reacting_twice_counts_once(runtime: Runtime) -> None:
    _, target = _remembered(runtime)
    _react(runtime, target, "+1", event_id="a")
    _react(runtime, target, "+1", event_id="b")
    [memory] = runtime.memory.newest(Scope("acme", "cairn"))
    assert memory.usefulness == 1.0


def test_the_author_retracts_with_a_reaction_and_removing_it_restores(runtime: Runtime) -> None:
    session_id, target = _remembered(runtime)
    _react(runtime, target, "x")
    assert runtime.memory.recall("pager rotation", Scope("acme", "cairn")) == []
    assert _outbound(runtime, session_id)[-1].text.startswith("retracted: ")
    _react(runtime, target, "x", removed=True)
    assert runtime.memory.recall("pager rotation", Scope("acme", "cairn"))


def test_someone_elses_retract_is_a_dispute_not_a_deletion(runtime: Runtime) -> None:
    _, target = _remembered(runtime)
    _react(runtime, target, "wastebasket", user="mallory")
    [memory] = runtime.memory.newest(Scope("acme", "cairn"))
    assert not memory.retracted
    assert (memory.disputes, memory.validity) == (1, -1.0)


def test_unknown_emoji_and_reactions_on_other_messages_are_ignored(runtime: Runtime) -> None:
    _, target = _remembered(runtime)
    assert _react(runtime, "not-a-bot-message", "+1") is Admission.IGNORED
    _react(runtime, target, "eyes")
    [memory] = runtime.memory.newest(Scope("acme", "cairn"))
    assert (memory.validity, memory.usefulness, memory.disputes) == (0.0, 0.0, 0)


def test_a_recall_reply_records_which_memories_it_used(runtime: Runtime) -> None:
    _remembered(runtime)
    session_id = _send(runtime, _msg("when does the pager rotation flip?", thread="t2"))
    reply = next(m for m in _outbound(runtime, session_id) if m.kind == "reply")
    target = _deliver(runtime, reply)
    _react(runtime, target, "+1")
    [memory] = runtime.memory.newest(Scope("acme", "cairn"))
    assert memory.usefulness == 1.0


class _Broken:
    name = "broken"

    def complete(self, request: LLMRequest, *, sink: TextSink | None = None) -> LLMResponse:
        raise RuntimeError("bug in a tool adapter")


def test_an_event_that_keeps_failing_becomes_a_dead_letter_with_an_apology(
    runtime: Runtime,
) -> None:
    runtime._llm = _Broken()
    result = ingest(EventLog(runtime.db), _msg("hello?"), agent="cairn", max_chars=1000)
    assert result.session_id is not None
    for _ in range(2):  # the first attempts fail loudly, so the task retries
        with pytest.raises(RuntimeError):
            handle_pending(runtime, result.session_id)
        assert _outbound(runtime, result.session_id) == []
    handle_pending(runtime, result.session_id)
    [apology] = _outbound(runtime, result.session_id)
    assert apology.kind == "error"
    assert "recorded for the operators" in apology.text
    with runtime.db.session() as s:
        [letter] = s.exec(select(DeadLetter)).all()
    assert letter.event_id == result.event_row
    assert "RuntimeError: bug in a tool adapter" in letter.reason
    assert letter.attempts == 3


def test_a_locked_database_is_waited_out_and_nothing_is_lost(runtime: Runtime) -> None:
    if runtime.db.engine.dialect.name != "sqlite":
        pytest.skip("an exclusive file lock is SQLite's")
    import sqlite3
    import time

    path = runtime.db.engine.url.database
    assert path
    # Another process's long write transaction, as a backup or a migration holds it.
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN EXCLUSIVE")
    releaser = threading.Timer(1.5, lambda: blocker.execute("COMMIT"))
    releaser.start()
    started = time.monotonic()
    try:
        session_id = _send(runtime, _msg("remember the VPN is vpn.example.com"))
    finally:
        releaser.join()
        blocker.close()
    assert time.monotonic() - started >= 1.0  # the write really met the lock, and waited
    said = [(m.kind, m.text) for m in _outbound(runtime, session_id)]
    assert said[1] == ("notice", "remembered: the VPN is vpn.example.com")
    assert [m.text for m in runtime.memory.newest(Scope("acme", "cairn"))] == [
        "the VPN is vpn.example.com"
    ]


class _DiesAfterRecalling:
    """Calls the recall tool; the first attempt dies after its result (a worker killed
    mid-turn), the next answers."""

    name = "dies-after-recalling"

    def __init__(self) -> None:
        self.died = False

    def complete(self, request: LLMRequest, *, sink: TextSink | None = None) -> LLMResponse:
        last = request.messages[-1]
        if last.role != "user" or isinstance(last.content, str):
            return LLMResponse(
                (ToolUseBlock("u1", "recall", {"query": "pager rotation"}),),
                stop_reason="tool_use",
            )
        if not self.died:
            self.died = True
            raise RuntimeError("killed mid-turn")
        return LLMResponse((TextBlock("On Tuesdays."),))


def test_a_turn_counts_its_recalls_with_its_reply_once_even_when_redone(
    runtime: Runtime,
) -> None:
    _remembered(runtime)
    scope = Scope("acme", "cairn")
    [stored] = runtime.memory.newest(scope)
    offline = runtime._llm
    runtime._llm = _DiesAfterRecalling()
    question = _msg("when does the pager rotation flip?", thread="t2")
    result = ingest(EventLog(runtime.db), question, agent="cairn", max_chars=1000)
    assert result.session_id is not None
    with pytest.raises(RuntimeError, match="killed mid-turn"):
        handle_pending(runtime, result.session_id)
    [died] = runtime.memory.newest(scope)
    assert (died.recall_count, died.last_recalled_at) == (stored.recall_count, None)
    handle_pending(runtime, result.session_id)  # the task's retry
    handle_pending(runtime, result.session_id)  # and a second run of a finished session
    [redone] = runtime.memory.newest(scope)
    # The retry's own recall; its model answered from the logged tool result, and what the
    # attempt that died recalled was never counted.
    assert redone.recall_count == stored.recall_count + 1
    assert redone.last_recalled_at is not None
    runtime._llm = offline  # asks the recall tool, then answers
    _send(runtime, _msg("when does the pager rotation flip?", thread="t3"))
    [asked] = runtime.memory.newest(scope)
    # Once by the turn's own recall (the best recall_k of its pool), once by the recall tool.
    assert asked.recall_count == redone.recall_count + 2
