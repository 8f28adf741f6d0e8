"""The tools an agent may call, and how they run against memory within the turn's scope.

The scope (tenant, agent, channel, user, thread) comes from the chat event, never from the
model: a tool's input can narrow what it touches but can never name another tenant, and the
model can choose ``private`` or ``team`` visibility but never ``public``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cairn.errors import InvalidInput, NotFound
from cairn.memory import Memory, MemoryStore, Scope, Source, Visibility
from cairn.memory.store import MEMORY_KINDS
from cairn.workers.llm.base import ToolSpec

__all__ = ["TOOL_SPECS", "ToolOutcome", "Toolbox"]

TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="remember",
        description=(
            "Store a durable fact, preference, decision, pattern, mistake or constraint in "
            "long-term memory so that it can be recalled in later threads. Write it as one "
            "self-contained sentence. People are shown a 'remembered: ...' notice."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The memory, one sentence."},
                "kind": {"type": "string", "enum": list(MEMORY_KINDS), "default": "fact"},
                "share_with_team": {
                    "type": "boolean",
                    "description": "True to make it visible to every agent of this workspace.",
                    "default": False,
                },
            },
            "required": ["text"],
        },
    ),
    ToolSpec(
        name="recall",
        description="Search long-term memory for what is relevant to a query.",
        input_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "k": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
            },
            "required": ["query"],
        },
    ),
    ToolSpec(
        name="retract",
        description=(
            "Retract a memory that is wrong or outdated, by its id (from recall) or by a query "
            "matching it. Retracted memories are kept for audit but never recalled."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "memory_id": {"type": "integer"},
                "query": {"type": "string"},
                "reason": {"type": "string"},
            },
        },
    ),
)


@dataclass
class ToolOutcome:
    """What a tool call produced: the text for the model, and the memories it touched."""

    content: str
    is_error: bool = False
    used: list[Memory] = field(default_factory=list)
    announced: list[Memory] = field(default_factory=list)
    retracted: list[Memory] = field(default_factory=list)


class Toolbox:
    """Runs tool calls for one turn, in one scope, on behalf of the person who wrote."""

    def __init__(self, store: MemoryStore, scope: Scope, source: Source) -> None:
        self.store = store
        self.scope = scope
        self.source = source
        self._tools: dict[str, Callable[[dict[str, Any]], ToolOutcome]] = {
            "remember": self._remember,
            "recall": self._recall,
            "retract": self._retract,
        }

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        """The specs of the tools this toolbox runs."""
        return tuple(s for s in TOOL_SPECS if s.name in self._tools)

    def run(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run tool ``name``; bad input and unknown tools come back as error outcomes."""
        tool = self._tools.get(name)
        if tool is None:
            return ToolOutcome(f"unknown tool {name!r}", is_error=True)
        try:
            return tool(arguments)
        except (InvalidInput, NotFound) as exc:
            return ToolOutcome(str(exc), is_error=True)

    def _remember(self, args: dict[str, Any]) -> ToolOutcome:
        text = _string(args, "text")
        kind = str(args.get("kind") or "fact")
        visibility = Visibility.TEAM if args.get("share_with_team") is True else Visibility.PRIVATE
        result = self.store.remember(
            text, self.scope, kind=kind, visibility=visibility, source=self.source
        )
        memory = result.memory
        payload = {"status": "stored" if result.created else "already known", **_card(memory)}
        outcome = ToolOutcome(json.dumps(payload))
        if result.created:
            outcome.announced.append(memory)
        return outcome

    def _recall(self, args: dict[str, Any]) -> ToolOutcome:
        query = _string(args, "query")
        k = args.get("k", self.store.default_k)
        k = max(1, min(20, k)) if isinstance(k, int) else self.store.default_k
        found = self.store.recall(query, self.scope, k)
        payload = {"query": query, "memories": [_card(r.memory) for r in found]}
        return ToolOutcome(json.dumps(payload), used=[r.memory for r in found])

    def _retract(self, args: dict[str, Any]) -> ToolOutcome:
        reason = str(args.get("reason") or "")
        target = self._target(args)
        by = self.source.author
        if target.author and by and target.author != by:
            # Only the author may retract through the agent; anyone else's request is a
            # dispute, recorded for review, so one person cannot erase another's knowledge.
            self.store.adjust(target.id, validity=-1.0, disputes=1)
            payload = {"status": "disputed", **_card(target), "author": target.author}
            return ToolOutcome(json.dumps(payload), used=[target])
        retracted = self.store.retract(target.id, self.scope, by=by, reason=reason)
        return ToolOutcome(
            json.dumps({"status": "retracted", **_card(retracted)}), retracted=[retracted]
        )

    def _target(self, args: dict[str, Any]) -> Memory:
        memory_id = args.get("memory_id")
        if isinstance(memory_id, int):
            memory = self.store.get(memory_id, self.scope)
            if memory is None or memory.retracted:
                raise NotFound(f"no memory #{memory_id} to retract in this scope")
            return memory
        query = _string(args, "query")
        found = self.store.recall(query, self.scope, 1)
        if not found:
            raise NotFound(f"nothing remembered matches {query!r}")
        return found[0].memory


def _string(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"the tool needs a non-empty string {name!r}")
    return value


def _card(memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "text": memory.text,
        "kind": memory.kind,
        "visibility": memory.visibility,
        "confirmed": memory.confirmed,
        "since": memory.created_at.date().isoformat(),
    }
