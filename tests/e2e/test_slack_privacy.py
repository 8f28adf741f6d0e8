"""What is said to the bot in a Slack DM, a group DM or a private channel is never recalled in a
public channel; what is said in a public channel is the team's.

The real Slack frontend (Bolt app over signed HTTP requests, slack_sdk, the pipeline and
in-process workers) against the Web API stand-in, whose ``conversations.info`` says which
channels are public; the offline model recalls with the memory tools, and one test puts a
stand-in model behind it (the Anthropic one and the Chat Completions one, ``STAND_INS``), which
calls the remember tool, to read every prompt the model was sent.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from sqlmodel import select

from cairn.db.models import MemoryAudit, MemoryRow
from tests.support import chat_server, messages_server
from tests.support.chat_server import STAND_INS, model_env
from tests.support.heard import Heard, tool_reply
from tests.support.messages_server import Reply, Responder
from tests.support.slack_api import BOT_USER, signed_headers
from tests.support.slack_harness import SIGNING_SECRET, Harness, running_slack

SALARY = "my salary is 123456"
SECRET = "123456"
ANN, BOB = "UANN", "UBOB"
ANN_DM, BOB_DM = "D0ANN", "D0BOB"
GENERAL, OPS = "C0GENERAL", "C0OPS"  # public channels
PAYROLL = "C0PAYROLL"  # a private channel (a C id, as Slack gives private channels since 2021)
MPIM = "G0MPIM"  # a group DM of ann, bob and the bot

_clock = iter(range(1_700_001_000, 1_800_000_000, 10))


def _ts() -> str:
    return f"{next(_clock)}.000100"


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    with running_slack(monkeypatch) as harness:
        _conversations(harness)
        yield harness


def _conversations(h: Harness) -> None:
    h.api.add_channel(GENERAL, "public", name="general")
    h.api.add_channel(OPS, "public", name="ops")
    h.api.add_channel(PAYROLL, "private", name="payroll")
    h.api.add_channel(MPIM, "mpim", name="mpdm-ann--bob--cairn-1")


def mention(h: Harness, channel: str, text: str, *, user: str = ANN, shared: bool = False) -> str:
    """``user`` mentions the bot in ``channel`` (an ``app_mention``: it has no channel_type;
    ``shared``: the channel is shared with another organisation, as the envelope says);
    returns the text of the bot's answers in the thread, once everything is posted."""
    ts = _ts()
    event = {
        "type": "app_mention",
        "user": user,
        "text": f"<@{BOT_USER}> {text}",
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
    }
    h.deliver(event, shared=shared)
    return _answers(h, channel, ts)


def message(h: Harness, channel: str, channel_type: str, text: str, *, user: str = ANN) -> str:
    """``user`` writes ``text`` in ``channel`` (a ``message`` event, with its channel_type);
    returns the text of the bot's answers in the thread."""
    ts = _ts()
    event = {
        "type": "message",
        "channel_type": channel_type,
        "user": user,
        "text": text if channel_type == "im" else f"<@{BOT_USER}> {text}",
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
    }
    h.deliver(event)
    return _answers(h, channel, ts)


def _answers(h: Harness, channel: str, ts: str) -> str:
    h.settle()
    answers = [p["text"] for p in h.api.posts(channel) if p.get("thread_ts") == ts]
    assert answers, f"no answer in {channel} to the message {ts}"
    return "\n".join(answers)


def _posted_anywhere_but(h: Harness, *private: str) -> str:
    return "\n".join(p["text"] for p in h.api.posts() if p["channel"] not in private)


def _memory(h: Harness, text: str) -> MemoryRow:
    with h.pipeline.rt.db.session() as s:
        (row,) = s.exec(select(MemoryRow).where(MemoryRow.text == text)).all()
    return row


# --- DMs --------------------------------------------------------------------------------------


