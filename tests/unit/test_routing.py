"""Routing a message to an agent: by name, by channel, or the default."""

from __future__ import annotations

import pytest

from cairn.bot.routing import route
from cairn.core.settings import AgentSpec, Settings, load_settings
from cairn.sessions.events import ChatEvent


@pytest.fixture
def settings() -> Settings:
    return load_settings(
        CAIRN_AGENT="ops",
        CAIRN_AGENTS={
            "ops": AgentSpec(description="runs deploys"),
            "review": AgentSpec(channels=["C-review"]),
        },
    )


def _msg(text: str, channel: str = "C-general", agent: str | None = None) -> ChatEvent:
    return ChatEvent(
        platform="p", tenant="t", channel=channel, thread="th", user="u", text=text, agent=agent
    )


@pytest.mark.parametrize(
    ("text", "agent", "rest"),
    [
        ("review: please look at PR 42", "review", "please look at PR 42"),
        ("@review, is it green?", "review", "is it green?"),
        ("Review: capitals work", "review", "capitals work"),
        ("ops: deploy it", "ops", "deploy it"),
    ],
)
def test_a_message_naming_an_agent_goes_to_it_without_the_name(
    settings: Settings, text: str, agent: str, rest: str
) -> None:
    routed = route(_msg(text), settings)
    assert (routed.agent, routed.text) == (agent, rest)


def test_an_unknown_name_is_just_text_for_the_default_agent(settings: Settings) -> None:
    routed = route(_msg("note: the build is red"), settings)
    assert (routed.agent, routed.text) == ("ops", "note: the build is red")


def test_a_channels_default_agent_takes_unaddressed_messages(settings: Settings) -> None:
    assert route(_msg("is it green?", channel="C-review"), settings).agent == "review"


def test_an_explicit_agent_is_kept(settings: Settings) -> None:
    assert route(_msg("review: x", agent="ops"), settings).agent == "ops"


def test_the_default_agent_must_be_declared_when_agents_are() -> None:
    from cairn.core.errors import ConfigError

    with pytest.raises(ConfigError, match="CAIRN_AGENT is 'cairn'"):
        load_settings(CAIRN_AGENTS={"ops": AgentSpec()})
