"""The Slack frontend's settings: defaults, and contradictions named at start."""

from __future__ import annotations

import pytest

from cairn.core.errors import ConfigError
from cairn.core.settings import load_settings


def test_defaults_serve_every_interface_on_port_3000_and_follow_threads() -> None:
    s = load_settings()
    assert (s.slack.http_host, s.slack.http_port) == ("0.0.0.0", 3000)
    assert s.slack.follow_threads
    assert s.slack.answer_without_mention == "questions"
    assert not s.slack.allow_bots
    assert not s.slack.enabled


def test_the_oauth_install_needs_no_bot_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_CLIENT_ID", "1.2")
    monkeypatch.setenv("SLACK_CLIENT_SECRET", "secret")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "signing")
    s = load_settings()
    assert s.slack.oauth
    assert s.slack.enabled
    assert s.redacted()["SLACK_CLIENT_SECRET"] == "***"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"SLACK_CLIENT_ID": "1.2", "SLACK_SIGNING_SECRET": "s"}, "SLACK_CLIENT_SECRET"),
        ({"SLACK_CLIENT_ID": "1.2", "SLACK_CLIENT_SECRET": "x"}, "SLACK_SIGNING_SECRET"),
        ({"CAIRN_SLACK_ANSWER_WITHOUT_MENTION": "sometimes"}, "CAIRN_SLACK_ANSWER_WITHOUT_MENTION"),
        ({"CAIRN_HTTP_PORT": "70000"}, "CAIRN_HTTP_PORT"),
        ({"CAIRN_SLACK_MESSAGE_CHARS": "50000"}, "CAIRN_SLACK_MESSAGE_CHARS"),
    ],
)
def test_contradictions_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], named: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=named):
        load_settings()
