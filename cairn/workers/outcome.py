"""What one tool call produced, whichever kind of tool ran it (memory, state, MCP)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cairn.memory import Memory

__all__ = ["ToolOutcome"]


@dataclass
class ToolOutcome:
    """What a tool call produced: the text for the model, and the memories it touched.

    ``approval`` is set for a call that did not run because it needs a person's approval: what
    the session log records of the pending call (tool, arguments, who asked and when).
    ``notice`` is a short line for the people in the thread (an MCP server that crashed or
    timed out), posted with the reply.
    """

    content: str
    is_error: bool = False
    used: list[Memory] = field(default_factory=list)
    announced: list[Memory] = field(default_factory=list)
    retracted: list[Memory] = field(default_factory=list)
    approval: dict[str, Any] | None = None
    notice: str | None = None
