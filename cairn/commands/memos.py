"""``cairn memo list|send|ack``: memos between agents, from the command line."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from datetime import datetime, timedelta

import click

from cairn.commands.common import Bounded, name_checker
from cairn.core.errors import CairnError, InvalidInput
from cairn.core.settings import get_settings
from cairn.db import Database
from cairn.db.models import utcnow
from cairn.memos.box import Memo, MemoBox

__all__ = ["memo"]

_DURATION = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_expiry(text: str | None) -> datetime | None:
    """``30m``, ``12h``, ``2d``, ``1w`` from now; raises InvalidInput otherwise."""
    if text is None:
        return None
    match = _DURATION.match(text.strip().lower())
    if not match:
        raise InvalidInput(f"--expires takes a duration like 30m, 12h, 2d or 1w, not {text!r}")
    return utcnow() + timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def _box() -> tuple[MemoBox, str]:
    settings = get_settings()
    db = Database(settings.effective_database_url)
    db.migrate()
    return MemoBox(db), settings.console_tenant


def _show(memo: Memo) -> str:
    state = "acked" if memo.acknowledged else ("read" if memo.read else "new")
    expiry = f", expires {memo.expires_at:%Y-%m-%d %H:%M}" if memo.expires_at else ""
    asked = f" (asked by {memo.asked_by})" if memo.asked_by else ""
    flagged = ", flagged as instruction-like" if memo.flagged else ""
    return (
        f"#{memo.id} [{state}, priority {memo.priority}{expiry}{flagged}] "
        f"{memo.sender}{asked} -> {memo.recipient}: {memo.text}"
    )


@click.group()
def memo() -> None:
    """Memos between agents: durable notes delivered into an agent's next prompt."""


@memo.command("send")
@click.argument("text")
@click.option(
    "--to",
    "recipient",
    required=True,
    callback=name_checker("agent"),
    help="Agent name, or * for every agent.",
)
@click.option(
    "--from",
    "sender",
    default="operator",
    show_default=True,
    callback=name_checker("user"),
    help="Who sends it.",
)
@click.option(
    "--priority",
    default=0,
    show_default=True,
    type=Bounded("--priority", low=-10, high=10),
    help="-10 (low) to 10 (urgent).",
)
@click.option("--expires", default=None, help="Stop delivering after 30m, 12h, 2d, 1w...")
@click.option(
    "--tenant",
    default=None,
    callback=name_checker("tenant"),
    help="Workspace (default: the console's).",
)
@click.option("--json", "as_json", is_flag=True)
def send(
    text: str,
    recipient: str,
    sender: str,
    priority: int,
    expires: str | None,
    tenant: str | None,
    as_json: bool,
) -> None:
    """Send TEXT to an agent (or to all agents with --to '*').

    \b
    Example:
      cairn memo send --to review --priority 5 --expires 3d "deploys are frozen until Monday"
    """
    try:
        box, default_tenant = _box()
        sent = box.send(
            tenant or default_tenant,
            sender,
            recipient,
            text,
            priority=priority,
            expires_at=parse_expiry(expires),
        )
    except CairnError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(json.dumps(asdict(sent), default=str) if as_json else f"sent {_show(sent)}")


@memo.command("list")
@click.option("--agent", required=True, callback=name_checker("agent"), help="Whose inbox.")
@click.option("--all", "everything", is_flag=True, help="Include acknowledged memos.")
@click.option(
    "--tenant",
    default=None,
    callback=name_checker("tenant"),
    help="Workspace (default: the console's).",
)
@click.option("--json", "as_json", is_flag=True)
def list_memos(agent: str, everything: bool, tenant: str | None, as_json: bool) -> None:
    """List the memos waiting for AGENT, highest priority first (expired ones are gone)."""
    try:
        box, default_tenant = _box()
        memos = box.inbox(
            tenant or default_tenant,
            agent,
            include_acknowledged=everything,
            limit=1000,
            every_conversation=True,  # an operator's view: private conversations' memos too
        )
    except CairnError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps([asdict(m) for m in memos], default=str))
    elif not memos:
        click.echo(f"no memos for {agent}")
    for m in memos if not as_json else []:
        click.echo(_show(m))


@memo.command("ack")
@click.argument("memo_id", type=Bounded("a memo id"))
@click.option(
    "--agent",
    required=True,
    callback=name_checker("agent"),
    help="The recipient acknowledging it.",
)
@click.option(
    "--tenant",
    default=None,
    callback=name_checker("tenant"),
    help="Workspace (default: the console's).",
)
def ack(memo_id: int, agent: str, tenant: str | None) -> None:
    """Mark memo MEMO_ID as dealt with by AGENT (it is no longer delivered to it)."""
    try:
        box, default_tenant = _box()
        done = box.acknowledge(tenant or default_tenant, agent, memo_id, every_conversation=True)
    except CairnError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"acknowledged {_show(done)}")
