"""What a memory is to its callers, and the rules every write and read of one applies.

:class:`Memory` is a detached copy of a row; :func:`checked_memory` is every check a write
applies to a text; :func:`content_hash` is the dedupe key; :func:`visible_to` is the condition
every read applies, so no query can return a row of another tenant or another agent's private
memory.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, and_, or_
from sqlmodel import col

from cairn.core.errors import InvalidInput
from cairn.core.gate import gate
from cairn.core.secrets import SECRET_MARK
from cairn.core.text import clean_text, pieces
from cairn.db.models import MemoryRow
from cairn.memory.scope import Scope, Visibility

__all__ = [
    "MAX_MEMORY_CHARS",
    "MAX_WRITE_CHARS",
    "MEMORY_KINDS",
    "Memory",
    "checked_memory",
    "content_hash",
    "may_confirm",
    "may_retract",
    "memory_parts",
    "memory_status",
    "visible_to",
]

MAX_MEMORY_CHARS = 2000
# A longer text (a pasted log, a long message) is kept as linked memories of at most
# MAX_MEMORY_CHARS each (memory_parts); this bounds only what one write may hold, far above
# what a chat message can be (Slack: 40,000 characters; Matrix: 65,536 bytes an event).
MAX_WRITE_CHARS = 200_000
MEMORY_KINDS = ("fact", "preference", "decision", "pattern", "mistake", "constraint", "episode")


@dataclass(frozen=True, slots=True)
class Memory:
    """A memory as callers see it (a detached copy of its row)."""

    id: int
    tenant: str
    agent: str | None
    visibility: str
    kind: str
    text: str
    author: str
    source_thread: str
    created_at: datetime
    recall_count: int
    validity: float
    usefulness: float
    confirmed: bool
    disputes: int
    retracted: bool
    tier: str = "hot"
    updated_at: datetime | None = None
    last_recalled_at: datetime | None = None
    merges: int = 0
    untrusted: bool = False
    flagged: bool = False
    private_to: str | None = None
    retracted_by: str = ""
    retracted_at: datetime | None = None
    subject: str = ""  # what a fact gives a value for (cairn.memory.claims); "" for none
    valid_until: datetime | None = None  # replaced then by a newer value (superseded_by)
    superseded_by: int | None = None
    source_message: str = ""  # the platform's id of the message it was learned from
    source_conversation: str = ""  # the name of the conversation it was said in ("#ops")

    @classmethod
    def from_row(cls, row: MemoryRow | Row[Any]) -> Memory:
        """Copy the fields of ``row`` (a model, or a row selected from the memory table)."""
        assert row.id is not None
        return cls(
            id=row.id,
            tenant=row.tenant_id,
            agent=row.agent,
            visibility=row.visibility,
            kind=row.kind,
            text=row.text,
            author=row.author,
            source_thread=row.source_thread,
            created_at=row.created_at,
            recall_count=row.recall_count,
            validity=row.validity,
            usefulness=row.usefulness,
            confirmed=row.confirmed,
            disputes=row.disputes,
            retracted=row.retracted,
            tier=row.tier,
            updated_at=row.updated_at,
            last_recalled_at=row.last_recalled_at,
            merges=row.merges,
            untrusted=row.untrusted,
            flagged=row.flagged,
            private_to=row.private_to,
            retracted_by=row.retracted_by,
            retracted_at=row.retracted_at,
            subject=row.subject,
            valid_until=row.valid_until,
            superseded_by=row.superseded_by,
            source_message=getattr(row, "source_message", "") or "",
            source_conversation=getattr(row, "source_conversation", "") or "",
        )


# The audit actions of a confirmation and of its undoing (cairn.memory.vouching).
CONFIRM = "confirm"
UNCONFIRM = "unconfirm"


def vouchers(acts: Iterable[tuple[str, str]]) -> list[str]:
    """Who vouches for a memory now, in order: each person whose latest of ``acts`` (audit
    actions and actors, oldest first) is a confirmation."""
    now: dict[str, bool] = {}
    for action, actor in acts:
        if action == CONFIRM:
            now[actor] = True
        elif action == UNCONFIRM:
            now.pop(actor, None)
    return list(now)


def memory_status(memory: Memory) -> str:
    """A memory's standing in a few words, as people and the model are shown it."""
    if memory.retracted:
        return "retracted"
    if memory.valid_until is not None:
        return f"superseded on {memory.valid_until.date().isoformat()}"
    if memory.confirmed:
        return "confirmed"
    if memory.flagged:
        return "unconfirmed, flagged as instruction-like"
    if memory.untrusted:
        return "unconfirmed, from an untrusted author"
    return "unconfirmed"


def may_retract(memory: Memory, user: str, *, admin: bool) -> bool:
    """Whether ``user`` may retract ``memory`` (anyone else's retract is a dispute): its
    author, or an admin (a platform admin, or one named in CAIRN_ADMINS)."""
    return admin or not memory.author or memory.author == user


