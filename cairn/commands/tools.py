"""``cairn tools``: what each agent can call on the declared MCP servers, and what needs approval.

The servers are started and asked for their tools for real, as a turn would; a server that does
not answer is listed with its error, and the command then exits 1.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from cairn.commands.common import cli_errors, load_settings, name_checker
from cairn.core.errors import ConfigError
from cairn.core.settings import Settings

__all__ = ["tools", "tools_report"]


@click.group()
def tools() -> None:
    """The agents' tools from MCP servers: what each agent can call, and what needs approval."""


@tools.command("list")
@click.option(
    "--agent", default=None, callback=name_checker("agent"), help="Only this agent's tools."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def tools_list(agent: str | None, as_json: bool) -> None:
    """List what each agent can call, per MCP server, and which tools need a person's approval.

    \b
    Every declared server is started and asked for its tools; one that fails is shown with
    its error (and the command exits 1). Example:
      cairn tools list --agent ops
    """
    with cli_errors():
        settings = load_settings()
        if agent is not None and agent not in settings.agent_names:
            raise ConfigError(
                f"no agent named {agent!r}; the agents are {', '.join(settings.agent_names)}"
            )
        report = tools_report(settings, [agent] if agent else settings.agent_names)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(_describe(report))
    sys.exit(1 if any(s["error"] for s in report["servers"].values()) else 0)


def tools_report(settings: Settings, agents: list[str]) -> dict[str, Any]:
    """The servers (how each is reached, its tools or its error) and, per agent, the tools it
    may call by server with their approval."""
    from cairn.mcp import ServerUnavailable, ToolServers, agent_tools
    from cairn.sessions.approvals import ttl_of, who_may

    hub = ToolServers(settings.mcp, logs=settings.home_dir / "mcp")
    servers: dict[str, Any] = {}
    listed = {}
    try:
        for name, spec in settings.mcp.servers.items():
            entry: dict[str, Any] = {"transport": spec.transport, "where": spec.where}
            try:
                listed[name] = hub.tools(name)
                entry |= {"tools": [t.name for t in listed[name]], "error": ""}
            except ServerUnavailable as exc:
                entry |= {"tools": [], "error": str(exc)}
            servers[name] = entry
    finally:
        hub.close()
    by_agent: dict[str, Any] = {}
    for agent in agents:
        per_server: dict[str, list[dict[str, str]]] = {}
        for tool in agent_tools(settings, agent, listed):
            entry = {"name": tool.exposed, "approval": tool.approval}
            if tool.needs_approval:
                server = tool.tool.server
                entry |= {
                    "approvers": who_may(settings, agent, server),
                    "expires_after_s": ttl_of(settings, server),
                }
            per_server.setdefault(tool.tool.server, []).append(entry)
        by_agent[agent] = per_server
    return {"servers": servers, "agents": by_agent}


def _approval(tool: dict[str, Any]) -> str:
    if tool["approval"] != "needs approval":
        return str(tool["approval"])
    return (
        f"needs approval by {tool['approvers']} (a request expires after "
        f"{tool['expires_after_s']:g} s)"
    )


def _describe(report: dict[str, Any]) -> str:
    servers = report["servers"]
    if not servers:
        return (
            "no MCP servers are declared; add one as [mcp_servers.NAME] in cairn.toml "
            "(see the README's MCP tools section)"
        )
    lines = []
    for agent, per_server in report["agents"].items():
        lines.append(f"agent {agent}:")
        if not per_server:
            lines.append("  no MCP tools")
        for server, found in per_server.items():
            lines.append(f"  {server} ({servers[server]['where']}):")
            width = max(len(t["name"]) for t in found)
            lines.extend(f"    {t['name']:<{width}}  {_approval(t)}" for t in found)
    failed = [(name, s["error"]) for name, s in servers.items() if s["error"]]
    for _name, error in failed:
        lines.append(f"unavailable: {error}")
    return "\n".join(lines)
