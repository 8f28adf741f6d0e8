"""Which agent a message is for: "ops: ..." names one, else the channel's default agent.

One bot identity can host several agents. A message that starts with a declared agent's name
followed by a colon or comma ("ops: is the deploy done?", "@cairn review, look at #42") goes to
that agent, with the name removed; otherwise the agent whose ``channels`` list the channel;
otherwise the deployment's default (CAIRN_AGENT).

An agent may also have a bot identity of its own (``own_identity`` in cairn.toml): its frontend
runs with CAIRN_AGENT set to that agent, and everything said to that identity is for it.
"""

from __future__ import annotations

import re
from dataclasses import replace

from cairn.core.settings import Settings
from cairn.sessions.events import ChatEvent, EventType

__all__ = ["route"]

_ADDRESS = re.compile(r"^\s*@?(?P<name>[a-z][a-z0-9_-]{0,31})\s*[:,]\s*(?P<rest>.*)$", re.S | re.I)


def route(event: ChatEvent, settings: Settings) -> ChatEvent:
    """``event`` with its ``agent`` decided (an explicit ``event.agent`` is kept)."""
    if event.agent or event.type is not EventType.MESSAGE:
        return event
    if settings.identity_agent is not None:
        return replace(event, agent=settings.identity_agent)
    names = settings.agent_names
    match = _ADDRESS.match(event.text)
    if match and match.group("name").lower() in names and match.group("rest").strip():
        return replace(event, agent=match.group("name").lower(), text=match.group("rest"))
    for name in names:
        if event.channel in settings.agent_spec(name).channels:
            return replace(event, agent=name)
    return replace(event, agent=settings.agent)
