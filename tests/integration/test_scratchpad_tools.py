"""The scratchpad tools: an agent's working memory for one session, read and written by tools."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis

from cairn.llm.types import LLMResponse, TextBlock, ToolUseBlock
from cairn.memory import Scope, Source
from cairn.memory.working import (
    InProcessWorkingMemory,
    Pad,
    RedisWorkingMemory,
    Scratchpad,
    WorkingMemory,
)
from cairn.runtime import Runtime
from cairn.sessions.events import ChatEvent
from cairn.sessions.ingest import Admission, ingest
from cairn.sessions.log import EventLog
from cairn.workers.tools import SCRATCHPAD_TOOL_SPECS, Toolbox
from cairn.workers.turn import handle_pending
from tests.support.scripted_llm import ScriptedLLM as Scripted

SCRATCHPAD_TOOLS = {spec.name for spec in SCRATCHPAD_TOOL_SPECS}


def _use(tool: str, **arguments: object) -> LLMResponse:
    return LLMResponse((ToolUseBlock(f"id-{tool}", tool, dict(arguments)),), stop_reason="tool_use")


def _send(rt: Runtime, text: str, *, thread: str) -> None:
    event = ChatEvent(
        platform="console", tenant="acme", channel="C1", thread=thread, user="ann", text=text
    )
    result = ingest(EventLog(rt.db), event, agent="cairn", max_chars=1000)
    assert result.admission is Admission.QUEUED
    assert result.session_id is not None
    handle_pending(rt, result.session_id)


def _tool_result(model: Scripted, request: int) -> tuple[str, bool]:
    block = model.requests[request].messages[-1].content[0]
    assert block.type == "tool_result"
    return block.content, block.is_error


@pytest.fixture(params=["in-process", "redis"])
def working(request: pytest.FixtureRequest) -> Iterator[WorkingMemory]:
    if request.param == "in-process":
        yield InProcessWorkingMemory(ttl=60)
        return
    client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
    try:
        yield RedisWorkingMemory(client, ttl=60)
    finally:
        client.close()


def _toolbox(rt: Runtime, pad: Scratchpad | None, allowed: set[str] | None = None) -> Toolbox:
    return Toolbox(
        rt.memory, Scope("acme", "ops"), Source(author="ann"), scratchpad=pad, allowed=allowed
    )


@pytest.mark.redis
def test_values_written_are_read_back_and_listed(runtime: Runtime, working: WorkingMemory) -> None:
    tools = _toolbox(runtime, Scratchpad(working, Pad("acme", "ops", "s1")))
    assert {spec.name for spec in tools.specs} >= SCRATCHPAD_TOOLS
    written = tools.run("scratchpad_write", {"key": "plan", "value": "drain node-3, then patch"})
    assert json.loads(written.content) == {"status": "written", "key": "plan"}
    tools.run("scratchpad_write", {"key": "ticket", "value": "OPS-12" + "x" * 300})

    read = tools.run("scratchpad_read", {"key": "plan"})
    assert json.loads(read.content) == {"key": "plan", "value": "drain node-3, then patch"}
    listed = json.loads(tools.run("scratchpad_list", {}).content)["entries"]
    assert listed["plan"] == "drain node-3, then patch"
    assert listed["ticket"].startswith("OPS-12")
    assert len(listed["ticket"]) == 203


@pytest.mark.redis
def test_other_sessions_and_agents_see_nothing_of_a_pad(
    runtime: Runtime, working: WorkingMemory
) -> None:
    _toolbox(runtime, Scratchpad(working, Pad("acme", "ops", "s1"))).run(
        "scratchpad_write", {"key": "plan", "value": "secret plan"}
    )
    for pad in (Pad("acme", "ops", "s2"), Pad("acme", "review", "s1"), Pad("globex", "ops", "s1")):
        tools = _toolbox(runtime, Scratchpad(working, pad))
        missing = tools.run("scratchpad_read", {"key": "plan"})
        assert missing.is_error
        assert "nothing under 'plan'" in missing.content
        assert json.loads(tools.run("scratchpad_list", {}).content) == {"entries": {}}


def test_bad_input_comes_back_as_a_tool_error(runtime: Runtime) -> None:
    tools = _toolbox(runtime, Scratchpad(InProcessWorkingMemory(ttl=60), Pad("acme", "ops", "s")))
    tools.run("scratchpad_write", {"key": "known", "value": "1"})
    for name, arguments in (
        ("scratchpad_write", {"key": "", "value": "x"}),
        ("scratchpad_write", {"key": "k"}),
        ("scratchpad_write", {"key": "k", "value": "x" * 20_001}),
        ("scratchpad_read", {}),
    ):
        assert tools.run(name, arguments).is_error, (name, arguments)
    missing = tools.run("scratchpad_read", {"key": "unknown"})
    assert missing.is_error
    assert "keys: known" in missing.content


def test_the_tools_exist_only_with_a_scratchpad_and_when_the_agent_is_allowed_them(
    runtime: Runtime,
) -> None:
    pad = Scratchpad(InProcessWorkingMemory(ttl=60), Pad("acme", "ops", "s"))
    assert not SCRATCHPAD_TOOLS & {spec.name for spec in _toolbox(runtime, None).specs}

    narrow = _toolbox(runtime, pad, allowed={"recall", "scratchpad_read"})
    assert {spec.name for spec in narrow.specs} == {"recall", "scratchpad_read"}
    refused = narrow.run("scratchpad_write", {"key": "plan", "value": "x"})
    assert refused.is_error
    assert "unknown tool" in refused.content
    assert pad.entries() == {}


def test_a_note_written_in_one_turn_is_read_in_the_next_turn_of_the_same_thread(
    runtime: Runtime,
) -> None:
    model = Scripted(
        _use("scratchpad_write", key="step", value="node-3 drained"),
        LLMResponse((TextBlock("Draining done."),)),
        _use("scratchpad_read", key="step"),
        LLMResponse((TextBlock("We drained node-3."),)),
        _use("scratchpad_read", key="step"),
        LLMResponse((TextBlock("No idea."),)),
    )
    runtime._llm = model
    _send(runtime, "drain node-3 please", thread="t1")
    _send(runtime, "where are we?", thread="t1")
    assert _tool_result(model, 3) == (json.dumps({"key": "step", "value": "node-3 drained"}), False)

    _send(runtime, "where are we?", thread="t2")  # another thread is another session
    content, is_error = _tool_result(model, 5)
    assert is_error
    assert "nothing under 'step'" in content
