"""The ``/cairn`` slash command: help, remember, recall, forget and status, answered privately.

It works on the memory of the conversation it is typed in: what ``/cairn remember`` stores in a
DM, a group DM or a private channel stays there, as what the bot learns there does.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from cairn.bot.slack.home import retract_memory
from cairn.core.bounded import bounded_int
from cairn.core.errors import CairnError
from cairn.memory import Scope, Source, Visibility
from cairn.runtime import Runtime

__all__ = ["USAGE", "run_command"]

USAGE = """\
*/cairn* — talk to Cairn's memory directly (only you see the answers):
• `/cairn remember <fact>`: remember it for this workspace (in a DM or a private channel: for \
that conversation only)
• `/cairn recall <query>`: what Cairn remembers about it
• `/cairn forget <fact or #id>`: retract it (its author or an admin; others dispute it)
• `/cairn status`: how Cairn is doing
• `/cairn help`: this list
Mention @cairn in a thread to ask it anything."""

_ID = re.compile(r"^#?(\d+)$")


def run_command(
    rt: Runtime,
    *,
    tenant: str,
    channel: str,
    user: str,
    text: str,
    status: Callable[[], str] | None = None,
    private: bool = True,
    conversation: str = "",
) -> str:
    """Carry out ``/cairn text`` for ``user`` in ``tenant``; returns the answer (mrkdwn).

    ``private``: whether ``channel`` is a private conversation (a DM, a group DM, a private
    channel); then what is remembered is visible there only. It defaults to private (fail
    closed). ``conversation`` is the channel's name ("#ops"), kept with what is remembered.
    """
    verb, _, argument = text.strip().partition(" ")
    verb, argument = verb.lower(), argument.strip()
    if verb in {"", "help"}:
        return USAGE
    if private and not channel and verb in {"remember", "recall", "forget"}:
        # Without its channel, a private conversation's memory has no room to stay in.
        return "I can't tell which conversation this is, so I can't use its memory."
    room = channel if private and channel else None  # no channel: no memory verb gets here
    scope = Scope(tenant, rt.settings.agent, channel or None, user, private_to=room)
    try:
        if verb == "remember":
            if not argument:
                return "What should I remember? `/cairn remember deploys are frozen on Fridays`"
            source = Source(
                platform="slack", channel=channel, author=user, conversation=conversation
            )
            stored = rt.memory.remember(argument, scope, visibility=Visibility.TEAM, source=source)
            if stored.created:
                return f"Remembered (#{stored.memory.id}): {stored.memory.text}"
            return f"I already knew that (#{stored.memory.id}): {stored.memory.text}"
        if verb == "recall":
            if not argument:
                return "Recall what? `/cairn recall deploys`"
            found = rt.memory.recall(argument, scope, rt.settings.memory.recall_k)
            if not found:
                return f"I don't remember anything about {argument}."
            lines = [f"• {r.memory.text} (#{r.memory.id})" for r in found]
            return "Here is what I remember:\n" + "\n".join(lines)
        if verb == "forget":
            return _forget(rt, tenant, scope, user, argument)
        if verb == "status":
            return status() if status is not None else "Cairn is running."
    except CairnError as exc:
        return f"I couldn't do that: {exc}"
    return f"I don't know `/cairn {verb}`.\n{USAGE}"


def _forget(rt: Runtime, tenant: str, scope: Scope, user: str, argument: str) -> str:
    if not argument:
        return "Forget what? `/cairn forget deploys are frozen on Fridays` or `/cairn forget #12`"
    by_id = _ID.match(argument)
    if by_id:
        memory_id = bounded_int(by_id.group(1), "a memory id")
        return retract_memory(rt, tenant, memory_id, user, private_to=scope.private_to)
    found = rt.memory.recall(argument, scope, 1)
    if not found:
        return f"I don't remember anything like {argument}."
    return retract_memory(rt, tenant, found[0].memory.id, user, private_to=scope.private_to)
