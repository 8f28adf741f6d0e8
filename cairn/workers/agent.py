"""The agent loop: ask the model, run the tools it asks for, repeat until it answers.

Every tool call and tool result is written to the session's durable log (through
:class:`TurnLog`) before it acts and as soon as it has a result, so a crash mid-turn leaves a
record of what already happened.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from cairn.core import stages
from cairn.core.secrets import mask_secrets_in
from cairn.llm.types import (
    LLM,
    LLMRequest,
    Message,
    TextSink,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from cairn.memory import Memory
from cairn.workers.outcome import ToolOutcome
from cairn.workers.tools import Toolbox, doing

__all__ = ["TurnLog", "TurnOutcome", "malformed_call", "run_agent"]


class TurnLog(Protocol):
    """Where the loop records tool calls and results, durably, in order."""

    def record(self, kind: str, text: str, data: dict[str, Any]) -> None:
        """Append one event to the session's log (committed when this returns)."""
        ...


@dataclass
class TurnOutcome:
    """The result of one turn: the reply text, the memories the turn touched, notices for the
    thread (a tool server that failed), and the tool calls held for a person's approval."""

    text: str
    used: list[Memory] = field(default_factory=list)
    announced: list[Memory] = field(default_factory=list)
    retracted: list[Memory] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    rounds: int = 0
    usage: list[Usage] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    recalled: list[int] = field(default_factory=list)  # memory ids whose recall is counted


def run_agent(
    llm: LLM,
    request: LLMRequest,
    toolbox: Toolbox,
    log: TurnLog,
    *,
    max_rounds: int,
    sink: TextSink | None = None,
    status: Callable[[str], None] | None = None,
) -> TurnOutcome:
    """Run the tool loop for ``request`` and return the final answer.

    ``sink`` receives the text as the model writes it; the answer is the last round's text, so
    each round after the first starts it over (``restart``). ``status`` is told what the
    agent is doing before each tool runs ("searching memory..."), for the person waiting.
    Raises whatever ``llm.complete`` raises (LLMError, LLMAuthError); tool failures are sent
    back to the model as error results instead. A call held for a person's approval is
    recorded as an ``approval`` event between its call and its result.
    """
    messages = list(request.messages)
    outcome = TurnOutcome(text="")
    request = replace(request, tools=toolbox.specs)
    for round_number in range(max_rounds):
        if round_number and sink is not None:
            sink.restart()
        with stages.span("model"):
            response = llm.complete(replace(request, messages=tuple(messages)), sink=sink)
        outcome.rounds += 1
        outcome.usage.append(response.usage)
        outcome.models.append(response.model or llm.name)
        if not response.tool_uses:
            outcome.text = response.text
            return outcome
        messages.append(Message("assistant", response.content))
        results = []
        for use in response.tool_uses:
            # Logged with credentials masked: the log is read by people and by later turns.
            shown, _ = mask_secrets_in(use.input)
            log.record("tool_call", use.name, {"id": use.id, "input": shown})
            if status is not None:
                status(doing(use.name))
            if use.malformed:
                # A weak model's broken JSON: nothing runs; the model reads why and may call
                # again within the turn's rounds.
                result = ToolOutcome(malformed_call(use), is_error=True)
            else:
                with stages.span("tools"):
                    result = toolbox.run(use.name, use.input)
            if result.approval is not None:
                # The call did not run: the pending call is recorded for a person to decide,
                # and asked for in the thread with the reply (docs/adr/0031).
                held = {**result.approval, "id": use.id}
                log.record("approval", f"awaiting approval: {use.name}", held)
                outcome.approvals.append(held)
            log.record(
                "tool_result",
                result.content,
                {"id": use.id, "tool": use.name, "is_error": result.is_error},
            )
            outcome.used.extend(result.used)
            outcome.announced.extend(result.announced)
            outcome.retracted.extend(result.retracted)
            if result.notice:
                outcome.notices.append(result.notice)
            results.append(ToolResultBlock(use.id, result.content, result.is_error))
        messages.append(Message("user", tuple(results)))
    # The model kept asking for tools: answer with what the turn achieved rather than loop on.
    outcome.text = (
        f"I stopped after {max_rounds} rounds of tool calls without a final answer. "
        "Please ask again, more narrowly."
    )
    return outcome


def malformed_call(use: ToolUseBlock) -> str:
    """The error result for a call whose arguments could not be read, telling how to call again."""
    return (
        f"{use.name} was not run: {use.malformed}. Call {use.name} again with its arguments as"
        " one JSON object that matches its schema, or answer without it."
    )
