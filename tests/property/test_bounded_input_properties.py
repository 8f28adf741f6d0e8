"""Numbers from every entry point, random and absurd: each is taken within its bounds or refused
with a clear error naming it, never a traceback (docs/adr/0037).

The entry points are the real ones: the console's ``/approve`` and ``/deny``, a Slack click's
payload and the ``/cairn forget #N`` slash command, a Matrix reaction taken in by the pipeline,
``cairn`` CLI arguments and options, and settings read from the environment.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.bot.console import Console
from cairn.bot.pipeline import Pipeline
from cairn.bot.slack.approval_clicks import BadClick, read_click
from cairn.bot.slack.slash import run_command
from cairn.commands.main import main
from cairn.core.bounded import ID_MAX, bounded_int
from cairn.core.errors import ConfigError, InvalidInput
from cairn.core.settings import load_settings
from cairn.runtime import Runtime
from cairn.sessions.events import ChatEvent, EventType
from cairn.sessions.ingest import Admission
from cairn.workers.dispatch import InProcessDispatcher

# Numbers as people and platforms send them: small, 64-bit edges, huge, signed, padded, not
# numbers at all.
_EDGES = [2**63 - 1, 2**63, 2**64, 10**24, 10**26, 10**400, -1, 0]
NUMBERS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.sampled_from(_EDGES).map(str),
    st.integers(min_value=19, max_value=5000).map(lambda n: "9" * n),
    st.from_regex(r"\A[#+\- ]{0,2}0{0,30}[0-9]{1,40}\Z"),
    st.text(max_size=30),
)
FEW = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@given(NUMBERS)
@settings(max_examples=300)
def test_the_shared_parser_gives_a_number_in_bounds_or_a_clear_refusal(value: str) -> None:
    outcome: int | InvalidInput
    try:
        outcome = bounded_int(value, "a request number")
    except InvalidInput as exc:
        outcome = exc
    if isinstance(outcome, int):
        assert 1 <= outcome <= ID_MAX
    else:
        assert str(outcome).startswith("a request number must be a whole number from 1 to")
        assert len(str(outcome)) < 200  # it never quotes a huge value back


@pytest.fixture
def pipeline(runtime: Runtime) -> Pipeline:
    return Pipeline(runtime, InProcessDispatcher())


@given(NUMBERS)
@FEW
def test_console_approve_and_deny_refuse_absurd_numbers_and_go_on(
    pipeline: Pipeline, value: str
) -> None:
    out, err = io.StringIO(), io.StringIO()
    console = Console(pipeline, out=out, err=err, as_json=True)
    line = f"/approve {value}".replace("\n", " ").replace("\r", " ")
    console.run([line, "/deny " + value.replace("\n", " ").replace("\r", " "), "/help"])
    shown = [json.loads(x) for x in out.getvalue().splitlines()]
    assert shown, "each decision gets an answer"
    for said in shown:
        assert said["type"] in {"error", "decision"}, said
        assert "Traceback" not in said["text"]


def _click_payload(value: str) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "team": {"id": "T1"},
        "user": {"id": "U1", "team_id": "T1"},
        "channel": {"id": "C1"},
        "container": {"type": "message", "message_ts": "1.2", "channel_id": "C1"},
        "message": {"ts": "1.2", "thread_ts": "1.1"},
        "actions": [{"action_id": "cairn_approve", "value": value, "action_ts": "3.4"}],
    }


@given(NUMBERS)
@FEW
def test_a_slack_click_with_any_value_is_read_or_refused_and_never_overflows(
    pipeline: Pipeline, value: str
) -> None:
    try:
        click = read_click(_click_payload(value))
    except BadClick as exc:
        refused = str(exc)
    else:
        refused = ""
    if refused:
        assert "does not name a request for approval" in refused
        return
    result = pipeline.accept(
        ChatEvent(
            platform="slack",
            tenant="T1",
            channel=click.channel,
            thread=click.thread,
            user=click.user,
            type=EventType.DECISION,
            decision="approve",
            target_id=click.value,
            event_id=f"click:{value}",
        )
    )
    assert result.admission is Admission.REFUSED
    assert "There is no request" in result.answer


@given(NUMBERS)
@FEW
def test_slash_forget_by_number_answers_whatever_the_number(runtime: Runtime, value: str) -> None:
    said = run_command(
        runtime, tenant="T1", channel="C1", user="U1", text=f"forget #{value.strip()}"
    )
    assert said
    digits = value.strip().removeprefix("#")
    if digits.isascii() and digits.isdigit() and len(digits.lstrip("0")) > 19:
        assert "must be a whole number" in said


@given(NUMBERS)
@FEW
def test_a_matrix_reaction_naming_any_event_is_taken_or_ignored(
    pipeline: Pipeline, value: str
) -> None:
    event = ChatEvent(
        platform="matrix",
        tenant="example.org",
        channel="!room:example.org",
        thread="$root",
        user="@ann:example.org",
        type=EventType.REACTION_ADDED,
        reaction="white_check_mark",
        target_id=value or "$x",
        event_id=f"$r{abs(hash(value))}",
    )
    try:
        result = pipeline.accept(event)
    except InvalidInput:
        return  # a target id the schema can't keep, named in the error
    assert result.admission is Admission.IGNORED


_CLI = [
    ["memory", "show", "{}"],
    ["memory", "retract", "{}"],
    ["memory", "list", "--limit", "{}"],
    ["memory", "search", "x", "-k", "{}"],
    ["memo", "ack", "{}", "--agent", "cairn"],
    ["memo", "send", "--to", "cairn", "--priority", "{}", "hello"],
]


@given(NUMBERS, st.sampled_from(_CLI))
@FEW
def test_cli_ids_and_counts_are_bounded(runtime: Runtime, value: str, args: list[str]) -> None:
    argv = [a.replace("{}", value) for a in args]
    result = CliRunner().invoke(main, argv)
    # Click's usage error (2), Cairn's one-line error (1), or done (0): never a traceback.
    assert result.exit_code in {0, 1, 2}, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )


@given(
    st.sampled_from(
        [
            "CAIRN_REPLY_TIMEOUT",
            "CAIRN_DEDUPE_TTL",
            "CAIRN_MEMORY_HOT_BUDGET",
            "CAIRN_MEMORY_WARM_BUDGET",
            "CAIRN_MAX_MESSAGE_CHARS",
            "CAIRN_MEMORY_HALF_LIFE_DAYS",
        ]
    ),
    st.one_of(NUMBERS, st.sampled_from(["inf", "-inf", "nan", "1e308", "1e30"])),
)
@FEW
def test_numeric_settings_are_bounded(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    with monkeypatch.context() as env:
        env.setenv(variable, value)
        try:
            loaded = load_settings()
        except ConfigError as exc:
            refused = str(exc)
        else:
            refused = ""
    if refused:
        assert variable in refused
        return
    for number in (loaded.reply_timeout, loaded.dedupe_ttl, loaded.memory.hot_budget):
        assert abs(number) <= 1_000_000_000
