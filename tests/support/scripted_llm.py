"""A language model that plays back fixed answers, for tests where the model is not under test."""

from __future__ import annotations

from cairn.llm.types import LLMRequest, LLMResponse, TextSink

__all__ = ["ScriptedLLM"]


class ScriptedLLM:
    """Answers each request with the next of ``answers`` and keeps the requests it was sent."""

    name = "scripted"

    def __init__(self, *answers: LLMResponse) -> None:
        self.answers = list(answers)
        self.requests: list[LLMRequest] = []

    def complete(self, request: LLMRequest, *, sink: TextSink | None = None) -> LLMResponse:
        """The next answer; with ``sink``, its text goes there whole first, as one delta."""
        self.requests.append(request)
        answer = self.answers.pop(0)
        if sink is not None and answer.text:
            sink.delta(answer.text)
        return answer
