"""cairn.db.ensure_tenant: the one way every writer makes sure its tenant row exists."""

from __future__ import annotations

import threading

from sqlmodel import select

from cairn.db import Database, ensure_tenant
from cairn.db.models import Tenant


def test_a_tenant_is_created_once_and_an_existing_one_is_left_as_it_is(database: Database) -> None:
    with database.session() as s:
        ensure_tenant(s, "T1", "slack")
    with database.session() as s:
        ensure_tenant(s, "T1", "matrix")  # exists: nothing changes, nothing fails
    with database.session() as s:
        rows = s.exec(select(Tenant).where(Tenant.id == "T1")).all()
    assert [(t.id, t.platform) for t in rows] == [("T1", "slack")]


def test_writers_creating_the_same_tenant_at_once_all_succeed(database: Database) -> None:
    start = threading.Barrier(6)
    failures: list[BaseException] = []

    def create() -> None:
        try:
            start.wait()
            with database.session() as s:
                ensure_tenant(s, "T-race", "slack")
        except BaseException as exc:
            failures.append(exc)

    writers = [threading.Thread(target=create) for _ in range(6)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(timeout=60)
    assert failures == []
    with database.session() as s:
        assert len(s.exec(select(Tenant).where(Tenant.id == "T-race")).all()) == 1
