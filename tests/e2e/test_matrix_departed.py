"""CAIRN_ERASE_DEPARTED on Matrix (issue 34, docs/adr/0043), against a real Synapse: an account
deactivated on the bot's homeserver is erased when the bot's account is a server admin (only
Synapse's admin API tells a deactivation from a leave); another person's leave erases nothing.

The homeserver and people come from the fixtures of :mod:`tests.e2e.test_matrix`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from urllib.parse import quote

import httpx
import pytest

from cairn.bot.departed import DEPARTED_BY
from cairn.db.models import Erasure, MemoryRow
from tests.e2e.test_matrix import (  # noqa: F401 - synapse is a fixture the others use
    Cairn,
    Person,
    Synapse,
    answers_to,
    people,
    room_with_bot,
    synapse,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def admin_cairn(synapse: Synapse, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cairn]:  # noqa: F811
    """The bot, its account a server admin, with CAIRN_ERASE_DEPARTED on."""
    monkeypatch.setenv("CAIRN_ERASE_DEPARTED", "true")
    account = synapse.register(f"cairn-{secrets.token_hex(3)}", admin=True)
    bot = Cairn(synapse, account, monkeypatch)
    try:
        yield bot
    finally:
        bot.stop()


def test_a_deactivated_account_is_erased_and_a_leave_is_not(
    admin_cairn: Cairn,
    people: Callable[[str], Person],  # noqa: F811
    synapse: Synapse,  # noqa: F811
) -> None:
    admin_cairn.start()
    zed, amy = people("zed"), people("amy")
    room = room_with_bot(amy, admin_cairn, public=True)
    zed.call("POST", f"/join/{quote(room)}", {})
    said = {}
    for person, text in (
        (zed, "the gorbanzo queue drains at noon"),
        (amy, "the kettle cache is warm"),
    ):
        said[person.id] = person.send(room, f"remember {text}", mention=admin_cairn.id)
        wait_for(
            "the bot's notice", lambda p=person: answers_to(p, room, admin_cairn.id, said[p.id])
        )
    texts = lambda: sorted(m.text for m in admin_cairn.db_rows(MemoryRow))  # noqa: E731
    assert len(texts()) == 2
    amy.call("POST", f"/rooms/{quote(room)}/leave", {})  # an ordinary leave erases nothing
    deactivated = httpx.post(
        f"{synapse.base_url}/_synapse/admin/v1/deactivate/{quote(zed.id)}",
        json={"erase": False},
        headers={"Authorization": f"Bearer {admin_cairn.account.access_token}"},
        timeout=30,
    )
    assert deactivated.status_code == 200, deactivated.text
    wait_for("zed's erasure", lambda: texts() == ["the kettle cache is warm"])
    [audit] = admin_cairn.db_rows(Erasure)
    assert (audit.person, audit.erased_by) == (zed.id, DEPARTED_BY)