def may_confirm(memory: Memory, user: str, *, admin: bool) -> bool:
    """Whether ``user``'s confirmation of ``memory`` counts: a flagged memory, or one from an
    untrusted author, needs the word of someone other than its author (or an admin's)."""
    return admin or not (memory.flagged or memory.untrusted) or memory.author != user


def content_hash(text: str) -> str:
    """The dedupe key of a memory's text: case, spacing and final punctuation do not count."""
    folded = re.sub(r"\s+", " ", text.casefold()).strip().rstrip(".!?;: ")
    return hashlib.sha256(folded.encode()).hexdigest()


def visible_to(scope: Scope, *, by_id: bool = False) -> ColumnElement[bool]:
    """The SQL condition every read path applies: same tenant; shared or the agent's own; and
    the workspace's or private to the scope's own conversation (fail closed: a scope that names
    no private conversation sees none).

    ``by_id`` is for reads of a few rows by primary key: the same condition, written so that
    SQLite's planner looks the ids up instead of scanning the tenant's index (35 ms instead of
    under 1 ms at 100,000 memories).
    """
    tenant = col(MemoryRow.tenant_id) + "" if by_id else col(MemoryRow.tenant_id)
    conditions = [
        tenant == scope.tenant,
        or_(
            col(MemoryRow.visibility).in_([Visibility.TEAM.value, Visibility.PUBLIC.value]),
            col(MemoryRow.agent) == scope.agent,
        ),
    ]
    if not scope.every_conversation:
        room = col(MemoryRow.private_to)
        conditions.append(
            (
                room == scope.private_to
                if scope.isolated
                else or_(room.is_(None), room == scope.private_to)
            )
            if scope.private_to
            else room.is_(None)
        )
    return and_(*conditions)


# The kinds named in the markers cairn.core.secrets.removed writes: "[secret removed: password]".
_REMOVED = re.compile(re.escape(SECRET_MARK) + r" ([^\]]{1,60})\]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def memory_parts(text: str, kind: str) -> list[str]:
    """``text`` as the memories of ``kind`` that hold it: itself when it fits in one, else
    pieces of at most MAX_MEMORY_CHARS cut at sentence ends, each marked "(part i/n)".

    The whole text passes :func:`checked_memory` before it is cut, so a credential that a cut
    would split is still found. Raises InvalidInput as that does, for a text over
    MAX_WRITE_CHARS among others.
    """
    whole = checked_memory(text, kind, limit=MAX_WRITE_CHARS)
    if len(whole) <= MAX_MEMORY_CHARS:
        return [text]
    marker = len("(part 999/999) ")
    found = pieces(whole, MAX_MEMORY_CHARS - marker)
    return [f"(part {i}/{len(found)}) {piece}" for i, piece in enumerate(found, 1)]


def checked_memory(text: str, kind: str, *, limit: int = MAX_MEMORY_CHARS) -> str:
    """``text`` as a memory of ``kind`` is stored (cleaned), after every check a write applies.

    Raises InvalidInput for empty text or text over ``limit`` characters, control characters,
    unknown kinds, and text that holds a credential (or the marker of one removed from a
    message): secrets are never memories. The message names the kind of secret, never the
    secret. An episode (a turn of a conversation, kept as said) is the exception: it is a
    record of a message, which the session log keeps with its credentials masked, so it is
    kept masked the same way rather than refused (a detector's false alarm on a long turn
    would otherwise lose the whole turn).
    """
    text = _validated_text(text, limit)
    gated = gate(text)
    kinds = sorted(set(gated.secrets))
    text = gated.text.strip()
    if kind == "episode":
        return text
    removed = sorted(set(_REMOVED.findall(text)) - set(kinds))
    if kinds or removed or SECRET_MARK in text:
        what = ", ".join(kinds + [f"{k}, removed from the message" for k in removed])
        raise InvalidInput(
            f"not stored: it holds what looks like a secret{f' ({what})' if what else ''}. "
            "Secrets are never kept as memories; keep it in a secret manager, and rotate it if "
            "it was real"
        )
    if kind not in MEMORY_KINDS:
        raise InvalidInput(f"unknown memory kind {kind!r}; use one of {', '.join(MEMORY_KINDS)}")
    return text


def _validated_text(text: str, limit: int) -> str:
    control = _CONTROL.search(text)
    if control is not None:
        raise InvalidInput(
            f"a memory cannot contain control characters (found {control.group()!r} at "
            f"position {control.start()}); remove them and try again"
        )
    cleaned = clean_text(text)
    if not cleaned:
        raise InvalidInput("nothing to remember: the text is empty")
    if len(cleaned) > limit:
        raise InvalidInput(
            f"a memory holds at most {limit} characters; this one has {len(cleaned)}. "
            "Keep the essential fact."
        )
    return cleaned
