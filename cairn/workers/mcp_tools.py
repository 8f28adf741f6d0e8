"""The MCP tools of one agent in one turn: shown to the model, run or held for approval.

A ``read`` tool runs at once. Its output is masked for credentials, folded into an artifact
card when long (as every tool output is), and handed to the model quoted as data: a JSON object
whose ``output`` is what the external system said, never text that could pass for Cairn's own
instructions. A ``needs approval`` tool does not run: the model is told that the call waits for
a person, and the outcome carries the pending call (tool, arguments with secrets masked, who
asked, when) for the session log, where the approval flow of ADR 0031's part 2 picks it up.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from cairn.core.secrets import SECRET_MARK, mask_secrets, mask_secrets_in
from cairn.core.settings import Settings
from cairn.db.models import utcnow
from cairn.llm.types import ToolSpec
from cairn.mcp import AgentTool, ToolServers, agent_tools
from cairn.workers.outcome import ToolOutcome

__all__ = ["AWAITING_APPROVAL", "RemoteTools"]

# The status of a call that waits for a person, in its tool result and in the session log.
AWAITING_APPROVAL = "awaiting approval"


class RemoteTools:
    """The MCP tools ``agent`` may call, listed from the servers the agent uses."""

    def __init__(
        self,
        servers: ToolServers,
        tools: list[AgentTool],
        *,
        agent: str,
        requested_by: str | None = None,
        fold: Callable[[str], str] | None = None,
    ) -> None:
        """``fold`` turns long output into an artifact card (the context engine's turn);
        ``requested_by`` is the person whose message led to the calls."""
        self.servers = servers
        self.tools = {t.exposed: t for t in tools}
        self.agent = agent
        self.requested_by = requested_by
        self.fold = fold

    @classmethod
    def for_agent(
        cls,
        servers: ToolServers,
        settings: Settings,
        agent: str,
        *,
        requested_by: str | None = None,
        fold: Callable[[str], str] | None = None,
    ) -> RemoteTools:
        """The tools of the servers ``agent`` uses that answer now (lists kept between turns)."""
        spec = settings.agent_spec(agent)
        chosen = list(settings.mcp.servers) if spec.mcp_servers is None else spec.mcp_servers
        listed = servers.listed(chosen)
        found = agent_tools(settings, agent, listed)
        return cls(servers, found, agent=agent, requested_by=requested_by, fold=fold)

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        """What the model is shown of each tool."""
        return tuple(t.spec for t in self.tools.values())

    def has(self, name: str) -> bool:
        """Whether ``name`` is one of these tools."""
        return name in self.tools

    def run(self, name: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Run tool ``name`` (or hold it for approval); never raises for the server's faults."""
        tool = self.tools[name]
        if not isinstance(arguments, Mapping):
            return ToolOutcome(f"{name} takes a JSON object of arguments", is_error=True)
        if tool.needs_approval:
            return self._held(tool, arguments)
        result = self.servers.call(tool.tool.server, tool.tool.name, arguments)
        output, kinds = mask_secrets(result.text)
        if self.fold is not None and not result.failure:
            output = self.fold(output)
        payload: dict[str, Any] = {
            "tool": name,
            "status": _status(result.is_error, result.failure),
            "output": output,
        }
        if kinds:
            payload["secrets_removed"] = kinds
        notice = None
        if result.failure in _NOTICED:
            # The person hears it from Cairn too, not only in the model's words.
            notice = f"tool {name} failed ({_NOTICED[result.failure]}): {output}"
        return ToolOutcome(
            json.dumps(payload, ensure_ascii=False), is_error=result.is_error, notice=notice
        )

    def _held(self, tool: AgentTool, arguments: Mapping[str, Any]) -> ToolOutcome:
        shown, kinds = mask_secrets_in(dict(arguments))
        if kinds or SECRET_MARK in json.dumps(shown, ensure_ascii=False):
            # A credential, or the marker left where one was removed from a person's message:
            # either way the call could not run as asked.
            # Cairn keeps no secrets, so it could not run this call as asked once approved:
            # refused now, rather than asking a person to approve what cannot run.
            refused = {
                "tool": tool.exposed,
                "status": "refused",
                "ran": False,
                "arguments": shown,
                "secrets_removed": kinds or ["a secret removed before the model saw it"],
                "note": (
                    "This call carried a credential in its arguments. Cairn never stores "
                    "secrets, so it cannot hold this call for approval. Ask for it again "
                    "without the secret (the server should take its credentials from its own "
                    "configuration)."
                ),
            }
            return ToolOutcome(json.dumps(refused, ensure_ascii=False), is_error=True)
        pending = {
            "status": "pending",
            "tool": tool.exposed,
            "server": tool.tool.server,
            "server_tool": tool.tool.name,
            "arguments": shown,
            "agent": self.agent,
            "requested_by": self.requested_by,
            "requested_at": utcnow().isoformat(),
        }
        payload = {
            "tool": tool.exposed,
            "status": AWAITING_APPROVAL,
            "ran": False,
            "arguments": shown,
            "note": (
                "This tool needs a person's approval and has NOT run. Tell the people in the "
                "thread what you asked to run, with which arguments and why; it runs only if "
                "someone allowed to approves it."
            ),
        }
        return ToolOutcome(json.dumps(payload, ensure_ascii=False), approval=pending)


# Failures of the server (not of the tool) that the people in the thread are told of.
_NOTICED = {
    "timeout": "timed out",
    "crashed": "the server crashed or hung up",
    "unavailable": "the server is unavailable",
    "malformed": "the server answered nonsense",
}


def _status(is_error: bool, failure: str) -> str:
    if not is_error:
        return "ok"
    return failure or "error"
