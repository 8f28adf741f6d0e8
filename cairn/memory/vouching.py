"""Who may make a memory count: confirmation is a permission, not a click.

A confirmation counts only from a full member of the workspace or room: not the memory's
author, not one of the people a learning was drawn from, not a guest, a bot or someone from
outside (a Slack Connect organisation, an untrusted homeserver). A doubtful memory (flagged as
instruction-like, or from an untrusted author) needs a steward's word (an admin, or someone
named in CAIRN_STEWARDS), or two members' independently. Every confirmation, refusal and undo
is a ``memory_audit`` row, so ``cairn memory show`` tells who vouched for what, and why a
confirmation did not count. See docs/adr/0035-trust-as-a-permission.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, select

from cairn.db.models import MemoryAudit, MemoryRow, utcnow
from cairn.memory.records import CONFIRM, UNCONFIRM, visible_to
from cairn.memory.scope import Scope
from cairn.memory.store import LEARNED, MemoryStore, audit_row

__all__ = [
    "CONFIRM",
    "LEARNED",
    "MEMBERS_NEEDED",
    "REFUSED",
    "UNCONFIRM",
    "Confirmer",
    "Verdict",
    "confirm",
    "unconfirm",
]

REFUSED = "confirm-refused"
# How many members' independent confirmations make a doubtful memory confirmed.
MEMBERS_NEEDED = 2


@dataclass(frozen=True, slots=True)
class Confirmer:
    """Who confirms, as the platform says: ``outsider`` for a guest, a bot or someone from
    outside the workspace (their word never counts); ``steward`` for an admin or one named in
    CAIRN_STEWARDS (their word alone confirms a doubtful memory)."""

    user: str
    outsider: bool = False
    steward: bool = False


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a confirmation did: whether it counted, whether the memory is now confirmed, and
    what to tell the person."""

    counted: bool
    confirmed: bool
    said: str


def confirm(store: MemoryStore, memory_id: int, scope: Scope, by: Confirmer) -> Verdict:
    """Weigh ``by``'s confirmation of the memory ``memory_id`` visible in ``scope``; record
    it (counted or refused) in ``memory_audit``. A memory that is not visible, or retracted,
    is refused without a record."""
    with store.db.session() as s:
        row = s.exec(
            select(MemoryRow).where(MemoryRow.id == memory_id, visible_to(scope, by_id=True))
        ).first()
        if row is None or row.retracted:
            return Verdict(False, False, f"there is no memory #{memory_id} to confirm here")
        refusal = _refusal(s, row, by)
        if refusal is not None:
            s.add(audit_row(row, REFUSED, by.user, scope, {"reason": refusal}))
            return Verdict(False, row.confirmed, refusal)
        vouched = _vouchers(s, row)
        if by.user in vouched:
            return Verdict(False, row.confirmed, "your confirmation is already counted")
        vouched[by.user] = by.steward
        doubtful = row.flagged or row.untrusted
        s.add(
            audit_row(row, CONFIRM, by.user, scope, {"steward": by.steward, "doubtful": doubtful})
        )
        was = row.confirmed
        row.confirmed = _enough(vouched, doubtful=doubtful)
        row.validity += 1.0
        row.updated_at = utcnow()
        s.add(row)
        now = row.confirmed
        members = sum(1 for steward in vouched.values() if not steward)
    if now and not was:
        store.supersede_confirmed(memory_id)
        return Verdict(True, True, "confirmed")
    if now:
        return Verdict(True, True, "already confirmed; your word is counted too")
    return Verdict(
        True,
        False,
        f"counted ({members} of {MEMBERS_NEEDED}): a memory flagged as instruction-like or "
        "from an untrusted author needs a steward or another member to confirm it too",
    )


def unconfirm(store: MemoryStore, memory_id: int, scope: Scope, user: str) -> None:
    """Take back ``user``'s counted confirmation (a removed reaction): recorded, and the memory
    is confirmed only while enough others still vouch for it."""
    with store.db.session() as s:
        row = s.exec(
            select(MemoryRow).where(MemoryRow.id == memory_id, visible_to(scope, by_id=True))
        ).first()
        if row is None:
            return
        vouched = _vouchers(s, row)
        if user not in vouched:
            if row.confirmed and not _confirmations(s, row):
                # Confirmed before confirmations were recorded: undone as it was then.
                row.validity -= 1.0
                row.confirmed = row.validity > 0
                s.add(row)
            return
        del vouched[user]
        s.add(audit_row(row, UNCONFIRM, user, scope, {}))
        row.confirmed = _enough(vouched, doubtful=row.flagged or row.untrusted)
        row.validity -= 1.0
        row.updated_at = utcnow()
        s.add(row)


def _refusal(s: Session, row: MemoryRow, by: Confirmer) -> str | None:
    """Why ``by``'s confirmation of ``row`` cannot count; None when it can."""
    if by.outsider:
        return (
            "a guest's, a bot's or an outside organisation's confirmation does not count; "
            "a member of the team has to confirm it"
        )
    if by.user and by.user == row.author:
        return "you wrote it: someone else has to confirm it"
    if by.user in _sources(s, row):
        return "it was learned from your words: someone else has to confirm it"
    return None


def _sources(s: Session, row: MemoryRow) -> set[str]:
    rows = s.exec(
        select(MemoryAudit.data).where(
            MemoryAudit.memory_id == row.id, MemoryAudit.action == LEARNED
        )
    ).all()
    return {str(p) for data in rows for p in (data or {}).get("from", [])}


def _vouchers(s: Session, row: MemoryRow) -> dict[str, bool]:
    """Who vouches for ``row`` now (each person's latest confirm or unconfirm), and whether
    each did as a steward."""
    acts = s.exec(
        select(MemoryAudit.action, MemoryAudit.actor, MemoryAudit.data)
        .where(
            MemoryAudit.memory_id == row.id,
            col(MemoryAudit.action).in_([CONFIRM, UNCONFIRM]),
        )
        .order_by(col(MemoryAudit.id))
    ).all()
    vouched: dict[str, bool] = {}
    for action, actor, data in acts:
        if action == CONFIRM:
            vouched[actor] = bool((data or {}).get("steward"))
        else:
            vouched.pop(actor, None)
    return vouched


def _confirmations(s: Session, row: MemoryRow) -> bool:
    """Whether any confirmation of ``row`` was recorded."""
    found = s.exec(
        select(MemoryAudit.id).where(MemoryAudit.memory_id == row.id, MemoryAudit.action == CONFIRM)
    ).first()
    return found is not None


def _enough(vouched: dict[str, Any], *, doubtful: bool) -> bool:
    """Whether these vouchers confirm a memory: any one for a plain memory; a steward, or
    MEMBERS_NEEDED people, for a doubtful one."""
    if not doubtful:
        return bool(vouched)
    return any(vouched.values()) or len(vouched) >= MEMBERS_NEEDED
