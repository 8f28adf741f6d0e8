"""Whether a Slack conversation is public, asked of the Web API stand-in through slack_sdk: the
answers are kept ten minutes, a DM costs no call, what an event says wins, and every failure
(missing scope, unknown channel, rate limit beyond the retries, no connection) counts as
private; and /cairn, told of no channel, keeps out of memory."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from cairn.bot.slack.conversations import KEEP_SECONDS, Conversations
from cairn.bot.slack.slash import run_command
from cairn.bot.slack.web import web_client
from cairn.bot.slack.workspaces import BotIdentity, SingleWorkspace
from cairn.core.settings import load_settings
from cairn.memory import Scope
from cairn.runtime import Runtime
from tests.support.slack_api import BOT_ID, BOT_TOKEN, BOT_USER, SlackAPI

TEAM = "T0001"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def api() -> Iterator[SlackAPI]:
    with SlackAPI(team=TEAM) as stand_in:
        stand_in.add_channel("C0PUBLIC", "public", name="ops")
        stand_in.add_channel("C0SECRET", "private", name="payroll")
        stand_in.add_channel("G0LEGACY", "group", name="old-secret")
        stand_in.add_channel("G0MPIM", "mpim", name="mpdm-ann--bob--cairn-1")
        yield stand_in


def _conversations(
    api: SlackAPI, monkeypatch: pytest.MonkeyPatch, clock: Clock, retries: int = 0
) -> Conversations:
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "s")
    monkeypatch.setenv("SLACK_API_URL", api.base_url)
    monkeypatch.setenv("CAIRN_SLACK_API_RETRIES", str(retries))
    client = web_client(load_settings(), BOT_TOKEN, timeout=5)
    workspaces = SingleWorkspace(client, BotIdentity(BOT_USER, BOT_ID, TEAM))
    return Conversations(workspaces, clock=clock)


def _asked(api: SlackAPI) -> list[str]:
    return [c.args["channel"] for c in api.calls("conversations.info", ok_only=False)]


def test_only_the_public_channel_is_public(api: SlackAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    conversations = _conversations(api, monkeypatch, Clock())
    assert conversations.private(TEAM, "C0PUBLIC") is False
    assert conversations.private(TEAM, "C0SECRET") is True
    assert conversations.private(TEAM, "G0LEGACY") is True
    assert conversations.private(TEAM, "G0MPIM") is True
    assert conversations.private(TEAM, "D0DM") is True
    assert _asked(api) == ["C0PUBLIC", "C0SECRET", "G0LEGACY", "G0MPIM"]  # a DM costs no call


def test_an_answer_is_kept_ten_minutes_then_asked_again(
    api: SlackAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    conversations = _conversations(api, monkeypatch, clock)
    assert conversations.private(TEAM, "C0PUBLIC") is False
    clock.now += KEEP_SECONDS - 1
    assert conversations.private(TEAM, "C0PUBLIC") is False
    assert _asked(api) == ["C0PUBLIC"]
    # The channel is made private; after ten minutes the next lookup sees it.
    api.add_channel("C0PUBLIC", "private", name="ops")
    clock.now += 2
    assert conversations.private(TEAM, "C0PUBLIC") is True
    assert _asked(api) == ["C0PUBLIC", "C0PUBLIC"]


def test_what_a_message_event_says_wins_and_is_kept(
    api: SlackAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    conversations = _conversations(api, monkeypatch, Clock())
    assert conversations.private(TEAM, "C0PUBLIC") is False
    # A message event from the same channel, now private ("group"): believed at once...
    assert conversations.private(TEAM, "C0PUBLIC", "group") is True
    # ...and kept for the events that do not say (app_mention, reactions).
    assert conversations.private(TEAM, "C0PUBLIC") is True
    assert conversations.private(TEAM, "C0NEW", "channel") is False
    assert conversations.private(TEAM, "C0NEW") is False
    assert _asked(api) == ["C0PUBLIC"]


@pytest.mark.parametrize("error", ["missing_scope", "channel_not_found", "ratelimited"])
def test_a_refused_lookup_counts_as_private_with_one_log_line(
    api: SlackAPI,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    error: str,
) -> None:
    clock = Clock()
    conversations = _conversations(api, monkeypatch, clock)
    api.refuse("conversations.info", error)
    with caplog.at_level(logging.WARNING, logger="cairn.bot.slack.conversations"):
        assert conversations.private(TEAM, "C0PUBLIC") is True
        assert conversations.private(TEAM, "C0PUBLIC") is True  # not asked again at once
    (line,) = caplog.records
    assert error in line.getMessage()
    assert "private" in line.getMessage()
    assert _asked(api) == ["C0PUBLIC"]
    clock.now += 31  # half a minute later Slack is asked again, and answers
    assert conversations.private(TEAM, "C0PUBLIC") is False


def test_an_unknown_channel_counts_as_private(
    api: SlackAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    conversations = _conversations(api, monkeypatch, Clock())
    assert conversations.private(TEAM, "X0WHAT") is True  # the stand-in: channel_not_found


def test_a_rate_limit_beyond_the_retries_counts_as_private(
    api: SlackAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    conversations = _conversations(api, monkeypatch, Clock(), retries=1)
    api.fail("conversations.info", status=429, retry_after=1, times=2)
    assert conversations.private(TEAM, "C0PUBLIC") is True
    assert [c.status for c in api.calls("conversations.info", ok_only=False)] == [429, 429]


def test_a_rate_limit_within_the_retries_gets_the_answer(
    api: SlackAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    conversations = _conversations(api, monkeypatch, Clock(), retries=1)
    api.fail("conversations.info", status=429, retry_after=1, times=1)
    assert conversations.private(TEAM, "C0PUBLIC") is False


def test_no_connection_counts_as_private(api: SlackAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    conversations = _conversations(api, monkeypatch, Clock())
    api.drop("conversations.info")
    assert conversations.private(TEAM, "C0PUBLIC") is True


def test_a_channels_name_comes_with_the_answer_on_its_privacy_at_no_extra_call(
    api: SlackAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    conversations = _conversations(api, monkeypatch, Clock())
    assert conversations.private(TEAM, "C0PUBLIC") is False
    assert conversations.private(TEAM, "C0SECRET") is True
    assert conversations.name(TEAM, "C0PUBLIC") == "#ops"
    assert conversations.name(TEAM, "C0SECRET") == "#payroll"
    assert _asked(api) == ["C0PUBLIC", "C0SECRET"]
    # A DM costs no call, and neither it nor a group DM has a name of its own.
    assert conversations.name(TEAM, "D0DM") == ""
    assert conversations.name(TEAM, "G0MPIM") == ""
    assert _asked(api) == ["C0PUBLIC", "C0SECRET", "G0MPIM"]


def test_a_channels_name_is_asked_once_when_the_event_said_its_kind(
    api: SlackAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    conversations = _conversations(api, monkeypatch, clock)
    assert conversations.private(TEAM, "G0LEGACY", "group") is True  # the event says: no call
    assert _asked(api) == []
    assert conversations.name(TEAM, "G0LEGACY") == "#old-secret"
    clock.now += KEEP_SECONDS * 10
    assert conversations.name(TEAM, "G0LEGACY") == "#old-secret"
    assert conversations.private(TEAM, "G0LEGACY", "group") is True
    assert _asked(api) == ["G0LEGACY"]


def test_a_renamed_channel_is_named_anew_at_once(
    api: SlackAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    conversations = _conversations(api, monkeypatch, Clock())
    assert conversations.name(TEAM, "C0PUBLIC") == "#ops"
    api.add_channel("C0PUBLIC", "public", name="ops-team")
    conversations.changed(TEAM, "C0PUBLIC")  # channel_rename
    assert conversations.name(TEAM, "C0PUBLIC") == "#ops-team"


def test_a_refused_name_lookup_names_nothing_and_is_asked_again_after_half_a_minute(
    api: SlackAPI, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    conversations = _conversations(api, monkeypatch, clock)
    api.refuse("conversations.info", "missing_scope")
    with caplog.at_level(logging.WARNING, logger="cairn.bot.slack.conversations"):
        assert conversations.name(TEAM, "C0PUBLIC") == ""
        assert conversations.name(TEAM, "C0PUBLIC") == ""  # not asked again at once
    (line,) = caplog.records
    assert "missing_scope, asked for its name" in line.getMessage()
    assert _asked(api) == ["C0PUBLIC"]
    clock.now += 31
    assert conversations.name(TEAM, "C0PUBLIC") == "#ops"


def test_a_private_slash_command_without_its_channel_touches_no_memory(runtime: Runtime) -> None:
    said = run_command(runtime, tenant="slack:T0001", channel="", user="UANN", text="remember x y")
    assert "which conversation" in said
    assert (
        runtime.memory.newest(Scope("slack:T0001", runtime.settings.agent, every_conversation=True))
        == []
    )
