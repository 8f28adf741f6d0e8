"""The reply outbox as frontends see it: what is waiting to be posted, and recording the post.

Workers write ``outbound_message`` rows; the frontend that owns the platform connection posts
them in order and records the platform's id of each posted message in ``message_ref`` (Slack:
``channel:ts``; Matrix: the event id; console: ``console:<id>``). Reactions name their target by
that same ``message_ref``, which is how feedback finds the memories behind a message.
"""

from __future__ import annotations

from sqlalchemy import update
from sqlmodel import col, select

from cairn.core.settings import Settings
from cairn.db import Database
from cairn.db.models import OutboundMessage, OutboundStatus, utcnow
from cairn.sessions.events import ChatReply

__all__ = ["Outbox", "as_reply"]


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
        in_reply_to=str(row.data.get("in_reply_to", "")),
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
