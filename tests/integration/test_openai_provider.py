"""The OpenAI-compatible adapter against a loopback HTTP server that speaks Chat Completions.

Nothing is mocked: the official ``openai`` SDK sends real requests to ChatServer, which records
them so the tests can check what went over the wire.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Iterator

import pytest

from cairn.core.errors import ConfigError, LLMAuthError, LLMError
from cairn.core.settings import load_settings
from cairn.llm.openai import NO_TOOLS_NOTE, AzureTarget, OpenAILLM, read_arguments
from cairn.llm.types import (
    LLM,
    ImageBlock,
    LLMRequest,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from cairn.runtime import build_llm
from tests.integration.test_anthropic_provider import (
    ANSWER,
    CONTEXT,
    RECALL,
    REMEMBER,
    SYSTEM,
    Shown,
    ask,
)
from tests.support.chat_server import ChatServer, Reply, chat_error, completion, tool_call

KEY = "sk-test-0123456789abcdef"
MODEL = "gpt-test"


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer(api_key=KEY) as srv:
        yield srv


def adapter(
    server: ChatServer,
    *,
    key: str = KEY,
    stream: bool = False,
    max_retries: int = 2,
    timeout: float = 10.0,
    tools: bool = True,
) -> OpenAILLM:
    return OpenAILLM(
        key,
        MODEL,
        base_url=server.base_url,
        max_retries=max_retries,
        timeout=timeout,
        stream=stream,
        tools=tools,
    )


# Translation both ways


def test_text_answer_round_trips(server: ChatServer) -> None:
    server.push_text("Hello from the model.")

    response = adapter(server).complete(ask("hi there", context=CONTEXT, max_tokens=321))

    assert response.content == (TextBlock("Hello from the model."),)
    assert response.stop_reason == "end_turn"
    assert response.model == MODEL
    (sent,) = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    # The stable prefix first, the per-turn context after it: one system message.
    assert sent.body == {
        "model": MODEL,
        "max_tokens": 321,
        "messages": [
            {"role": "system", "content": f"{SYSTEM}\n\n{CONTEXT}"},
            {"role": "user", "content": "hi there"},
        ],
    }


def test_parallel_tool_calls_become_tool_use_blocks(server: ChatServer) -> None:
    first, second = server.push_calls(
        tool_call("remember", {"text": "deploys on Tuesday"}),
        tool_call("recall", {"query": "deploy window"}),
        text="Noting it.",
    )

    response = adapter(server).complete(ask("remember", tools=(RECALL, REMEMBER)))

    assert response.stop_reason == "tool_use"
    assert response.text == "Noting it."
    assert response.tool_uses == (
        ToolUseBlock(first, "remember", {"text": "deploys on Tuesday"}),
        ToolUseBlock(second, "recall", {"query": "deploy window"}),
    )
    assert server.bodies[0]["tools"][1] == {
        "type": "function",
        "function": {
            "name": "remember",
            "description": "Store a fact for later.",
            "parameters": REMEMBER.input_schema,
        },
    }


def test_tool_results_go_back_as_tool_messages(server: ChatServer) -> None:
    server.push_text("Stored one, the other failed.")
    conversation = (
        Message.user("remember two things"),
        Message(
            "assistant",
            (
                TextBlock("Storing both."),
                ToolUseBlock("call_1", "remember", {"text": "first"}),
                ToolUseBlock("call_2", "remember", {"text": "Zoë's"}),
            ),
        ),
        Message(
            "user",
            (
                ToolResultBlock("call_1", "stored as m-1"),
                ToolResultBlock("call_2", "disk full", is_error=True),
            ),
        ),
    )

    adapter(server).complete(LLMRequest(system=SYSTEM, messages=conversation, tools=(REMEMBER,)))

    assert server.bodies[0]["messages"][1:] == [
        {"role": "user", "content": "remember two things"},
        {
            "role": "assistant",
            "content": "Storing both.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "remember", "arguments": '{"text": "first"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "remember", "arguments": '{"text": "Zoë\'s"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "stored as m-1"},
        {"role": "tool", "tool_call_id": "call_2", "content": "error: disk full"},
    ]


def test_an_image_block_goes_as_an_image_url_part_with_a_data_url(server: ChatServer) -> None:
    server.push_text("A red square.")
    image = ImageBlock("image/png", b"\x89PNG\r\n\x1a\n-bytes-", 4, 3)
    turn = Message("user", (TextBlock("what does it show?"), image))

    adapter(server).complete(LLMRequest(system=SYSTEM, messages=(turn,)))

    assert server.bodies[0]["messages"][1:] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what does it show?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64,iVBORw0KGgotYnl0ZXMt"},
                },
            ],
        }
    ]


def test_openai_itself_is_sent_max_completion_tokens() -> None:
    # Without a base URL the client talks to OpenAI, whose newer models refuse max_tokens;
    # nothing is sent here, only the request that would be is checked.
    llm = OpenAILLM(KEY, MODEL)
    assert llm._params(ask(max_tokens=77), MODEL)["max_completion_tokens"] == 77
    assert llm.base_url.startswith("https://")


# Usage


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_usage_counts_cached_prompt_tokens_apart(server: ChatServer, stream: bool) -> None:
    usage = {
        "prompt_tokens": 2100,
        "completion_tokens": 7,
        "total_tokens": 2107,
        "prompt_tokens_details": {"cached_tokens": 2048},
    }
    server.push_text("cached answer", usage=usage)

    response = adapter(server, stream=stream).complete(ask())

    assert response.usage == Usage(input_tokens=52, output_tokens=7, cache_read_input_tokens=2048)
    if stream:
        assert server.bodies[0]["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_usage_a_server_does_not_report_is_unknown_not_zero(
    server: ChatServer, stream: bool
) -> None:
    server.push_text("no usage here", usage=None)

    response = adapter(server, stream=stream).complete(ask())

    assert response.text == "no usage here"
    assert response.usage.reported is False


# Streaming


def test_sink_sees_the_text_grow_delta_by_delta(server: ChatServer) -> None:
    server.push(Reply(body=completion(ANSWER), delta_delay=0.03))
    shown = Shown()

    response = adapter(server, stream=True).complete(ask("when do we deploy?"), sink=shown)

    assert server.bodies[0]["stream"] is True
    assert response.content == (TextBlock(ANSWER),)
    assert shown.deltas == [ANSWER[i : i + 8] for i in range(0, len(ANSWER), 8)]
    assert shown.text == response.text
    times = [at for _, _, at in shown.calls]
    assert times[-1] - times[0] >= 0.03 * (len(times) - 1) * 0.8


def test_with_streaming_off_a_sink_gets_the_whole_text(server: ChatServer) -> None:
    server.push_text(ANSWER)
    shown = Shown()

    adapter(server, stream=False).complete(ask(), sink=shown)

    assert "stream" not in server.bodies[0]
    assert shown.deltas == [ANSWER]


def test_streamed_parallel_tool_calls_are_assembled_and_not_shown(server: ChatServer) -> None:
    tool_input = {"text": "Zoë owns the “billing” runbook", "tags": ["ops", "billing"]}
    first, second = server.push_calls(
        tool_call("remember", tool_input), tool_call("recall", {"query": "billing"}), text="Ok."
    )
    shown = Shown()

    response = adapter(server, stream=True).complete(
        ask("remember", tools=(RECALL, REMEMBER)), sink=shown
    )

    assert response.tool_uses == (
        ToolUseBlock(first, "remember", tool_input),
        ToolUseBlock(second, "recall", {"query": "billing"}),
    )
    assert response.stop_reason == "tool_use"
    assert shown.text == "Ok."


def test_stream_cut_midway_is_retried_after_a_restart(server: ChatServer) -> None:
    server.push(Reply(body=completion(ANSWER), stream_cut=3))  # role and two pieces, then gone
    server.push_text(ANSWER)
    shown = Shown()

    response = adapter(server, stream=True).complete(ask(), sink=shown)

    assert response.text == ANSWER == shown.text
    assert [kind for kind, _, _ in shown.calls][:3] == ["delta", "delta", "restart"]
    assert len(server.requests) == 2


def test_error_chunk_midway_is_retried_after_a_restart(server: ChatServer) -> None:
    broken = chat_error("server_error", "The server had an error")
    server.push(Reply(body=completion(ANSWER), stream_cut=3, stream_error=broken))
    server.push_text(ANSWER)
    shown = Shown()

    response = adapter(server, stream=True).complete(ask(), sink=shown)

    assert response.text == ANSWER == shown.text
    assert shown.restarts == 1


def test_stream_cut_on_every_attempt_raises_llm_error(server: ChatServer) -> None:
    for _ in range(2):
        server.push(Reply(body=completion(ANSWER), stream_cut=3))

    with pytest.raises(LLMError, match="cut off before it was complete"):
        adapter(server, stream=True, max_retries=1).complete(ask(), sink=Shown())

    assert len(server.requests) == 2


# Retries and timeouts


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_429_with_retry_after_is_retried_then_succeeds(server: ChatServer, stream: bool) -> None:
    for _ in range(2):
        server.push_error(429, retry_after=0.1)
    server.push_text("finally")

    started = time.monotonic()
    response = adapter(server, stream=stream, max_retries=3).complete(ask())

    assert response.text == "finally"
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1", "2"]
    assert time.monotonic() - started < 1.5  # retry-after, not the SDK's own longer backoff


def test_persistent_5xx_raises_llm_error_after_retries(server: ChatServer) -> None:
    for _ in range(3):
        server.push_error(503, message="The engine is currently overloaded", retry_after=0.05)

    with pytest.raises(LLMError) as caught:
        adapter(server, max_retries=2).complete(ask())

    assert "503 server_error: The engine is currently overloaded" in str(caught.value)
    assert "after 2 retries" in str(caught.value)
    assert len(server.requests) == 3


def test_retry_after_longer_than_cairn_waits_fails_at_once(server: ChatServer) -> None:
    server.push_error(429, message="Rate limited", retry_after=3600)
    server.push_text("never reached")

    started = time.monotonic()
    with pytest.raises(LLMError, match="asked to wait 3600s"):
        adapter(server, max_retries=4).complete(ask())

    assert time.monotonic() - started < 5
    assert len(server.requests) == 1


def test_rejected_request_is_not_retried(server: ChatServer) -> None:
    server.push_error(400, "invalid_request_error", "messages: unexpected role")

    with pytest.raises(LLMError) as caught:
        adapter(server).complete(ask())

    assert "400 invalid_request_error: messages: unexpected role" in str(caught.value)
    assert len(server.requests) == 1


def test_tool_messages_out_of_order_are_refused_by_the_stand_in_as_by_openai(
    server: ChatServer,
) -> None:
    # The stand-in keeps OpenAI's rule, so an end-to-end test through it would catch a history
    # the adapter sends out of order: a tool result with no call before it, or a call unanswered.
    server.push_text("never sent")
    orphan = Message("user", (ToolResultBlock("call_9", "stored as m-9"),))
    unanswered = Message("assistant", (ToolUseBlock("call_8", "remember", {"text": "x"}),))
    for history in ((Message.user("hi"), orphan), (Message.user("hi"), unanswered)):
        with pytest.raises(LLMError, match="400 invalid_request_error"):
            adapter(server).complete(LLMRequest(system=SYSTEM, messages=history))
    refusals = [r for r in server.requests if r.method == "POST"]
    assert len(refusals) == 2
    assert server.pending == 1  # the scripted answer was not used up


def test_read_timeout_is_retried_then_a_persistent_one_names_the_setting(
    server: ChatServer,
) -> None:
    server.push(Reply(body=completion("too late"), delay=5))
    server.push_text("in time")
    assert adapter(server, timeout=0.3, max_retries=1).complete(ask()).text == "in time"

    server.push(Reply(body=completion("too late"), delay=5))
    with pytest.raises(LLMError, match="CAIRN_LLM_TIMEOUT"):
        adapter(server, timeout=0.2, max_retries=0).complete(ask())


def test_unknown_model_names_the_setting(server: ChatServer) -> None:
    server.push_error(404, "model_not_found", "The model `gpt-nope` does not exist")

    with pytest.raises(LLMError, match="CAIRN_MODEL"):
        adapter(server).complete(ask())


def test_bad_key_raises_llm_auth_error_without_leaking_it(
    server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "sk-wrong-0123456789abcdef"
    caplog.set_level(logging.DEBUG)

    with pytest.raises(LLMAuthError) as caught:
        adapter(server, key=wrong).complete(ask())

    assert "OPENAI_API_KEY" in str(caught.value)
    told = "".join(traceback.format_exception(caught.value)) + repr(caught.value) + caplog.text
    assert wrong not in told
    assert len(server.requests) == 1


# Weak models


def test_malformed_arguments_are_flagged_with_the_reason(server: ChatServer) -> None:
    server.push_calls(
        tool_call("remember", '{"text": "deploys on Tuesday"', call_id="call_bad"),
        tool_call("recall", json.dumps(json.dumps({"query": "x"})), call_id="call_twice"),
        tool_call("recall", "[1, 2]", call_id="call_list"),
    )

    bad, twice, listed = adapter(server).complete(ask(tools=(RECALL, REMEMBER))).tool_uses

    assert bad.input == {}
    assert "not valid JSON" in bad.malformed
    assert '{\\"text\\": \\"deploys on Tuesday\\"' in bad.malformed  # what it wrote, quoted
    assert twice == ToolUseBlock("call_twice", "recall", {"query": "x"})  # encoded twice: read
    assert "a JSON list, not an object" in listed.malformed


def test_empty_arguments_are_no_arguments() -> None:
    assert read_arguments("") == ({}, "")
    assert read_arguments(None) == ({}, "")


def test_a_model_declared_without_tools_is_sent_none_and_told_so(server: ChatServer) -> None:
    server.push_text("From memory: Tuesday.")

    adapter(server, tools=False).complete(ask(context=CONTEXT, tools=(RECALL, REMEMBER)))

    [body] = server.bodies
    assert "tools" not in body
    assert body["messages"][0]["content"] == f"{SYSTEM}\n\n{CONTEXT}\n\n{NO_TOOLS_NOTE}"


def test_a_server_that_refuses_tools_is_asked_again_without_them_from_then_on(
    server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.push_error(400, "api_error", "registry/library/tiny:1b does not support tools")
    server.push_text("From memory: Tuesday.")
    server.push_text("Still no tools.")
    llm = adapter(server)

    first = llm.complete(ask(context=CONTEXT, tools=(REMEMBER,)))
    second = llm.complete(ask(tools=(REMEMBER,)))

    assert (first.text, second.text) == ("From memory: Tuesday.", "Still no tools.")
    refused, *after = server.bodies
    assert "tools" in refused
    assert all("tools" not in body for body in after)
    assert all(NO_TOOLS_NOTE in body["messages"][0]["content"] for body in after)
    assert "CAIRN_MODEL_TOOLS=false" in caplog.text


# Azure and settings


def test_azure_deployment_is_reached_with_its_key_header_and_api_version() -> None:
    with ChatServer(api_key=KEY) as server:
        server.push_text("from Azure")
        llm = OpenAILLM(
            KEY,
            "ignored",
            azure=AzureTarget(server.endpoint, "cairn-gpt", "2024-10-21"),
            max_retries=0,
        )
        response = llm.complete(ask())

    assert response.text == "from Azure"
    [sent] = server.requests
    assert sent.path == "/openai/deployments/cairn-gpt/chat/completions?api-version=2024-10-21"
    assert sent.headers["api-key"] == KEY
    assert sent.body["model"] == "cairn-gpt"


def test_settings_choose_the_adapter_and_its_endpoint(server: ChatServer) -> None:
    server.push_text("configured")
    settings = load_settings(
        CAIRN_LLM="openai",
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY=KEY,
        CAIRN_MODEL="llama3.2:1b",
        CAIRN_LLM_STREAM=False,
        CAIRN_MODEL_TOOLS=False,
    )

    llm = build_llm(settings)

    assert isinstance(llm, OpenAILLM)
    assert isinstance(llm, LLM)
    assert llm.complete(ask(tools=(REMEMBER,))).text == "configured"
    assert server.bodies[0]["model"] == "llama3.2:1b"
    assert "tools" not in server.bodies[0]
    assert KEY not in repr(llm)


def test_a_local_endpoint_needs_no_key(server: ChatServer) -> None:
    open_server = ChatServer(api_key=None).start()
    try:
        open_server.push_text("no key needed")
        settings = load_settings(CAIRN_LLM="openai", OPENAI_BASE_URL=open_server.base_url)
        assert build_llm(settings).complete(ask()).text == "no key needed"
    finally:
        open_server.stop()


def test_offline_stays_the_default_without_a_key() -> None:
    assert build_llm(load_settings()).name == "offline"
    assert load_settings(OPENAI_API_KEY=KEY).llm.provider == "offline"


def test_half_set_settings_are_refused_with_what_to_set() -> None:
    with pytest.raises(ConfigError, match=r"OPENAI_API_KEY.*or OPENAI_BASE_URL"):
        load_settings(CAIRN_LLM="openai")
    with pytest.raises(ConfigError, match="OPENAI_API_VERSION"):
        load_settings(
            CAIRN_LLM="openai", AZURE_OPENAI_ENDPOINT="https://x.example", OPENAI_API_KEY=KEY
        )
