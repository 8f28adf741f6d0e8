"""The whole path with the real anthropic SDK: ``cairn chat`` talks to a local server that
speaks the Messages API, and the model's tool calls reach real memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_console_chat import _env, chat
from tests.support.messages_server import MessagesServer, text_message, tool_use_message

FACT = "the staging database is db-stg-2"


def ops_model(request: dict[str, Any]) -> dict[str, Any]:
    """A tiny model: remembers on "remember", recalls on questions, then reports the result."""
    last = request["messages"][-1]
    blocks = (
        last["content"]
        if isinstance(last["content"], list)
        else [{"type": "text", "text": last["content"]}]
    )
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if results:
        content = results[0]["content"]
        data = json.loads(content if isinstance(content, str) else content[0]["text"])
        if "memories" in data:
            return text_message("From memory: " + "; ".join(m["text"] for m in data["memories"]))
        return text_message(f"Stored as memory #{data['id']}.")
    text = " ".join(b["text"] for b in blocks if b.get("type") == "text")
    said = text.split(": ", 1)[-1]  # messages arrive as "author: text"
    if said.startswith("remember "):
        return tool_use_message("remember", {"text": said.removeprefix("remember ")})
    return tool_use_message("recall", {"query": said.rstrip("?")})


@pytest.mark.parametrize("stream", ["false", "true"])
def test_a_conversation_through_the_anthropic_sdk(tmp_path: Path, stream: str) -> None:
    with MessagesServer(api_key="sk-test-key", responder=ops_model) as server:
        env = _env(
            tmp_path / "home",
            ANTHROPIC_API_KEY="sk-test-key",
            ANTHROPIC_BASE_URL=server.base_url,
            CAIRN_LLM_STREAM=stream,
        )
        first = chat(env, f"remember {FACT}\n", "--thread", "a", "--user", "ann")
        second = chat(env, "which is the staging database?\n", "--thread", "b")
        bodies = server.bodies

    assert [o["text"] for o in first] == ["Stored as memory #1.", f"remembered: {FACT}"]
    assert [o["text"] for o in second] == [f"From memory: {FACT}"]
    assert all(body.get("stream", False) is (stream == "true") for body in bodies)
    # The stable prefix is cached; the per-turn context (recalled memories) comes after it.
    recall_turn = bodies[2]
    assert recall_turn["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in recall_turn["system"][-1]
    assert FACT in recall_turn["system"][-1]["text"]
    assert {t["name"] for t in recall_turn["tools"]} >= {"remember", "recall", "retract"}
    assert recall_turn["messages"][0]["content"][0]["text"].endswith(
        "which is the staging database?"
    )


def test_a_rejected_key_is_answered_in_the_thread_with_what_to_fix(tmp_path: Path) -> None:
    with MessagesServer(api_key="the-right-key") as server:
        env = _env(
            tmp_path / "home", ANTHROPIC_API_KEY="a-wrong-key", ANTHROPIC_BASE_URL=server.base_url
        )
        out = chat(env, "hello?\n")
    [reply] = out
    assert reply["failed"] is True
    assert "ANTHROPIC_API_KEY" in reply["text"]
    assert "a-wrong-key" not in reply["text"]
