"""``cairn doctor``'s check of an OpenAI-compatible endpoint: reachable, the model exists, it calls
tools, it streams. Each step is a line of the report; the worst one sets the status and the fix.
"""

from __future__ import annotations

from typing import Literal

import openai

from cairn.core.errors import CairnError
from cairn.core.settings import Settings
from cairn.llm.openai import OpenAILLM
from cairn.llm.types import LLMRequest, Message, ToolSpec

__all__ = ["openai_check"]

Status = Literal["ok", "warn", "fail"]

_PING = ToolSpec(
    "ping",
    "Answer a health check. Always call it when asked to.",
    {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"]},
)
_ASK_TOOL = LLMRequest(
    system="You are a health check. When asked, call the ping tool; do not answer in text.",
    messages=(Message.user('Call the ping tool now with {"echo": "ok"}.'),),
    tools=(_PING,),
    max_tokens=64,
)
_ASK_TEXT = LLMRequest(
    system="You are a health check.", messages=(Message.user("Say: ok"),), max_tokens=16
)


class _Count:
    """A TextSink that counts the deltas it is sent."""

    def __init__(self) -> None:
        self.deltas = 0

    def delta(self, text: str) -> None:
        self.deltas += 1

    def restart(self) -> None:
        self.deltas = 0


def openai_check(settings: Settings) -> tuple[Status, str, str]:
    """The status, the lines and the fix of the endpoint check; never raises for the endpoint's
    failures (a broken configuration raises ConfigError, which the report shows)."""
    llm = OpenAILLM.from_settings(settings, max_retries=0, timeout=20.0, stream=False)
    model = llm.model
    lines = [f"{llm!r}"]
    try:
        listed = sorted(m.id for m in llm.client.models.list())
    except openai.AuthenticationError:
        return "fail", "the endpoint rejected OPENAI_API_KEY", "set a valid OPENAI_API_KEY"
    except openai.APIConnectionError as exc:
        return (
            "fail",
            f"cannot reach {llm.base_url}: {exc}",
            "start the server, or fix OPENAI_BASE_URL (it usually ends in /v1)",
        )
    except openai.APIStatusError as exc:
        lines.append(f"the server lists no models (GET /models: {exc.status_code})")
        listed = []
    if listed and settings.llm.azure_endpoint is None:
        if model not in listed:
            shown = ", ".join(listed[:10]) + (", ..." if len(listed) > 10 else "")
            return (
                "fail",
                "\n".join([*lines, f"model {model!r} is not among the server's: {shown}"]),
                "set CAIRN_MODEL to one of them (Ollama: `ollama pull NAME` first)",
            )
        lines.append(f"model {model!r} is served")
    status: Status = "ok"
    fix = ""
    try:
        answer = llm.complete(_ASK_TOOL)
    except CairnError as exc:
        return "fail", "\n".join([*lines, f"a completion failed: {exc}"]), "see the error above"
    if not llm.tools:
        lines.append("the server refused tools for this model")
        status, fix = "warn", "set CAIRN_MODEL_TOOLS=false (it answers from recalled memories)"
    elif not settings.llm.model_tools:
        lines.append("tools are off (CAIRN_MODEL_TOOLS=false)")
    elif any(use.malformed for use in answer.tool_uses):
        lines.append("it called the tool with malformed arguments")
        status, fix = "warn", "use a stronger model, or set CAIRN_MODEL_TOOLS=false"
    elif not any(use.name == "ping" for use in answer.tool_uses):
        lines.append("asked to call a tool, it answered in text instead")
        status, fix = "warn", "if it cannot call tools, set CAIRN_MODEL_TOOLS=false"
    else:
        lines.append("it calls tools")
    sink = _Count()
    try:
        OpenAILLM.from_settings(settings, max_retries=0, timeout=20.0, stream=True).complete(
            _ASK_TEXT, sink=sink
        )
    except CairnError as exc:
        lines.append(f"streaming failed: {exc}")
        return "warn", "\n".join(lines), "set CAIRN_LLM_STREAM=false"
    lines.append(f"it streams ({sink.deltas} deltas)" if sink.deltas else "it streamed no text")
    if not sink.deltas and status == "ok":
        status, fix = "warn", "set CAIRN_LLM_STREAM=false if answers never appear as written"
    return status, "\n".join(lines), fix
