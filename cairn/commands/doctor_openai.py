"""``cairn doctor``'s check of an OpenAI-compatible endpoint: reachable, the model exists, it calls
tools, it streams. Each step is a line of the report; the worst one sets the status and the fix.
Whether the model calls tools is recorded for the runtime (cairn/llm/tool_findings.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

import openai

from cairn.core.errors import CairnError, StorageError
from cairn.core.settings import Settings
from cairn.llm.openai import OpenAILLM
from cairn.llm.tool_findings import FINDINGS_FILE, TRUSTED_FOR, How, ToolFinding, ToolFindings
from cairn.llm.types import LLMRequest, Message, ToolSpec, ToolUseBlock

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


_SHOWED: dict[How, str] = {
    "refused": "the server refused tools for this model",
    "text": "asked to call a tool, it answered in text instead",
    "malformed": "it called the tool with malformed arguments",
    "called": "it calls tools",
}
_FIXES: dict[How, str] = {
    "refused": "nothing to set: it is sent no tools and answers from recalled memories",
    "text": "nothing to set: it is sent no tools and answers from recalled memories"
    " (CAIRN_MODEL_TOOLS=true to offer them anyway)",
    "malformed": "use a stronger model, or set CAIRN_MODEL_TOOLS=false",
}


def _finding(offered: bool, uses: Sequence[ToolUseBlock]) -> ToolFinding:
    """What the probe showed: ``offered`` is False once the server refused tools."""
    how: How
    if not offered:
        how = "refused"
    elif any(use.malformed for use in uses):
        how = "malformed"  # it does call tools; the agent loop answers bad arguments
    elif any(use.name == "ping" for use in uses):
        how = "called"
    else:
        how = "text"
    return ToolFinding(how in {"called", "malformed"}, how, datetime.now(UTC))


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
    # Probed with tools whatever CAIRN_MODEL_TOOLS says: the finding is recorded either way.
    llm = OpenAILLM.from_settings(settings, max_retries=0, timeout=20.0, stream=False, tools=True)
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
    try:
        answer = llm.complete(_ASK_TOOL)
    except CairnError as exc:
        return "fail", "\n".join([*lines, f"a completion failed: {exc}"]), "see the error above"
    finding = _finding(llm.tools, answer.tool_uses)
    lines.append(_SHOWED[finding.how])
    status: Status = "warn" if finding.how != "called" else "ok"
    fix = _FIXES.get(finding.how, "")
    told = settings.llm.model_tools
    try:
        ToolFindings(settings.home_dir).record(llm.finding_key, finding)
    except StorageError as exc:
        lines.append(f"the finding was not recorded: {exc}")
        return "warn", "\n".join(lines), f"make {settings.home_dir} writable"
    lines.append(
        f"recorded: tools {'on' if finding.tools else 'off'} for {llm.finding_key!r} in"
        f" {settings.home_dir / FINDINGS_FILE} ({finding.found_at:%Y-%m-%d %H:%M} UTC);"
        f" used while CAIRN_MODEL_TOOLS is unset, for {TRUSTED_FOR.days} days"
        " (run `cairn doctor` again to probe afresh)"
    )
    if told is None:
        lines.append(f"to override it, set CAIRN_MODEL_TOOLS={str(not finding.tools).lower()}")
    elif told == finding.tools:
        lines.append(f"CAIRN_MODEL_TOOLS={str(told).lower()} is set and agrees")
    else:
        lines.append(f"CAIRN_MODEL_TOOLS={str(told).lower()} is set and wins over this finding")
        status, fix = "warn", "unset CAIRN_MODEL_TOOLS to use the finding, or keep it to override"
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