def test_what_ann_tells_the_bot_in_a_dm_is_recalled_in_that_dm_and_nowhere_else(
    slack: Harness,
) -> None:
    told = message(slack, ANN_DM, "im", f"remember {SALARY}")
    assert f"remembered: {SALARY}" in told
    assert _memory(slack, SALARY).private_to == ANN_DM
    assert _memory(slack, SALARY).source_conversation == ""  # a DM has no name of its own

    # Bob asks in a public channel, and so does Ann herself: nothing of the DM comes out.
    for asker in (BOB, ANN):
        answer = mention(slack, GENERAL, "what is the salary?", user=asker)
        assert SECRET not in answer
        assert "don't remember" in answer
    # Nor in Bob's own DM with the bot.
    assert SECRET not in message(slack, BOB_DM, "im", "what is the salary?", user=BOB)
    assert SECRET not in _posted_anywhere_but(slack, ANN_DM)

    # Asked again in the same DM, the bot recalls it.
    assert SECRET in message(slack, ANN_DM, "im", "what is the salary?")
    # A DM is private without asking Slack.
    assert [c.args["channel"] for c in slack.api.calls("conversations.info")] == [GENERAL]


def _model(provider: str) -> Responder:
    """A model in ``provider``'s format that asks for the remember tool when told to remember
    (the turn reads "UANN: remember ..."); otherwise it answers as the stand-in's
    ``echo_responder`` does, recalling nothing itself."""
    echo: Responder = (
        chat_server.echo_responder if provider == "openai" else messages_server.echo_responder
    )

    def model(request: dict[str, Any]) -> Reply | dict[str, Any]:
        heard = Heard(provider, request)
        _, told, fact = heard.said.partition("remember ")
        if told and not heard.tool_results:
            return tool_reply(provider, "remember", {"text": fact.strip()})
        return echo(request)

    return model


