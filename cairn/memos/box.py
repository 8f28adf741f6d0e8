"""Memos between agents: durable notes to one agent or to all agents of a tenant.

A memo has a priority and an optional expiry; each recipient has its own read and acknowledged
state. Expired memos are never delivered; upkeep deletes them CAIRN_MEMO_KEEP_EXPIRED seconds
after they expire.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from sqlalchemy import BindParameter, Select, and_, bindparam, delete, or_
from sqlalchemy import select as sa_select
from sqlmodel import col, select

from cairn.core.errors import InvalidInput, NotFound
from cairn.core.gate import gate
from cairn.db import Database, ensure_tenant, table
from cairn.db.models import MemoReceipt, MemoRow, utcnow

__all__ = ["ALL_AGENTS", "MAX_MEMO_CHARS", "Memo", "MemoBox"]

ALL_AGENTS = "*"
MAX_MEMO_CHARS = 4000
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


@dataclass(frozen=True, slots=True)
class Memo:
    """A memo as one recipient sees it."""

    id: int
    tenant: str
    sender: str
    recipient: str
    text: str
    priority: int
    created_at: datetime
    expires_at: datetime | None
    read: bool
    acknowledged: bool
    asked_by: str = ""  # the person whose turn made an agent send it
    flagged: bool = False  # reads like an instruction to the assistant


class MemoBox:
    """Sends memos and keeps each recipient's inbox."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def send(
        self,
        tenant: str,
        sender: str,
        recipient: str,
        text: str,
        *,
        priority: int = 0,
        expires_at: datetime | None = None,
        private_to: str | None = None,
        asked_by: str = "",
    ) -> Memo:
        """Store a memo to ``recipient`` (an agent name, or ``*`` for every agent); one sent
        from a private conversation (``private_to``, its channel) is shown only there.

        It passes the gate (credentials masked, only what people see) and the instruction
        detector: one that reads as an instruction to the assistant is stored flagged, and its
        recipient is shown it so. ``asked_by`` is the person whose turn made an agent send it:
        a memo is their word, not the agent's.

        Raises InvalidInput for an empty or oversized text, a malformed recipient, a priority
        outside -10..10, or an expiry in the past.
        """
        gated = gate(text)  # credentials masked, what people see: no secret travels
        text = gated.text.strip()
        if not text:
            raise InvalidInput("a memo needs some text")
        if len(text) > MAX_MEMO_CHARS:
            raise InvalidInput(f"a memo holds at most {MAX_MEMO_CHARS} characters, not {len(text)}")
        if recipient != ALL_AGENTS and not _NAME.match(recipient):
            raise InvalidInput(
                f"memo recipient {recipient!r} is not an agent name (lower-case letters, digits, "
                "- and _) or * for all agents"
            )
        if not -10 <= priority <= 10:
            raise InvalidInput("memo priority must be between -10 and 10")
        if expires_at is not None and expires_at <= utcnow():
            raise InvalidInput("a memo's expiry must be in the future")
        with self.db.session() as s:
            ensure_tenant(s, tenant, tenant.split(":")[0])
            row = MemoRow(
                tenant_id=tenant,
                sender=sender,
                recipient=recipient,
                text=text,
                priority=priority,
                expires_at=expires_at,
                private_to=private_to,
                asked_by=asked_by,
                flagged=gated.instruction is not None,
            )
            s.add(row)
            s.flush()
            return _memo(row)

    def inbox(
        self,
        tenant: str,
        agent: str,
        *,
        include_read: bool = True,
        include_acknowledged: bool = False,
        limit: int = 20,
        only: int | None = None,
        private_to: str | None = None,
        every_conversation: bool = False,
    ) -> list[Memo]:
        """Unexpired memos to ``agent`` (or to all agents), highest priority first, then oldest
        (``only``: just the memo with that id, if it is one of them). Memos sent from a private
        conversation are shown only in it (``private_to``); ``every_conversation`` (an
        operator's view) shows them all."""
        # One query of plain rows, filtered and limited in the database: an agent's old memos
        # (read, acknowledged, never expiring) pile up, and this runs on every turn.
        query = _inbox_query(
            include_read, include_acknowledged, only is not None, not every_conversation
        )
        params = {
            "tenant": tenant,
            "agent": agent,
            "now": utcnow(),
            "limit": limit,
            "only": only,
            "room": private_to or "",
        }
        with self.db.engine.connect() as conn:
            return [
                _memo(row, read=row.read_at is not None, acknowledged=row.acked_at is not None)
                for row in conn.execute(query, params)
            ]

    def mark_read(self, tenant: str, agent: str, memo_ids: list[int]) -> None:
        """Record that ``agent`` has been shown these memos."""
        self._receipt(tenant, agent, memo_ids, acknowledge=False)

    def acknowledge(
        self,
        tenant: str,
        agent: str,
        memo_id: int,
        *,
        private_to: str | None = None,
        every_conversation: bool = False,
    ) -> Memo:
        """Mark a memo as dealt with by ``agent``; raises NotFound if it is not in its inbox
        (as seen from ``private_to``, see :meth:`inbox`)."""

        # Looked up by id: an agent with many memos may acknowledge any of them, not only
        # the first page of its inbox.
        def find() -> list[Memo]:
            return self.inbox(
                tenant,
                agent,
                include_acknowledged=True,
                only=memo_id,
                private_to=private_to,
                every_conversation=every_conversation,
            )

        if not find():
            raise NotFound(f"no memo #{memo_id} for {agent}")
        self._receipt(tenant, agent, [memo_id], acknowledge=True)
        [memo] = find()
        return memo

    def purge_expired(self, *, older_than: timedelta, now: datetime | None = None) -> int:
        """Delete memos whose expiry passed more than ``older_than`` ago, with their receipts.

        An expired memo is already never delivered; this keeps the memo table from growing
        without end. Returns how many memos were deleted, in every tenant.
        """
        cutoff = (now or utcnow()) - older_than
        with self.db.session() as s:
            expired = list(
                s.exec(
                    select(MemoRow.id).where(
                        col(MemoRow.expires_at).is_not(None), col(MemoRow.expires_at) < cutoff
                    )
                ).all()
            )
            if not expired:
                return 0
            s.exec(delete(MemoReceipt).where(col(MemoReceipt.memo_id).in_(expired)))
            s.exec(delete(MemoRow).where(col(MemoRow.id).in_(expired)))
        return len(expired)

    def _receipt(self, tenant: str, agent: str, memo_ids: list[int], *, acknowledge: bool) -> None:
        now = utcnow()
        with self.db.session() as s:
            owned = set(
                s.exec(
                    select(MemoRow.id).where(
                        MemoRow.tenant_id == tenant, col(MemoRow.id).in_(memo_ids)
                    )
                ).all()
            )
            for memo_id in owned:
                assert memo_id is not None
                receipt = s.exec(
                    select(MemoReceipt).where(
                        MemoReceipt.memo_id == memo_id, MemoReceipt.agent == agent
                    )
                ).first() or MemoReceipt(memo_id=memo_id, agent=agent)
                receipt.read_at = receipt.read_at or now
                if acknowledge:
                    receipt.acked_at = receipt.acked_at or now
                s.add(receipt)


