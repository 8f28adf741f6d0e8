"""Which MCP tools an agent may call, under which names, and which need a person's approval.

A server's tool ``restart_service`` is shown to the model as ``ops__restart_service`` (server,
two underscores, tool), within the Messages API's rule for tool names (letters, digits, ``_``
and ``-``, at most 64). What an agent sees is the intersection of the server's ``allow``
patterns, the agent's ``mcp_servers`` and its ``mcp_tools`` patterns. Approval is the server's
default unless an ``approvals`` pattern says otherwise; the most specific pattern wins (an exact
name, then the pattern with the most literal characters, then "needs approval" on a tie).
What a server says of its own tools (annotations such as ``readOnlyHint``) is not trusted.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from cairn.core.settings import Approval, McpServerSpec, Settings
from cairn.llm.types import ToolSpec

__all__ = [
    "AgentTool",
    "RemoteTool",
    "agent_tools",
    "approval_for",
    "exposed_name",
    "matches",
    "may_call",
]

# The Messages API's rule for a tool's name.
_NAME_LIMIT = 64
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")
SEPARATOR = "__"


@dataclass(frozen=True, slots=True)
class RemoteTool:
    """A tool as its server lists it."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class AgentTool:
    """A server's tool as one agent may call it: its exposed name and its approval."""

    tool: RemoteTool
    exposed: str
    approval: Approval

    @property
    def spec(self) -> ToolSpec:
        """What the model is shown: the exposed name, the server's description, its schema."""
        note = " (needs a person's approval before it runs)" if self.needs_approval else ""
        description = (self.tool.description or f"{self.tool.name} on {self.tool.server}").strip()
        return ToolSpec(
            name=self.exposed,
            description=f"[MCP server {self.tool.server}{note}] {description}"[:1024],
            input_schema=_object_schema(self.tool.input_schema),
        )

    @property
    def needs_approval(self) -> bool:
        """Whether a call waits for a person instead of running at once."""
        return self.approval == "needs approval"


def exposed_name(server: str, tool: str) -> str:
    """``server__tool`` within the Messages API's name rule; a name too long or with other
    characters is shortened and given a short hash of the original, so two never collide."""
    name = f"{server}{SEPARATOR}{tool}"
    cleaned = _NOT_ALLOWED.sub("_", name)
    if cleaned == name and len(name) <= _NAME_LIMIT:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
    return f"{cleaned[: _NAME_LIMIT - 9]}_{digest}"


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether ``name`` matches one of the glob ``patterns`` (``*``, ``?``, ``[...]``)."""
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def approval_for(spec: McpServerSpec, tool: str) -> Approval:
    """The approval of ``tool`` on the server ``spec`` declares (see the module's rule)."""
    if tool in spec.approvals:
        return spec.approvals[tool]
    found = [
        (_literal_chars(pattern), level == "needs approval", level)
        for pattern, level in spec.approvals.items()
        if fnmatchcase(tool, pattern)
    ]
    if not found:
        return spec.approval
    return max(found)[2]


def _literal_chars(pattern: str) -> int:
    return len(re.sub(r"\[[^\]]*\]|[*?]", "", pattern))


def agent_tools(
    settings: Settings, agent: str, listed: Mapping[str, Sequence[RemoteTool]]
) -> list[AgentTool]:
    """The tools ``agent`` may call among those ``listed`` by each server, in server order."""
    servers = settings.mcp.servers
    spec = settings.agent_spec(agent)
    chosen = list(servers) if spec.mcp_servers is None else spec.mcp_servers
    found: list[AgentTool] = []
    for server in chosen:
        declared = servers.get(server)
        if declared is None:
            continue
        for tool in listed.get(server, ()):
            if may_call(settings, agent, server, tool.name):
                exposed = exposed_name(server, tool.name)
                found.append(AgentTool(tool, exposed, approval_for(declared, tool.name)))
    return found


def may_call(settings: Settings, agent: str, server: str, tool: str) -> bool:
    """Whether ``agent`` may call ``tool`` of ``server`` as the settings stand now: the server
    is declared and among the agent's, and both allow lists admit the tool."""
    declared = settings.mcp.servers.get(server)
    if declared is None or not matches(tool, declared.allow):
        return False
    spec = settings.agent_spec(agent)
    if spec.mcp_servers is not None and server not in spec.mcp_servers:
        return False
    return spec.mcp_tools is None or matches(exposed_name(server, tool), spec.mcp_tools)


def _object_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The input schema as the Messages API takes it: an object, whatever the server sent."""
    shown = dict(schema)
    if shown.get("type") != "object":
        return {"type": "object", "properties": {}}
    shown.pop("title", None)
    return shown
