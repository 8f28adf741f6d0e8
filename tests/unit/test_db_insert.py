"""insert_values: one Core insert per row, with the model's own field defaults."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from cairn.db import Database, insert_values
from cairn.db.models import AgentSession, EventStatus, SessionEvent, Tenant


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(f"sqlite:///{tmp_path / 'cairn.db'}")
    database.migrate()
    with database.session() as s:
        s.add(Tenant(id="acme", platform="console"))
        s.flush()
        s.add(
            AgentSession(
                tenant_id="acme", platform="console", channel="c", thread_ref="t", agent="cairn"
            )
        )
    return database


def test_a_row_gets_the_models_defaults_and_its_new_id(db: Database) -> None:
    with db.session() as s:
        written = insert_values(
            s, SessionEvent, session_id=1, tenant_id="acme", seq=1, kind="message", text="hi"
        )
        second = insert_values(s, SessionEvent, session_id=1, tenant_id="acme", seq=2, kind="reply")
    with db.session() as s:
        row = s.get(SessionEvent, written["id"])
    assert row is not None
    assert (row.text, row.status, row.data, row.user, row.event_ref) == (
        "hi",
        EventStatus.DONE,
        {},
        "",
        None,
    )
    assert isinstance(row.created_at, datetime)
    assert second["id"] == written["id"] + 1
    # Factories run per row: two rows never share one mutable default.
    assert second["data"] is not written["data"]


def test_an_unknown_or_missing_field_is_refused_before_anything_is_written(db: Database) -> None:
    with db.session() as s:
        with pytest.raises(TypeError, match=r"unknown fields \['colour'\]"):
            insert_values(
                s, SessionEvent, session_id=1, tenant_id="acme", seq=1, kind="m", colour="red"
            )
        with pytest.raises(TypeError, match=r"missing fields \['seq'\]"):
            insert_values(s, SessionEvent, session_id=1, tenant_id="acme", kind="message")
    with db.session() as s:
        assert s.get(SessionEvent, 1) is None
