"""The App Home tab: what Cairn remembers for the workspace and for the person looking, with
buttons to confirm or retract each memory under the same rules as emoji reactions."""

from __future__ import annotations

from typing import Any

from cairn.bot.slack.mrkdwn import escape
from cairn.memory import Memory, Scope, vouching
from cairn.memory.records import may_retract
from cairn.memory.vouching import Confirmer
from cairn.runtime import Runtime

__all__ = [
    "CONFIRM_ACTION",
    "RETRACT_ACTION",
    "confirm_memory",
    "home_view",
    "retract_memory",
]

CONFIRM_ACTION = "cairn_confirm"
RETRACT_ACTION = "cairn_retract"
# Block Kit allows 100 blocks in a view; each memory takes two.
_WORKSPACE_LIMIT = 20
_PERSONAL_LIMIT = 15
_SCAN = 500


def home_view(rt: Runtime, tenant: str, user: str) -> dict[str, Any]:
    """The Home tab view for ``user`` in the workspace ``tenant``: its memories only."""
    scope = Scope(tenant, rt.settings.agent)
    newest = rt.memory.newest(scope, limit=_SCAN)
    mine = [m for m in newest if m.author == user][:_PERSONAL_LIMIT]
    shown = {m.id for m in mine}
    workspace = [m for m in newest if m.id not in shown][:_WORKSPACE_LIMIT]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "What Cairn remembers"}},
        _context(
            "Confirm what is right, retract what is wrong. Only its author or an admin can "
            "retract a memory; anyone else's retract is recorded as a dispute."
        ),
        {"type": "divider"},
        _section(f"*Yours* ({len(mine)})"),
    ]
    blocks += _memories(mine, "You have not taught Cairn anything yet.")
    blocks += [{"type": "divider"}, _section(f"*This workspace* (newest {len(workspace)})")]
    blocks += _memories(workspace, "Nothing remembered in this workspace yet.")
    return {"type": "home", "callback_id": "cairn_home", "blocks": blocks}


def _memories(memories: list[Memory], empty: str) -> list[dict[str, Any]]:
    if not memories:
        return [_context(empty)]
    blocks: list[dict[str, Any]] = []
    for memory in memories:
        badge = " :white_check_mark:" if memory.confirmed else ""
        disputed = f" (disputed {memory.disputes}x)" if memory.disputes > 0 else ""
        author = f" by <@{memory.author}>" if memory.author else ""
        blocks.append(
            _section(
                f"{escape(memory.text)}{badge}\n_#{memory.id} {memory.kind}{author}, "
                f"{memory.created_at:%Y-%m-%d}{disputed}_"
            )
        )
        value = str(memory.id)
        blocks.append(
            {
                "type": "actions",
                "block_id": f"memory_{memory.id}",
                "elements": [
                    {
                        "type": "button",
                        "action_id": CONFIRM_ACTION,
                        "text": {"type": "plain_text", "text": "Confirm"},
                        "style": "primary",
                        "value": value,
                    },
                    {
                        "type": "button",
                        "action_id": RETRACT_ACTION,
                        "text": {"type": "plain_text", "text": "Retract"},
                        "style": "danger",
                        "value": value,
                        "confirm": {
                            "title": {"type": "plain_text", "text": "Retract this memory?"},
                            "text": {"type": "plain_text", "text": memory.text[:300]},
                            "confirm": {"type": "plain_text", "text": "Retract"},
                            "deny": {"type": "plain_text", "text": "Keep it"},
                        },
                    },
                ],
            }
        )
    return blocks


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def confirm_memory(rt: Runtime, tenant: str, memory_id: int, by: Confirmer) -> str:
    """Confirm a memory of ``tenant`` (validity up), as a confirm reaction does: whether it
    counts is :func:`cairn.memory.vouching.confirm`'s to say.

    Confirming an already confirmed memory changes nothing. Returns what happened, for people.
    """
    scope = Scope(tenant, rt.settings.agent)
    memory = rt.memory.get(memory_id, scope)
    if memory is None or memory.retracted:
        return f"There is no memory #{memory_id} to confirm here."
    if memory.confirmed:
        return f'"{memory.text}" is already confirmed.'
    verdict = vouching.confirm(rt.memory, memory_id, scope, by)
    if verdict.confirmed:
        return f'Confirmed "{memory.text}".'
    if verdict.counted:
        return f'"{memory.text}": {verdict.said}.'
    return f'Not counted for "{memory.text}": {verdict.said}.'


def retract_memory(
    rt: Runtime,
    tenant: str,
    memory_id: int,
    user: str,
    *,
    admin: bool = False,
    private_to: str | None = None,
) -> str:
    """Retract a memory of ``tenant`` if ``user`` may (its author, a configured admin, or a
    workspace admin: ``admin``), else dispute it.

    Only a workspace memory is found, or one private to the conversation ``private_to`` (where
    /cairn forget was typed). The rule is the one reactions follow (cairn.workers.feedback).
    Returns what happened.
    """
    scope = Scope(tenant, rt.settings.agent, private_to=private_to)
    memory = rt.memory.get(memory_id, scope)
    if memory is None or memory.retracted:
        return f"There is no memory #{memory_id} to retract here."
    if may_retract(memory, user, admin=admin or user in rt.settings.admins):
        rt.memory.retract(memory_id, scope, by=user, reason="retracted in App Home")
        return f'Retracted "{memory.text}" (kept for audit, never recalled).'
    rt.memory.adjust(memory_id, validity=-1.0, disputes=1)
    return f'Only its author or an admin can retract "{memory.text}"; your objection is recorded.'
