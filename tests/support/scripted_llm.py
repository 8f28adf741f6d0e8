"""A language model that plays back fixed answers, for tests where the model is not under test."""

from __future__ import annotations

from cairn.llm.types import LLMRequest, LLMResponse

__all__ = ["ScriptedLLM"]


class ScriptedLLM:
    """Answers each request with the next of ``answers`` and keeps the requests it was sent."""

    name = "scripted"

    def __init__(self, *answers: LLMResponse) -> None:
        self.answers = list(answers)
        self.requests: list[LLMRequest] = []

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        return self.answers.pop(0)