@pytest.mark.parametrize("provider", sorted(STAND_INS))
def test_the_prompt_of_a_public_channel_never_holds_a_dm_memory(
    monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    # Whatever Cairn put in the model's prompt (recalled memories included) is in its requests.
    server_class, _ = STAND_INS[provider]
    with server_class(api_key="k", responder=_model(provider)) as model:
        for name, value in model_env(provider, model).items():
            monkeypatch.setenv(name, value)
        with running_slack(monkeypatch) as h:
            _conversations(h)
            told = message(h, ANN_DM, "im", f"remember {SALARY}").splitlines()
            # The model called the tool it was offered; it ran, and the model was given its result.
            assert "remember" in Heard(provider, model.bodies[0]).tools
            assert f"remembered: {SALARY}" in told
            (done,) = [line for line in told if line.startswith("Done: ")]
            result = json.loads(done.removeprefix("Done: "))
            assert (result["status"], result["text"], result["visibility"]) == (
                "stored",
                SALARY,
                "private",
            )
            assert _memory(h, SALARY).private_to == ANN_DM
            mention(h, OPS, "remember the salary review code is 909090")
            asked_before = len(model.bodies)
            mention(h, GENERAL, "what is the salary?", user=BOB)
            public_prompts = json.dumps(model.bodies[asked_before:])
            assert "909090" in public_prompts  # the team's memory about salaries was recalled...
            assert 'from UANN in \\"#ops\\" on ' in public_prompts  # ...said where, by name...
            assert SECRET not in public_prompts  # ...and Ann's DM was not

            asked_before = len(model.bodies)
            message(h, ANN_DM, "im", "what is the salary?")
            dm_prompts = model.bodies[asked_before:]
            assert [b for b in dm_prompts if SECRET in json.dumps(b)]  # recalled into its prompt


# --- private channels and group DMs ----------------------------------------------------------


def test_a_private_channels_memory_stays_in_it(slack: Harness) -> None:
    fact = "the payroll run code is 777111"
    # An app_mention says nothing of the channel: conversations.info says it is private.
    assert f"remembered: {fact}" in mention(slack, PAYROLL, f"remember {fact}")
    assert _memory(slack, fact).private_to == PAYROLL
    assert _memory(slack, fact).source_conversation == "#payroll"  # from the same lookup
    assert "777111" not in mention(slack, GENERAL, "what is the payroll run code?", user=BOB)
    assert "777111" in mention(slack, PAYROLL, "what is the payroll run code?", user=BOB)
    # A message event says "group" itself, and is believed: no second lookup.
    assert "777111" in message(slack, PAYROLL, "group", "what is the payroll run code?")
    assert [c.args["channel"] for c in slack.api.calls("conversations.info")].count(PAYROLL) == 1
    assert "777111" not in _posted_anywhere_but(slack, PAYROLL)


def test_a_group_dms_memory_stays_in_it(slack: Harness) -> None:
    fact = "the offsite budget is 424242"
    assert f"remembered: {fact}" in message(slack, MPIM, "mpim", f"remember {fact}")
    assert _memory(slack, fact).private_to == MPIM
    assert _memory(slack, fact).source_conversation == ""  # a group DM has no name of its own
    assert "424242" not in mention(slack, OPS, "what is the offsite budget?")
    assert "424242" not in mention(slack, PAYROLL, "what is the offsite budget?")
    assert "424242" in message(slack, MPIM, "mpim", "what is the offsite budget?", user=BOB)
    assert "424242" not in _posted_anywhere_but(slack, MPIM)


def test_a_public_channels_memory_is_the_teams_in_every_channel(slack: Harness) -> None:
    fact = "the deploy window code is 909090"
    assert f"remembered: {fact}" in mention(slack, OPS, f"remember {fact}")
    assert _memory(slack, fact).private_to is None
    answer = mention(slack, GENERAL, "what is the deploy window code?", user=BOB)
    assert "909090" in answer
    assert "said in #ops" in answer
    assert "909090" in message(slack, GENERAL, "channel", "what is the deploy window code?")
    assert "909090" in message(slack, ANN_DM, "im", "what is the deploy window code?")
    assert "909090" in mention(slack, PAYROLL, "what is the deploy window code?")


def test_when_slack_cannot_say_the_channel_is_treated_as_private(slack: Harness) -> None:
    # A public channel, but the app lacks the scope to ask (conversations.info: missing_scope).
    slack.api.add_channel("C0FLAKY", "public", name="flaky")
    slack.api.refuse("conversations.info", "missing_scope")
    fact = "the build cache key is 555000"
    assert f"remembered: {fact}" in mention(slack, "C0FLAKY", f"remember {fact}")
    assert _memory(slack, fact).private_to == "C0FLAKY"
    assert "555000" not in mention(slack, GENERAL, "what is the build cache key?", user=BOB)
    assert "555000" in mention(slack, "C0FLAKY", "what is the build cache key?")


# --- channels shared with another organisation, and channels that change ----------------------

PARTNER = "C0PARTNER"  # a Slack Connect channel: shared with another organisation
PAT = "UPAT"  # a person of that organisation


def test_a_channel_shared_with_another_organisation_hears_no_team_memory_and_keeps_its_own(
    slack: Harness,
) -> None:
    slack.api.add_channel(
        PARTNER, "public", name="acme-partner", is_shared=True, is_ext_shared=True
    )
    slack.api.add_user(PAT, team_id="T0PARTNER")
    assert "remembered" in mention(slack, OPS, "remember the ops escalation code is 313131")
    # Asked there, by the partner or by a member: the team's memory stays the team's.
    for asker in (PAT, ANN):
        answer = mention(
            slack, PARTNER, "what is the ops escalation code?", user=asker, shared=True
        )
        assert "313131" not in answer
    # What the partner teaches stays in the shared channel, and is not trusted.
    fact = "the partner api window code is 808080"
    assert "remembered" in mention(slack, PARTNER, f"remember {fact}", user=PAT, shared=True)
    row = _memory(slack, fact)
    assert row.private_to == PARTNER
    assert row.untrusted
    assert "808080" not in mention(slack, GENERAL, "what is the partner api window code?", user=BOB)
    assert "808080" in mention(slack, PARTNER, "what is the partner api window code?", shared=True)


def _channel_event(h: Harness, event: dict[str, Any]) -> None:
    h.deliver(event)
    h.settle()


def test_a_channel_made_private_is_private_at_once_not_when_the_cache_expires(
    slack: Harness,
) -> None:
    team = "C0TEAM"
    slack.api.add_channel(team, "public", name="team")
    mention(slack, team, "hello")  # taken for public, and kept so for ten minutes
    slack.api.add_channel(team, "private", name="team")
    ts = _ts()
    _channel_event(
        slack,
        {
            "type": "message",
            "subtype": "channel_convert_to_private",
            "user": ANN,
            "text": "made this channel *private*.",
            "ts": ts,
            "channel": team,
            "event_ts": ts,
            "channel_type": "group",
        },
    )
    fact = "the team offsite code is 626262"
    assert "remembered" in mention(slack, team, f"remember {fact}")
    assert _memory(slack, fact).private_to == team
    assert "626262" not in mention(slack, GENERAL, "what is the team offsite code?", user=BOB)


def test_a_channel_shared_outside_after_it_was_public_stops_hearing_team_memory(
    slack: Harness,
) -> None:
    assert "remembered" in mention(slack, OPS, "remember the vault unseal hour is 0400")
    slack.api.add_channel("C0SOON", "public", name="soon-shared")
    assert "0400" in mention(slack, "C0SOON", "what is the vault unseal hour?")
    slack.api.add_channel(
        "C0SOON", "public", name="soon-shared", is_shared=True, is_ext_shared=True
    )
    _channel_event(
        slack,
        {
            "type": "channel_shared",
            "connected_team_id": "T0PARTNER",
            "channel": "C0SOON",
            "event_ts": _ts(),
        },
    )
    assert "0400" not in mention(slack, "C0SOON", "what is the vault unseal hour?")


# --- reactions and /cairn ----------------------------------------------------------------------


def test_a_reaction_in_a_dm_reaches_the_memory_learned_there(slack: Harness) -> None:
    message(slack, ANN_DM, "im", f"remember {SALARY}")
    (notice,) = [p for p in slack.api.posts(ANN_DM) if p["text"] == f"remembered: {SALARY}"]
    slack.deliver(
        {
            "type": "reaction_added",
            "user": ANN,
            "reaction": "white_check_mark",
            "item": {"type": "message", "channel": ANN_DM, "ts": notice["ts"]},
            "item_user": BOT_USER,
            "event_ts": _ts(),
        }
    )
    slack.settle()
    # Found where it was learned: weighed, and refused, for its author's word never counts.
    memory = _memory(slack, SALARY)
    assert not memory.confirmed
    with slack.pipeline.rt.db.session() as s:
        audit = s.exec(select(MemoryAudit).where(MemoryAudit.memory_id == memory.id)).all()
        assert [(a.action, a.actor) for a in audit] == [("confirm-refused", ANN)]


def _slash(h: Harness, channel: str, channel_name: str, text: str, user: str = ANN) -> str:
    form = {
        "token": "t",
        "team_id": "T0001",
        "team_domain": "test",
        "channel_id": channel,
        "channel_name": channel_name,
        "user_id": user,
        "user_name": user.lower(),
        "command": "/cairn",
        "text": text,
        "api_app_id": "ACAIRN",
        "response_url": h.api.response_url,
        "trigger_id": "1.2.3",
    }
    before = len(h.api.responses)
    body = urllib.parse.urlencode(form).encode()
    headers = signed_headers(SIGNING_SECRET, body)
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    assert h.post_raw(body, headers)[0] == 200
    h.api.wait_for(lambda: len(h.api.responses) > before, what="the command's answer")
    answer: dict[str, Any] = h.api.responses[-1]
    return str(answer["text"])


def test_cairn_remember_in_a_dm_or_private_channel_stays_there(slack: Harness) -> None:
    assert _slash(slack, ANN_DM, "directmessage", f"remember {SALARY}").startswith("Remembered")
    assert _memory(slack, SALARY).private_to == ANN_DM
    assert SECRET not in _slash(slack, GENERAL, "general", "recall salary", user=BOB)
    assert SECRET in _slash(slack, ANN_DM, "directmessage", "recall salary")

    fact = "the payroll run code is 777111"
    # A private channel's own name says nothing: conversations.info decides.
    assert _slash(slack, PAYROLL, "payroll", f"remember {fact}").startswith("Remembered")
    assert _memory(slack, fact).private_to == PAYROLL
    assert _memory(slack, fact).source_conversation == "#payroll"
    assert "777111" not in _slash(slack, GENERAL, "general", "recall payroll run code")
    assert "777111" in _slash(slack, PAYROLL, "payroll", "recall payroll run code")

    # Forgetting works where the memory lives.
    assert _slash(slack, ANN_DM, "directmessage", "forget salary").startswith("Retracted")
    assert _memory(slack, SALARY).retracted


def test_cairn_remember_in_a_public_channel_is_the_teams(slack: Harness) -> None:
    fact = "lunch is at one"
    assert _slash(slack, GENERAL, "general", f"remember {fact}").startswith("Remembered")
    assert _memory(slack, fact).private_to is None
    assert fact in _slash(slack, BOB_DM, "directmessage", "recall lunch", user=BOB)
