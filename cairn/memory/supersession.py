"""Facts that change: a newer value of the same thing ends the older one, which is kept.

When a memory's claim (:mod:`cairn.memory.claims`) gives another value for a subject an older
memory of the same partition (tenant, owner, conversation: ``scope_key``) gave a value for, the
older one gets an end of validity (``valid_until``, the newer one's ``created_at``) and names
its replacement (``superseded_by``). Nothing is deleted: the older memory stays for audit and
for "who was it on the 3rd?". Recall multiplies a superseded memory's rank down unless the
question names a time it was valid at (see :func:`stale`), and what the model is shown says
when it changed (:func:`change_note`).

The rule decides alone; a :data:`Judge` (a model, say) can veto or confirm each pairing the
rule makes, and is asked nothing the rule did not pair.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from cairn.db.models import MemoryRow
from cairn.memory.claims import Claim, claim_of
from cairn.memory.periods import Period
from cairn.memory.records import Memory

__all__ = ["Judge", "as_of", "change_note", "reassert", "reopen", "stale", "supersede"]

# (older text, newer text) -> True: the newer replaces the older; False: both stay current;
# None: the rule's reading stands.
Judge = Callable[[str, str], bool | None]

# The most memories of one subject looked at on a write: a long history is read newest first.
_HISTORY = 500


def supersede(
    s: Session,
    row: MemoryRow,
    claim: Claim,
    judge: Judge | None = None,
    *,
    replaces: bool = True,
) -> list[int]:
    """Apply ``row``'s ``claim`` to the other memories of its subject and partition, in ``s``.

    Every older memory still current at ``row.created_at`` with another value ends then,
    replaced by ``row`` (unless not ``replaces``: a doubtful memory ends nothing until a person
    confirms it); and when a newer memory with another value exists already (an import of
    older facts, a restore), ``row`` itself ends when that one began. Returns the ids of the
    memories ended.
    """
    assert row.id is not None
    ended: list[int] = []
    at = row.created_at
    successor: MemoryRow | None = None
    for other in _history(s, row):
        value = _value(other, claim)
        if value is None or value == claim.value:
            continue  # the same value restated: both stay current
        if _before(other, row):
            if (
                replaces
                and (other.valid_until is None or other.valid_until > at)
                and _agreed(judge, other.text, row.text)
            ):
                other.valid_until, other.superseded_by = at, row.id
                s.add(other)
                ended.append(other.id or 0)
        elif (successor is None or _before(other, successor)) and _agreed(
            judge, row.text, other.text
        ):
            successor = other
    if successor is not None:
        row.valid_until, row.superseded_by = successor.created_at, successor.id
        s.add(row)
    return ended


def reassert(s: Session, row: MemoryRow, at: datetime, judge: Judge | None = None) -> list[int]:
    """``row``'s exact text said again at ``at``, after a newer value replaced it: it is current
    again, and the values that replaced it end at ``at``. Returns the ids of those ended.

    The text is one row (the dedupe key is the text), so its first period of validity is not
    kept apart: an "as of" question in between sees both values.
    """
    if row.valid_until is None or at < row.valid_until:
        return []
    claim = claim_of(row.text, row.kind)
    if claim is None or claim.subject != row.subject:
        return []
    ended: list[int] = []
    for other in _history(s, row):
        value = _value(other, claim)
        current = other.valid_until is None or other.valid_until > at
        if value is None or value == claim.value or not current or other.created_at > at:
            continue
        if _agreed(judge, other.text, row.text):
            other.valid_until, other.superseded_by = at, row.id
            s.add(other)
            ended.append(other.id or 0)
    row.valid_until, row.superseded_by = None, None
    s.add(row)
    return ended


def reopen(s: Session, row: MemoryRow) -> None:
    """``row`` retracted: the memories it replaced take its place (they end when it ended, or
    stay current), since a retracted value never replaced anything."""
    if not row.subject or row.id is None:
        return
    for other in _history(s, row, retracted=True):
        if other.superseded_by == row.id:
            other.valid_until, other.superseded_by = row.valid_until, row.superseded_by
            s.add(other)


def as_of(periods: Sequence[Period]) -> tuple[datetime, ...]:
    """The instants a question "as of" ``periods`` asks about: the middle of each (a named day
    is a period with a day's margin either side, so its middle is that day's noon)."""
    return tuple(p.start + (p.end - p.start) / 2 for p in periods)


def valid_at(row: Any, when: datetime) -> bool:
    """Whether the memory ``row`` held at ``when``: written by then and not yet replaced."""
    return row.created_at <= when and (row.valid_until is None or row.valid_until > when)


def stale(row: Any, instants: Sequence[datetime]) -> bool:
    """Whether recall ranks the memory ``row`` down as out of date.

    Without a time in the question: when a newer value replaced it. With one ("who was the
    on-call on 3 November 2026?"): a fact (a memory with a subject) that did not hold then,
    whether replaced before or written after; one that held then is not stale, replaced or not.
    """
    if not instants:
        return row.valid_until is not None
    return bool(row.subject) and not any(valid_at(row, when) for when in instants)


def change_note(
    memory: Memory, replaced_by: Memory | None = None, replaced: Memory | None = None
) -> str:
    """What the model is told of a recalled memory's place in a change: "superseded: valid
    until 2026-11-03, replaced by #12: ..." or "current since 2026-11-03, was #9: ...";
    "" for a memory that neither replaced nor was replaced. ``replaced_by`` and ``replaced``
    are those of a :class:`~cairn.memory.recall.Recalled`."""
    m = memory
    if m.valid_until is not None:
        note = f"superseded: valid until {m.valid_until.date().isoformat()}"
        if replaced_by is not None:
            text = json.dumps(replaced_by.text, ensure_ascii=False)
            note += f", replaced by #{replaced_by.id}: {text}"
        return note
    if replaced is not None:
        text = json.dumps(replaced.text, ensure_ascii=False)
        return f"current since {m.created_at.date().isoformat()}, was #{replaced.id}: {text}"
    return ""


def _history(s: Session, row: MemoryRow, *, retracted: bool = False) -> Sequence[MemoryRow]:
    """The other memories of ``row``'s subject in its partition, newest first."""
    query = select(MemoryRow).where(
        MemoryRow.tenant_id == row.tenant_id,
        MemoryRow.scope_key == row.scope_key,
        MemoryRow.subject == row.subject,
        col(MemoryRow.id) != row.id,
    )
    if not retracted:
        query = query.where(col(MemoryRow.retracted).is_(False))
    return s.exec(query.order_by(col(MemoryRow.id).desc()).limit(_HISTORY)).all()


def _value(other: MemoryRow, claim: Claim) -> str | None:
    """The value ``other`` gives for ``claim``'s subject; None when the rule no longer reads
    it so (the rule may have changed since it was stored)."""
    found = claim_of(other.text, other.kind)
    return found.value if found is not None and found.subject == claim.subject else None


def _before(a: MemoryRow, b: MemoryRow) -> bool:
    return (a.created_at, a.id or 0) < (b.created_at, b.id or 0)


def _agreed(judge: Judge | None, older: str, newer: str) -> bool:
    if judge is None:
        return True
    return judge(older, newer) is not False
