"""The platform id of the message a reply answers is kept as an identifier, not gated text."""

from __future__ import annotations

import uuid

from sqlalchemy import update

from cairn.db import Database
from cairn.db.models import EventKind, OutboundMessage
from cairn.sessions.log import EventLog, ThreadRef
from cairn.sessions.outbox import Outbox, Said, as_reply, say_in

REF = ThreadRef("slack", "T1", "C1", "1700000000.000100")


def _queue(db: Database, in_reply_to: str | None) -> OutboundMessage:
    log = EventLog(db)
    session = log.open_session(REF, "ops")
    cause = log.append(session.id or 0, REF.tenant, EventKind.MESSAGE, text="status?")
    with db.session() as s:
        say_in(
            s,
            session,
            cause.id or 0,
            [Said("reply", "all green")],
            agent="ops",
            in_reply_to=in_reply_to,
        )
    [row] = Outbox(db, "slack").pending()
    return row


def test_the_answered_message_id_is_copied_as_it_is_even_when_it_looks_like_a_token(
    database: Database,
) -> None:
    # A platform's id is whatever the platform chose; one shaped like a token is still an id,
    # and masking it would send the reply to no message.
    ref = "ghp_" + uuid.uuid4().hex + "AbCd"
    row = _queue(database, ref)
    assert row.in_reply_to == ref
    assert "in_reply_to" not in row.data
    assert as_reply(row).in_reply_to == ref


def test_a_reply_to_nothing_has_an_empty_ref(database: Database) -> None:
    assert as_reply(_queue(database, None)).in_reply_to == ""


def test_a_row_queued_before_the_column_existed_is_read_from_its_data(
    database: Database,
) -> None:
    row = _queue(database, None)
    with database.session() as s:
        s.execute(
            update(OutboundMessage)
            .where(OutboundMessage.id == row.id)  # type: ignore[arg-type]
            .values(data={"in_reply_to": "1700000000.000100"})
        )
        s.commit()
    [old] = Outbox(database, "slack").pending()
    assert old.in_reply_to == ""
    assert as_reply(old).in_reply_to == "1700000000.000100"