@lru_cache(maxsize=16)
def _inbox_query(
    include_read: bool, include_acknowledged: bool, only: bool, private: bool
) -> Select[Any]:
    """The inbox query for one combination of filters, built once; its values are the
    parameters tenant, agent, now, limit, only and room (with ``private``, memos of a private
    conversation other than room are left out)."""
    memos, receipts = table(MemoRow), table(MemoReceipt)
    agent: BindParameter[str] = bindparam("agent")
    query = (
        sa_select(memos, receipts.c.read_at, receipts.c.acked_at)
        .select_from(
            memos.outerjoin(
                receipts, and_(receipts.c.memo_id == memos.c.id, receipts.c.agent == agent)
            )
        )
        .where(
            memos.c.tenant_id == bindparam("tenant"),
            or_(memos.c.recipient == agent, memos.c.recipient == ALL_AGENTS),
            memos.c.sender != agent,
            or_(memos.c.expires_at.is_(None), memos.c.expires_at > bindparam("now")),
        )
    )
    if only:
        query = query.where(memos.c.id == bindparam("only"))
    if private:
        query = query.where(
            or_(memos.c.private_to.is_(None), memos.c.private_to == bindparam("room"))
        )
    if not include_read:
        query = query.where(receipts.c.read_at.is_(None))
    if not include_acknowledged:
        query = query.where(receipts.c.acked_at.is_(None))
    return query.order_by(memos.c.priority.desc(), memos.c.id).limit(bindparam("limit"))


def _memo(row: Any, *, read: bool = False, acknowledged: bool = False) -> Memo:
    """A memo from a ``memo`` row: the ORM object or a plain row of its columns."""
    return Memo(
        id=int(row.id),
        tenant=row.tenant_id,
        sender=row.sender,
        recipient=row.recipient,
        text=row.text,
        priority=row.priority,
        created_at=row.created_at,
        expires_at=row.expires_at,
        read=read,
        acknowledged=acknowledged,
        asked_by=row.asked_by,
        flagged=bool(row.flagged),
    )
