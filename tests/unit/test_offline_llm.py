"""The offline model: it asks for memory tools and phrases their results honestly."""

from __future__ import annotations

import json
import time

import pytest

from cairn.llm.offline import OFFLINE_NOTE, OfflineLLM
from cairn.llm.types import LLMRequest, Message, ToolResultBlock


def _ask(text: str) -> LLMRequest:
    return LLMRequest(system="s", messages=(Message.user(f"ann: {text}"),), metadata={"text": text})


@pytest.mark.parametrize(
    ("text", "tool", "arguments"),
    [
        ("remember the VPN is vpn.example.com", "remember", {"text": "the VPN is vpn.example.com"}),
        (
            "Remember that deploys need two approvals.",
            "remember",
            {"text": "deploys need two approvals."},
        ),
        ("note: staging is flaky", "remember", {"text": "staging is flaky"}),
        ("what do you know about the VPN?", "recall", {"query": "the VPN"}),
        ("are deploys frozen?", "recall", {"query": "are deploys frozen"}),
        (
            "forget the VPN is vpn.example.com",
            "retract",
            {"query": "the VPN is vpn.example.com", "reason": "asked to forget"},
        ),
    ],
)
def test_requests_become_memory_tool_calls(text: str, tool: str, arguments: dict[str, str]) -> None:
    response = OfflineLLM().complete(_ask(text))
    assert response.stop_reason == "tool_use"
    [use] = response.tool_uses
    assert (use.name, use.input) == (tool, arguments)


def test_small_talk_gets_an_honest_offline_answer_without_tools() -> None:
    response = OfflineLLM().complete(_ask("how are you today"))
    assert not response.tool_uses
    assert "offline" in response.text
    assert OFFLINE_NOTE in response.text


def test_recall_results_are_listed_with_ids() -> None:
    result = json.dumps(
        {
            "query": "vpn",
            "memories": [{"id": 7, "text": "the VPN is vpn.example.com", "since": "2026-11-29"}],
        }
    )
    request = LLMRequest(
        system="s",
        messages=(
            Message.user("ann: what about the vpn?"),
            Message("user", (ToolResultBlock("t1", result),)),
        ),
    )
    text = OfflineLLM().complete(request).text
    assert "the VPN is vpn.example.com (#7" in text


def test_an_empty_recall_says_so() -> None:
    result = json.dumps({"query": "the moon", "memories": []})
    request = LLMRequest(system="s", messages=(Message("user", (ToolResultBlock("t", result),)),))
    assert "don't remember anything about the moon" in OfflineLLM().complete(request).text


def test_a_tool_error_is_reported_not_hidden() -> None:
    request = LLMRequest(
        system="s",
        messages=(
            Message(
                "user", (ToolResultBlock("t", "nothing remembered matches 'x'", is_error=True),)
            ),
        ),
    )
    assert "couldn't do that: nothing remembered matches" in OfflineLLM().complete(request).text


class _Collected:
    """A TextSink that keeps the deltas it is sent."""

    def __init__(self) -> None:
        self.deltas: list[str] = []
        self.restarts = 0

    def delta(self, text: str) -> None:
        self.deltas.append(text)

    def restart(self) -> None:
        self.restarts += 1


def test_an_answer_streams_in_word_groups_that_join_into_its_text() -> None:
    sink = _Collected()

    response = OfflineLLM().complete(_ask("help"), sink=sink)

    assert len(sink.deltas) > 3
    assert all(len(d.split()) <= 4 for d in sink.deltas)
    assert "".join(sink.deltas) == response.text
    assert sink.restarts == 0
    assert response == OfflineLLM().complete(_ask("help"))


def test_a_tool_call_streams_nothing() -> None:
    sink = _Collected()

    response = OfflineLLM().complete(_ask("remember the VPN is vpn.example.com"), sink=sink)

    assert response.tool_uses
    assert sink.deltas == []


def test_a_delay_paces_the_word_groups_and_changes_nothing_else() -> None:
    class Timed(_Collected):
        def __init__(self) -> None:
            super().__init__()
            self.times: list[float] = []

        def delta(self, text: str) -> None:
            self.times.append(time.monotonic())
            super().delta(text)

    sink = Timed()

    response = OfflineLLM(delay=0.01).complete(_ask("help"), sink=sink)

    assert response == OfflineLLM().complete(_ask("help"))
    assert "".join(sink.deltas) == response.text
    gaps = [b - a for a, b in zip(sink.times, sink.times[1:], strict=False)]
    assert len(gaps) > 3
    assert min(gaps) >= 0.009  # each group waits, and a sleep never wakes early


def test_a_message_with_an_attached_image_is_answered_that_images_cant_be_read() -> None:
    from cairn.memory.context.intake import take_in
    from cairn.sessions.events import Attachment
    from tests.unit.test_image_headers import png

    data = png(640, 480)
    for images in (False, True):  # whether or not its bytes are sent (CAIRN_MODEL_IMAGES)
        logged = take_in(
            "what does this show?",
            [Attachment("p99.png", "image/png", data=data)],
            max_chars=40_000,
            max_bytes=10_000_000,
            distill_chars=1500,
            images=images,
        )
        answer = OfflineLLM().complete(_ask(logged.text)).text
        assert answer.startswith("I can't read images: I'm the offline model")
        assert f"p99.png (image, 640x480, {len(data)} bytes" in answer
    # Asked to remember something, it still does: the image is only what came with it.
    remember = OfflineLLM().complete(_ask(f"remember p99 doubled\n{logged.text}"))
    assert remember.tool_uses[0].name == "remember"
