"""Many workspaces: Slack's OAuth install through Bolt's flow, tokens kept by slack_sdk's
SQLAlchemy installation store in Cairn's database, one memory tenant per workspace, and
uninstalling forgetting the workspace's token."""

from __future__ import annotations

import http.client
import time
import urllib.parse
from pathlib import Path

import pytest
import yaml
from sqlmodel import select

from cairn.bot.slack.workspaces import BOT_SCOPES
from cairn.db.models import EventKind, SessionEvent
from tests.support.slack_api import event_payload
from tests.support.slack_harness import Harness, running_slack

REPO_MANIFEST = Path(__file__).parents[2] / "manifest.yml"


def _get(h: Harness, path: str, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", h.frontend.http_port, timeout=10)
    connection.request("GET", path, headers=headers or {})
    response = connection.getresponse()
    response.read()
    connection.close()
    return response


def _install(h: Harness, team: str) -> http.client.HTTPResponse:
    """Go through /slack/install and back to /slack/oauth_redirect, as a browser would."""
    started = _get(h, "/slack/install")
    assert started.status == 302
    authorize = urllib.parse.urlsplit(started.getheader("Location") or "")
    query = dict(urllib.parse.parse_qsl(authorize.query))
    assert query["client_id"] == h.api.client_id
    assert set(query["scope"].split(",")) == set(BOT_SCOPES)
    cookie = (started.getheader("Set-Cookie") or "").split(";", 1)[0]
    back = urllib.parse.urlencode({"code": f"code-{team}", "state": query["state"]})
    return _get(h, f"/slack/oauth_redirect?{back}", {"Cookie": cookie})


def _mention(team: str, ts: str, bot_user: str) -> dict:
    return event_payload(
        {
            "type": "app_mention",
            "user": "UANN",
            "text": f"<@{bot_user}> what do you know about deploys?",
            "ts": ts,
            "channel": "C0SHARED",
            "event_ts": ts,
        },
        team=team,
    )


def _messages(h: Harness) -> list[SessionEvent]:
    with h.pipeline.rt.db.session() as s:
        return list(s.exec(select(SessionEvent).where(SessionEvent.kind == EventKind.MESSAGE)))


def test_each_installed_workspace_is_answered_with_its_own_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with running_slack(monkeypatch, oauth=True) as h:
        assert _install(h, "T0002").status in {200, 302}
        assert _install(h, "T0003").status in {200, 302}
        for team, ts in (("T0002", "1700000001.000100"), ("T0003", "1700000002.000100")):
            status, _ = h.post(_mention(team, ts, f"U{team}BOT"))
            assert status == 200
            h.settle()
        posts = h.api.posts()
        assert sorted((p["team"], p["user"]) for p in posts) == [
            ("T0002", "UT0002BOT"),
            ("T0003", "UT0003BOT"),
        ]
        tokens = {
            c.token for c in h.api.calls() if c.method in ("chat.postMessage", "chat.startStream")
        }
        assert tokens == {"xoxb-T0002", "xoxb-T0003"}
        tenants = {row.tenant_id for row in _messages(h)}
        assert tenants == {"slack:T0002", "slack:T0003"}


def test_a_workspace_that_never_installed_is_not_served(monkeypatch: pytest.MonkeyPatch) -> None:
    with running_slack(monkeypatch, oauth=True) as h:
        h.post(_mention("T0009", "1700000001.000100", "UT0009BOT"))
        time.sleep(0.5)
        h.settle()
        assert h.api.posts() == []
        assert _messages(h) == []


def test_an_install_with_a_forged_state_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with running_slack(monkeypatch, oauth=True) as h:
        forged = urllib.parse.urlencode({"code": "code-T0002", "state": "forged"})
        assert _get(h, f"/slack/oauth_redirect?{forged}").status >= 400
        assert "oauth.v2.access" not in {c.method for c in h.api.calls()}


def test_uninstalling_forgets_the_workspace(monkeypatch: pytest.MonkeyPatch) -> None:
    with running_slack(monkeypatch, oauth=True) as h:
        _install(h, "T0002")
        h.post(_mention("T0002", "1700000001.000100", "UT0002BOT"))
        h.settle()
        assert len(h.api.posts()) == 1
        h.post(event_payload({"type": "app_uninstalled"}, team="T0002"))
        h.api.wait_for(lambda: h.frontend.workspaces.client("T0002") is None, what="the uninstall")
        h.post(_mention("T0002", "1700000002.000100", "UT0002BOT"))
        time.sleep(0.5)
        h.settle()
        assert len(h.api.posts()) == 1
        status, _ = h.health()
        assert status == 200  # one workspace leaving does not make Cairn unhealthy


def test_the_install_asks_for_the_manifests_scopes() -> None:
    with open(REPO_MANIFEST, encoding="utf-8") as handle:
        manifest = yaml.safe_load(handle)
    assert set(BOT_SCOPES) == set(manifest["oauth_config"]["scopes"]["bot"])
