"""Tools from MCP servers (the Model Context Protocol), for Cairn's agents (docs/adr/0031).

:mod:`cairn.mcp.catalog` says which tools an agent may call, under which names, and which of
them need a person's approval; :mod:`cairn.mcp.hub` holds this process's connections to the
declared servers, through the official ``mcp`` SDK, and calls their tools with a timeout.
"""

from cairn.mcp.catalog import (
    AgentTool,
    RemoteTool,
    agent_tools,
    approval_for,
    exposed_name,
    matches,
    may_call,
)
from cairn.mcp.hub import CallResult, ServerUnavailable, ToolServers

__all__ = [
    "AgentTool",
    "CallResult",
    "RemoteTool",
    "ServerUnavailable",
    "ToolServers",
    "agent_tools",
    "approval_for",
    "exposed_name",
    "matches",
    "may_call",
]
