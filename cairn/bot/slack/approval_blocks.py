"""Requests for approval as Slack draws them: Block Kit with Approve and Deny buttons.

A request (an outbox row of kind ``approval``, whose data names the held call) is posted as a
section that says what would run, a context line with who may approve and until when, and the
two buttons, whose value is the request's number. Once it is decided the buttons give way to a
line saying who decided, so nobody clicks a request that is closed. The row's plain text stays
the message's ``text``: Slack shows it in notifications and where blocks can't be drawn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cairn.bot.slack.mrkdwn import escape
from cairn.core.reactions import emoji_name
from cairn.core.settings import Settings

__all__ = [
    "APPROVAL_BLOCK",
    "APPROVE_ACTION",
    "DECISION_OF_ACTION",
    "DENY_ACTION",
    "decided_blocks",
    "request_blocks",
]

APPROVE_ACTION = "cairn_approve"
DENY_ACTION = "cairn_deny"
# The actions block of a request: every action in it is Cairn's to answer.
APPROVAL_BLOCK = "cairn_approval"
DECISION_OF_ACTION = {APPROVE_ACTION: "approve", DENY_ACTION: "deny"}

# A section's text may hold 3000 characters; the arguments get what the words around them
# leave (the worker has already cut what it keeps of them to 1500).
_ARGUMENT_CHARS = 2500
_SLACK_USER = re.compile(r"[UW][A-Z0-9]{2,}")


def request_blocks(data: Mapping[str, Any], settings: Settings) -> list[dict[str, Any]]:
    """The blocks of the request ``data`` describes (an approval outbox row's data), with the
    buttons that decide it."""
    approval = str(data.get("approval", ""))
    buttons = [
        _button("Approve", APPROVE_ACTION, approval, "primary"),
        _button("Deny", DENY_ACTION, approval, "danger"),
    ]
    actions = {"type": "actions", "block_id": APPROVAL_BLOCK, "elements": buttons}
    return [*_request(data, settings), actions]


def decided_blocks(
    data: Mapping[str, Any], settings: Settings, outcome: str
) -> list[dict[str, Any]]:
    """The blocks of the request ``data`` describes once it is closed: the buttons replaced by
    ``outcome`` (mrkdwn, such as "Approved by <@U1>")."""
    line = {"type": "context", "elements": [{"type": "mrkdwn", "text": outcome}]}
    return [*_request(data, settings), line]


def _request(data: Mapping[str, Any], settings: Settings) -> list[dict[str, Any]]:
    approval = data.get("approval", "?")
    tool = escape(str(data.get("tool", "a tool")))
    arguments = json.dumps(dict(data.get("arguments") or {}), ensure_ascii=False, sort_keys=True)
    if len(arguments) > _ARGUMENT_CHARS:
        arguments = arguments[:_ARGUMENT_CHARS] + "…"
    # A fence inside the arguments would end the code block early.
    shown = escape(arguments).replace("```", "`\u200b``")
    lines = [f"*Approval needed* (request #{approval}): run `{tool}` with", f"```{shown}```"]
    asker = str(data.get("requested_by") or "")
    if asker:
        lines.append(f"Asked by {_person(asker)}")
    approve = emoji_name(settings.mcp.approve_reaction)
    deny = emoji_name(settings.mcp.deny_reaction)
    context = (
        f"Who may approve: {escape(str(data.get('approvers') or 'nobody'))} · "
        f"Expires {_when(str(data.get('expires_at') or ''))} · "
        f"or react :{approve}: / :{deny}:"
    )
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": context}]},
    ]


def _button(label: str, action_id: str, value: str, style: str) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": label},
        "style": style,
        "value": value,
    }


def _person(user: str) -> str:
    """A Slack user id as a mention; any other name as text."""
    return f"<@{user}>" if _SLACK_USER.fullmatch(user) else escape(user)


def _when(iso: str) -> str:
    """An ISO UTC time in each reader's own time zone (Slack's date formatting), with the UTC
    time as the fallback text."""
    try:
        at = datetime.fromisoformat(iso)
    except ValueError:
        return escape(iso) or "unknown"
    fallback = f"{at:%Y-%m-%d %H:%M} UTC"
    return f"<!date^{int(at.timestamp())}^{{date_short_pretty}} at {{time}}|{fallback}>"
