"""The context engine inside real turns: pastes become artifacts, the agent's state tools and
memos reach later prompts, sessions resume from a checkpoint, on real SQLite and Qdrant."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cairn.bench.context import finish_turn
from cairn.bench.opsgen import generate_thread
from cairn.cli import main
from cairn.core.settings import ContextSettings, load_settings
from cairn.db import Database
from cairn.db.models import ContextCheckpoint, EventKind, EventStatus, SessionEvent
from cairn.llm.types import LLMRequest, LLMResponse, TextBlock, TextSink, ToolUseBlock
from cairn.memory.context import CompiledPrompt, ContextEngine
from cairn.memos import MemoBox
from cairn.runtime import Runtime, build_runtime, reset_runtime
from cairn.sessions.events import ChatEvent
from cairn.sessions.ingest import ingest
from cairn.sessions.log import EventLog, ThreadRef
from cairn.workers.tools import CONTEXT_TOOL_SPECS, TOOL_SPECS
from cairn.workers.turn import SYSTEM_FRAME, handle_pending

Step = Callable[[LLMRequest], LLMResponse]
SYSTEM = SYSTEM_FRAME.format(agent="cairn")
TOOLS = TOOL_SPECS + CONTEXT_TOOL_SPECS


class Recording:
    """A model that records every request and answers with the scripted steps, in order."""

    name = "recording"

    def __init__(self, *steps: Step) -> None:
        self.requests: list[LLMRequest] = []
        self.steps = list(steps)

    def complete(self, request: LLMRequest, *, sink: TextSink | None = None) -> LLMResponse:
        self.requests.append(request)
        step = self.steps.pop(0) if self.steps else (lambda _: _say("ok"))
        return step(request)


def _say(text: str) -> LLMResponse:
    return LLMResponse(content=(TextBlock(text),))


def _use(name: str, **arguments: object) -> Step:
    def step(_: LLMRequest) -> LLMResponse:
        return LLMResponse(
            content=(ToolUseBlock(id=f"call-{name}", name=name, input=dict(arguments)),),
            stop_reason="tool_use",
        )

    return step


def _send(rt: Runtime, text: str, *, thread: str = "t1", user: str = "ana") -> int:
    event = ChatEvent(platform="console", tenant="acme", channel="C1", thread=thread, user=user,
                      text=text)  # fmt: skip
    result = ingest(EventLog(rt.db), event, agent="cairn", max_chars=rt.settings.max_message_chars)
    assert result.session_id is not None
    handle_pending(rt, result.session_id)
    return result.session_id


def _log_lines(n: int) -> str:
    return "\n".join(
        f"2026-11-29T10:{i // 60 % 60:02d}:{i % 60:02d}Z "
        + ("ERROR payment gateway timeout" if i % 50 == 0 else f"INFO GET /v1/items/{i} 200 12ms")
        for i in range(n)
    )


@pytest.fixture
def big_runtime(monkeypatch: pytest.MonkeyPatch) -> Runtime:
    """A runtime that admits messages of up to 300 000 characters (pastes)."""
    monkeypatch.setenv("CAIRN_MAX_MESSAGE_CHARS", "300000")
    rt = build_runtime(load_settings())
    reset_runtime(rt)
    return rt


def test_a_200_kb_paste_becomes_a_card_and_the_agent_can_retrieve_the_original(
    big_runtime: Runtime,
) -> None:
    log = _log_lines(4000)
    assert len(log) > 200_000
    artifact_ids: list[str] = []

    def retrieve(request: LLMRequest) -> LLMResponse:
        found = re.search(r'retrieve_artifact\("(\w+)"\)', request.messages[-1].text)
        assert found is not None
        artifact_ids.append(found.group(1))
        return _use("retrieve_artifact", id=found.group(1), offset=0, limit=20000)(request)

    model = Recording(retrieve, lambda _: _say("read it"))
    big_runtime._llm = model
    session_id = _send(big_runtime, "the gateway log from this morning:\n" + log)

    first = model.requests[0]
    assert first.messages[-1].text.startswith("ana: the gateway log from this morning:\n[artifact")
    assert "log: 4000 lines" in first.messages[-1].text
    assert len(first.messages[-1].text) < 5000
    tool_result = model.requests[1].messages[-1].content[0]
    page = json.loads(getattr(tool_result, "content", "{}"))
    assert page["total_chars"] == len(log)
    assert page["text"] == log[:20000]
    assert page["next_offset"] == 20000

    engine = ContextEngine(big_runtime.db, ContextSettings())
    content, kind = engine.artifacts.get("acme", artifact_ids[0], session_id=session_id)
    assert (content, kind) == (log, "log")
    with pytest.raises(Exception, match="no artifact"):
        engine.artifacts.get("other-tenant", artifact_ids[0])
    [row] = engine.telemetry(session_id)
    assert (row.artifacts_created, row.artifacts_retrieved) == (1, 1)


def test_state_added_by_the_agent_is_in_every_later_prompt(runtime: Runtime) -> None:
    model = Recording(
        _use("add_constraint", text="never restart db-primary-1 during business hours"),
        lambda _: _say("Recorded."),
        _use("add_decision", text="roll back payments-api to v2.14.3", rationale="canary 4x"),
        lambda _: _say("Recorded."),
    )
    runtime._llm = model
    _send(runtime, "careful: db-primary-1 must not be restarted in business hours")
    _send(runtime, "we roll back payments-api to v2.14.3, the canary shows 4x errors")
    for i in range(12):
        _send(runtime, f"chatter {i}")
    last = model.requests[-1]
    assert "[C1] never restart db-primary-1 during business hours" in last.context
    assert "[D1] roll back payments-api to v2.14.3 (because canary 4x)" in last.context
    assert {t.name for t in last.tools} >= {
        "add_constraint", "add_decision", "add_task", "add_note", "update_item",
        "retrieve_artifact",
    }  # fmt: skip

    result = CliRunner().invoke(main, ["session", "show", "t1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert [i["id"] for i in report["checkpoint"]["items"]] == ["C1", "D1"]
    assert report["telemetry"]["turns"] == 14
    assert report["telemetry"]["tokens_per_band"]["checkpoint"]["last"] > 0
    text = CliRunner().invoke(main, ["session", "show", "t1"])
    assert "[C1] constraint, open, soft: never restart db-primary-1" in text.output


def test_a_task_marked_done_leaves_the_plan(runtime: Runtime) -> None:
    model = Recording(
        _use("add_task", text="rotate the TLS certificate on lb-2"),
        lambda _: _say("Planned."),
        _use("update_item", id="T1", status="done"),
        lambda _: _say("Done."),
        _use("update_item", id="T9", status="done"),
        lambda _: _say("No such task."),
    )
    runtime._llm = model
    _send(runtime, "we need to rotate the cert on lb-2")
    _send(runtime, "rotated it")
    assert "[T1] rotate the TLS certificate on lb-2" in model.requests[2].context
    _send(runtime, "and T9?")
    assert "Plan (open tasks)" not in model.requests[4].context
    missing = model.requests[5].messages[-1].content[0]
    assert getattr(missing, "is_error", False) is True
    assert "no item 'T9'" in getattr(missing, "content", "")


def test_unread_memos_are_shown_once_and_then_marked_read(runtime: Runtime) -> None:
    box = MemoBox(runtime.db)
    box.send("acme", "ops", "cairn", "db failover drill at 15:00 today", priority=5)
    model = Recording()
    runtime._llm = model
    _send(runtime, "hello")
    _send(runtime, "hello again")
    assert 'from ops (priority 5): "db failover drill at 15:00 today"' in model.requests[0].context
    assert "failover drill" not in model.requests[1].context
    [memo] = box.inbox("acme", "cairn")
    assert memo.read
    assert not memo.acknowledged


def test_classic_mode_sends_the_plain_transcript(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CAIRN_CONTEXT_MODE", "classic")
    rt = build_runtime(load_settings())
    reset_runtime(rt)
    model = Recording()
    rt._llm = model
    _send(rt, "constraint: never deploy on Fridays")
    _send(rt, "what now?")
    last = model.requests[-1]
    assert "Session checkpoint" not in last.context
    assert [m.text for m in last.messages] == [
        "ana: constraint: never deploy on Fridays", "ok", "ana: what now?",
    ]  # fmt: skip


def _drive(db: Database, turns: int) -> tuple[list[str], dict[int, dict[str, Any]]]:
    """A generated thread through the engine, turn by turn: each prompt, each checkpoint."""
    log = EventLog(db)
    session = log.open_session(ThreadRef("console", "acme", "C1", "ops"), "cairn")
    assert session.id is not None
    engine = ContextEngine(db, ContextSettings(budget=20000))
    prompts: list[str] = []
    checkpoints: dict[int, dict[str, Any]] = {}
    for turn in generate_thread(turns, seed=11)[0]:
        event = log.append(session.id, "acme", EventKind.MESSAGE, text=turn.text, user=turn.user,
                           status=EventStatus.PENDING, data={"addressed": True})  # fmt: skip
        context = engine.begin(session, event)
        prompts.append(_prompt(context.compile(system=SYSTEM, tools=TOOLS)))
        checkpoints[turn.number] = engine.checkpoint(session.id).to_json()
        finish_turn(log, context, turn)
    return prompts, checkpoints


def _prompt(compiled: CompiledPrompt) -> str:
    return compiled.context + "\n".join(m.text for m in compiled.messages)


def _copy_log(source: Database, target: Database, through_seq: int) -> SessionEvent:
    """What a worker on another machine finds: the same log (and nothing it compiled)."""
    log = EventLog(target)
    session = log.open_session(ThreadRef("console", "acme", "C1", "ops"), "cairn")
    assert session.id is not None
    copied = None
    for event in EventLog(source).events(1):
        if event.seq > through_seq:
            break
        copied = log.append(session.id, "acme", event.kind, text=event.text, user=event.user,
                            status=event.status, data=event.data)  # fmt: skip
        assert (copied.id, copied.seq) == (event.id, event.seq)
    assert copied is not None
    return copied


@pytest.mark.slow
def test_resuming_from_a_checkpoint_gives_the_prompt_of_the_uninterrupted_session(
    tmp_path: Path,
) -> None:
    def database(name: str) -> Database:
        db = Database(f"sqlite:///{tmp_path / name}")
        db.migrate()
        return db

    uninterrupted = database("a.db")
    prompts, checkpoints = _drive(uninterrupted, 90)
    assert "Session checkpoint" in prompts[-1]
    last_message = max(
        e.seq for e in EventLog(uninterrupted).events(1) if e.kind == EventKind.MESSAGE
    )
    # A worker that finds only the log rebuilds the same state from the first event...
    for stale in (None, 40):
        db = database(f"resumed-{stale}.db")
        current = _copy_log(uninterrupted, db, last_message)
        if stale is not None:  # ...and one that finds an older checkpoint folds what follows it
            with db.session() as s:
                s.add(ContextCheckpoint(session_id=1, through_seq=checkpoints[stale]["through_seq"],
                                        turn=stale, state=checkpoints[stale]))  # fmt: skip
        session = EventLog(db).session(1)
        compiled = ContextEngine(db, ContextSettings(budget=20000)).begin(session, current)
        assert _prompt(compiled.compile(system=SYSTEM, tools=TOOLS)) == prompts[-1]
        db.dispose()
    uninterrupted.dispose()


def test_the_benchmark_prints_both_modes_in_the_documented_shape() -> None:
    result = CliRunner().invoke(main, ["bench", "context", "--turns", "60", "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    assert set(figures) == {"engine", "classic"}
    for mode in figures.values():
        assert set(mode) == {
            "budget", "max_prompt_tokens", "budget_exceeded", "tokens_at",
            "constraints_retained", "lookback_present", "compile_ms", "cost",
        }  # fmt: skip
        assert set(mode["tokens_at"]) == {"50", "100", "300"}
        assert set(mode["compile_ms"]) == {"p50", "p95"}
    assert figures["engine"]["budget_exceeded"] is False
    assert figures["engine"]["constraints_retained"] == 1.0
    assert figures["engine"]["tokens_at"]["50"] < figures["classic"]["tokens_at"]["50"]
