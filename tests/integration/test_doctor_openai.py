"""``cairn doctor`` on an OpenAI-compatible endpoint: the real openai SDK against ChatServer."""

from __future__ import annotations

from typing import Any

from cairn.commands.doctor import Check, run_checks
from cairn.core.settings import load_settings
from tests.support.chat_server import ChatServer, completion, tool_call


def _able(request: dict[str, Any]) -> dict[str, Any]:
    """A model that calls a tool when it is offered one."""
    if request.get("tools") and request["messages"][-1]["role"] == "user":
        return completion(calls=[tool_call("ping", {"echo": "ok"})])
    return completion("ok then")


def _chatty(request: dict[str, Any]) -> dict[str, Any]:
    """A model that never calls tools."""
    return completion("I would call ping, but here is some text.")


def _llm_check(server: ChatServer, **extra: Any) -> Check:
    settings = load_settings(CAIRN_LLM="openai", OPENAI_BASE_URL=server.base_url, **extra)
    [check] = [c for c in run_checks(settings) if c.name == "llm"]
    return check


def test_a_working_endpoint_is_ok_with_each_step_named() -> None:
    with ChatServer(api_key=None, responder=_able) as server:
        check = _llm_check(server, CAIRN_MODEL="gpt-test")
        streamed = [b for b in server.chat_bodies if b.get("stream")]

    assert check.status == "ok", check
    assert "model 'gpt-test' is served" in check.detail
    assert "it calls tools" in check.detail
    assert "it streams" in check.detail
    assert len(streamed) == 1


def test_an_unknown_model_fails_listing_those_the_server_has() -> None:
    with ChatServer(api_key=None, responder=_able) as server:
        server.models = {"llama3.2:1b", "qwen2.5:0.5b"}
        check = _llm_check(server, CAIRN_MODEL="gpt-nope")

    assert check.status == "fail"
    assert "llama3.2:1b, qwen2.5:0.5b" in check.detail
    assert "CAIRN_MODEL" in check.fix


def test_a_model_that_does_not_call_tools_is_recorded_with_how_to_override_it() -> None:
    with ChatServer(api_key=None, responder=_chatty) as server:
        check = _llm_check(server, CAIRN_MODEL="gpt-test")

    assert check.status == "warn"
    assert "answered in text instead" in check.detail
    assert "recorded: tools off for" in check.detail
    assert "to override it, set CAIRN_MODEL_TOOLS=true" in check.detail


def test_an_unreachable_endpoint_fails_naming_the_setting() -> None:
    with ChatServer(api_key=None) as server:
        url = server.base_url
    settings = load_settings(CAIRN_LLM="openai", OPENAI_BASE_URL=url)
    [check] = [c for c in run_checks(settings) if c.name == "llm"]

    assert check.status == "fail"
    assert "OPENAI_BASE_URL" in check.fix
