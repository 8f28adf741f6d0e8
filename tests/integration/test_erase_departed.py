"""CAIRN_ERASE_DEPARTED (issue 34, docs/adr/0043): Slack's ``user_change`` for a deleted
account erases that person, through the Slack frontend on the stand-ins; off, it erases
nothing."""

from __future__ import annotations

import pytest
from sqlmodel import select

from cairn.bot.departed import DEPARTED_BY
from cairn.db.models import Erasure, MemoryRow
from tests.support.slack_api import BOT_USER, event_payload
from tests.support.slack_harness import Harness, running_slack


def _remembers(h: Harness, user: str, text: str, ts: str) -> None:
    h.post(
        event_payload(
            {
                "type": "app_mention",
                "user": user,
                "text": f"<@{BOT_USER}> remember {text}",
                "ts": ts,
                "channel": "C0PUBLIC",
                "event_ts": ts,
            }
        )
    )


def _departs(h: Harness, user: str) -> None:
    h.post(
        event_payload(
            {"type": "user_change", "user": {"id": user, "team_id": "T0001", "deleted": True}}
        )
    )


def _texts(h: Harness) -> list[str]:
    with h.pipeline.rt.db.session() as s:
        return sorted(m.text for m in s.exec(select(MemoryRow)).all())


@pytest.mark.slow
def test_a_deleted_slack_account_is_erased_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    with running_slack(monkeypatch, CAIRN_ERASE_DEPARTED="true") as h:
        _remembers(h, "UZED", "the gorbanzo queue drains at noon", "1700000001.000100")
        _remembers(h, "UAMY", "the billing queue drains at midnight", "1700000002.000100")
        h.settle()
        assert len(_texts(h)) == 2
        _departs(h, "UZED")
        h.api.wait_for(lambda: len(_texts(h)) == 1, what="the erasure")
        assert _texts(h) == ["the billing queue drains at midnight"]
        with h.pipeline.rt.db.session() as s:
            [audit] = s.exec(select(Erasure)).all()
        assert (audit.person, audit.erased_by, audit.tenant_id) == (
            "UZED",
            DEPARTED_BY,
            "slack:T0001",
        )


@pytest.mark.slow
def test_a_deleted_slack_account_is_kept_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    with running_slack(monkeypatch) as h:
        _remembers(h, "UZED", "the gorbanzo queue drains at noon", "1700000001.000100")
        h.settle()
        _departs(h, "UZED")
        _remembers(h, "UAMY", "the billing queue drains at midnight", "1700000002.000100")
        h.settle()
        assert len(_texts(h)) == 2
