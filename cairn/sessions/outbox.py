"""The reply outbox: what the bot is to post, written by workers and posted by frontends.

Workers queue ``outbound_message`` rows (:func:`say_in`) in the transaction that closes the
event they answer, each logged in the session too and linked to the memories it used or
announced (``memory_use``, which reaction feedback reads). The frontend that owns the platform
connection reads them in order (:class:`Outbox`), posts them and records the platform's id of
each posted message in ``message_ref`` (Slack: ``channel:ts``; Matrix: the event id; console:
``console:<id>``); only a pending row is marked sent, so two frontends racing on one message
post it once. Reactions name their target by that same ``message_ref``
(:meth:`Outbox.message_at`), which is how feedback finds the memories behind a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, insert, update
from sqlmodel import Session, col, select

from cairn.core.settings import Settings
from cairn.db import Database, insert_values, table
from cairn.db.models import (
    AgentSession,
    EventKind,
    MemoryUse,
    OutboundMessage,
    OutboundStatus,
    utcnow,
)
from cairn.sessions.events import ChatReply
from cairn.sessions.log import EventLog

__all__ = ["Outbox", "Said", "as_reply", "message_at", "say_in"]


@dataclass(frozen=True, slots=True)
class Said:
    """One message the bot is to post.

    ``kind`` is reply, notice, error, ack or approval (a request for a person's approval,
    whose ``data`` names it); ``memories`` are (memory id, role) pairs, the role "used" or
    "announced", recorded so that a reaction to the message acts on those memories.
    """

    kind: str
    text: str
    memories: tuple[tuple[int, str], ...] = ()
    data: dict[str, Any] = field(default_factory=dict, compare=False)


def say_in(
    s: Session,
    session: AgentSession,
    cause: int,
    said: Sequence[Said],
    *,
    agent: str,
    in_reply_to: str | None = None,
) -> None:
    """Log each message of ``said`` in the session and queue it in the outbox, in order,
    inside the caller's transaction (so it is posted once, or not at all).

    ``cause`` is the event the messages answer (their rows are unique per cause and position,
    so a second run of the same work writes nothing new); ``in_reply_to`` is the platform id
    of the message they answer, when there is one.
    """
    sid = session.id or 0
    for seq, item in enumerate(said):
        kind = EventKind.REPLY if item.kind == "reply" else EventKind.NOTICE
        EventLog.append_in(
            s,
            sid,
            session.tenant_id,
            kind,
            text=item.text,
            agent=agent,
            data={"cause": cause, "kind": item.kind, **item.data},
        )
        row = insert_values(
            s,
            OutboundMessage,
            session_id=sid,
            cause_event_id=cause,
            seq=seq,
            tenant_id=session.tenant_id,
            platform=session.platform,
            channel=session.channel,
            thread_ref=session.thread_ref,
            kind=item.kind,
            agent=agent,
            text=item.text,
            data=item.data,
            in_reply_to=in_reply_to or "",
        )
        uses = [
            {"outbound_id": row["id"], "memory_id": memory_id, "role": role}
            for memory_id, role in dict.fromkeys(item.memories)
        ]
        if uses:  # one statement for all of them, not one ORM insert each (about 5 a reply)
            s.connection().execute(insert(table(MemoryUse)), uses)


def message_at(db: Database, tenant: str, message_ref: str) -> OutboundMessage | None:
    """The bot message a platform knows as ``message_ref`` in ``tenant``, if it is one."""
    with db.session() as s:
        return s.exec(
            select(OutboundMessage).where(
                OutboundMessage.tenant_id == tenant,
                OutboundMessage.message_ref == message_ref,
            )
        ).first()


def as_reply(row: OutboundMessage) -> ChatReply:
    """The ChatReply an outbox row asks a frontend to post."""
    return ChatReply(
        platform=row.platform,
        tenant=row.tenant_id,
        channel=row.channel,
        thread=row.thread_ref,
        text=row.text,
        kind=row.kind,
        agent=row.agent,
        outbound_id=row.id,
        # Rows written before migration 0016 kept it in their data.
        in_reply_to=row.in_reply_to or str(row.data.get("in_reply_to", "")),
        data=dict(row.data),
    )


class Outbox:
    """Pending bot messages of one platform, oldest first.

    With ``settings``, only the messages of the agents this process's bot identity speaks for
    (:meth:`~cairn.core.settings.Settings.speaks_for`): a deployment may give an agent a bot
    identity of its own, served by its own frontend.
    """

    def __init__(self, db: Database, platform: str, settings: Settings | None = None) -> None:
        self.db = db
        self.platform = platform
        self._only: str | None = None
        self._skip: list[str] = []
        if settings is not None:
            self._only = settings.identity_agent
            self._skip = [n for n, spec in settings.agents.items() if spec.own_identity]

    def pending(
        self, *, tenant: str | None = None, cause: int | None = None, limit: int = 100
    ) -> list[OutboundMessage]:
        """Messages still to post, in the order they were written."""
        with self.db.session() as s:
            query = select(OutboundMessage).where(
                OutboundMessage.platform == self.platform,
                OutboundMessage.status == OutboundStatus.PENDING,
            )
            if tenant is not None:
                query = query.where(OutboundMessage.tenant_id == tenant)
            if self._only is not None:
                query = query.where(OutboundMessage.agent == self._only)
            elif self._skip:
                query = query.where(col(OutboundMessage.agent).not_in(self._skip))
            if cause is not None:
                query = query.where(OutboundMessage.cause_event_id == cause)
            return list(s.exec(query.order_by(col(OutboundMessage.id)).limit(limit)).all())

    def replies(
        self, *, tenant: str | None = None, cause: int | None = None, limit: int = 100
    ) -> list[ChatReply]:
        """:meth:`pending`, as the ChatReply objects a frontend posts."""
        return [as_reply(row) for row in self.pending(tenant=tenant, cause=cause, limit=limit)]

    def count_pending(self) -> int:
        """How many messages of the platform wait to be posted, whichever agent says them."""
        with self.db.session() as s:
            return int(
                s.exec(
                    select(func.count())
                    .select_from(OutboundMessage)
                    .where(
                        OutboundMessage.platform == self.platform,
                        OutboundMessage.status == OutboundStatus.PENDING,
                    )
                ).one()
            )

    def mark_sent(self, outbound_id: int, message_ref: str | None) -> bool:
        """Record that the message was posted as ``message_ref``; False if it was already sent.

        Only a pending row changes, so two frontends racing on one message post it once.
        """
        with self.db.session() as s:
            result = s.exec(
                update(OutboundMessage)
                .where(
                    col(OutboundMessage.id) == outbound_id,
                    col(OutboundMessage.status) == OutboundStatus.PENDING,
                )
                .values(status=OutboundStatus.SENT, sent_at=utcnow(), message_ref=message_ref)
            )
            return bool(result.rowcount)

    def mark_failed(self, outbound_id: int, error: str, *, give_up: bool) -> None:
        """Count a failed attempt; after ``give_up`` the message is not retried."""
        with self.db.session() as s:
            row = s.get(OutboundMessage, outbound_id)
            if row is None:
                return
            row.attempts += 1
            row.last_error = error[:1000]
            if give_up:
                row.status = OutboundStatus.FAILED
            s.add(row)
