"""Which platform messages a reply is being streamed into (``streamed_reply``, ADR 0027).

A frontend that shows an answer as it is written records each message it opens for the reply
before it shows any more of it. Whoever posts the reply from the outbox then edits those
messages into the final text instead of posting new ones: the person sees one answer, also
when the worker was killed mid-stream or the frontend restarted in between. Rows go once the
reply is posted.
"""

from __future__ import annotations

from sqlalchemy import delete

from cairn.db import Database, table
from cairn.db.models import StreamedReply, utcnow

__all__ = ["StreamedReplies"]


class StreamedReplies:
    """The ``streamed_reply`` table."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def record(self, cause: int, tenant: str, platform: str, refs: list[str]) -> None:
        """Note that the reply to event ``cause`` is shown in ``refs``, in order (replacing
        what was noted before). Raises if the database cannot say so."""
        with self.db.session() as s:
            row = s.get(StreamedReply, cause)
            if row is None:
                row = StreamedReply(cause_event_id=cause, tenant_id=tenant, platform=platform)
            row.data = {"refs": list(refs)}
            row.updated_at = utcnow()
            s.add(row)

    def refs(self, cause: int) -> list[str]:
        """The messages the reply to event ``cause`` was streamed into (empty: none)."""
        with self.db.session() as s:
            row = s.get(StreamedReply, cause)
            return [str(r) for r in row.data.get("refs", [])] if row is not None else []

    def forget(self, cause: int) -> None:
        """The reply to ``cause`` is posted: its streamed messages need no more care."""
        replies = table(StreamedReply)
        with self.db.session() as s:
            s.execute(delete(replies).where(replies.c.cause_event_id == cause))
