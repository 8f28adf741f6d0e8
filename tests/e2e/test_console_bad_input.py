"""Bad input through the real ``cairn chat``: one clear error for the bad line, and every later
line still answered, on SQLite and on PostgreSQL (which, unlike SQLite, refuses over-long
values and cannot store undecodable text).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_console_chat import CAIRN, _env

LONG_THREAD = "t" * 500  # the schema keeps 200
LONG_AGENT = "a" * 100  # 64
LONG_USER = "u" * 300  # 200


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """A fresh CAIRN_HOME on each database; strict UTF-8 on the standard streams, as under
    a UTF-8 locale, so that nothing is decoded or printed leniently by accident."""
    extra = {"PYTHONIOENCODING": "utf-8"}
    if request.param == "postgresql":
        extra["CAIRN_DATABASE_URL"] = request.getfixturevalue("postgres_url")
    return _env(tmp_path / "home", **extra)


def _chat(env: dict[str, str], script: bytes, *args: str) -> tuple[list[dict[str, Any]], str]:
    """Run ``cairn chat --json`` on the raw bytes ``script``; its JSON lines and its stderr."""
    done = subprocess.run(
        [*CAIRN, "chat", "--json", *args],
        input=script,
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    stderr = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr
    assert done.returncode == 1, stderr  # a line was refused: a script can tell
    lines = done.stdout.decode("utf-8").splitlines()  # strict: the output is valid UTF-8
    return [json.loads(line) for line in lines if line.strip()], stderr


def _shown(outputs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(type, text) of each output, replies shortened to their type."""
    return [(o["type"], "" if o["type"] == "reply" else o["text"]) for o in outputs]


def test_a_line_that_is_not_utf8_is_refused_and_every_later_line_is_answered(
    env: dict[str, str],
) -> None:
    outputs, _ = _chat(
        env,
        b"remember x is one\nremember the \xff\xfe key\n/\xff\nremember y is two\n",
    )
    assert _shown(outputs)[:2] == [("reply", ""), ("notice", "remembered: x is one")]
    refused, unknown = outputs[2], outputs[3]
    assert refused["type"] == "error"
    assert "not valid UTF-8" in refused["text"]
    assert "character 14" in refused["text"]
    # An error that quotes the bad bytes prints them as U+FFFD, never as a crash.
    assert unknown["type"] == "error"
    assert "unknown command /\ufffd" in unknown["text"]
    assert _shown(outputs)[4:] == [("reply", ""), ("notice", "remembered: y is two")]


def test_names_longer_than_the_schema_keeps_are_refused_and_the_run_goes_on(
    env: dict[str, str],
) -> None:
    script = (
        f"/thread {LONG_THREAD}\n/agent {LONG_AGENT}\n/user {LONG_USER}\n"
        "remember z is three\n"
        f"/react {'e' * 150}\n"
        "/thread b\n"
        "what about z?\n"
    )
    outputs, _ = _chat(env, script.encode())
    errors = [o["text"] for o in outputs if o["type"] == "error"]
    assert errors == [
        "the thread name is 500 characters long; the limit is 200 characters",
        "the agent name is 100 characters long; the limit is 64 characters",
        "the user name is 300 characters long; the limit is 200 characters",
        "the emoji name is 150 characters long; the limit is 100 characters",
    ]
    # The previous names were kept: the fact went to thread "main" under the default agent.
    remembered = [o for o in outputs if o["type"] == "notice"]
    assert [(o["text"], o["thread"], o["agent"]) for o in remembered] == [
        ("remembered: z is three", "main", "cairn")
    ]
    [*_, answer] = outputs
    assert answer["type"] == "reply"
    assert answer["thread"] == "b"
    assert "z is three" in answer["text"]


@pytest.mark.parametrize(
    ("argv", "option", "limit"),
    [
        (["chat", "--thread", LONG_THREAD], "'--thread'", 200),
        (["chat", "--agent", LONG_AGENT], "'--agent'", 64),
        (["chat", "--user", LONG_USER], "'--user'", 200),
        (["memo", "send", "--to", LONG_AGENT, "hello"], "'--to'", 64),
        (["memo", "send", "--to", "ops", "--from", LONG_USER, "hello"], "'--from'", 200),
        (["memo", "ack", "1", "--agent", LONG_AGENT], "'--agent'", 64),
        (["memory", "retract", "1", "--by", LONG_USER], "'--by'", 200),
        (["memory", "share", "1", "--agent", LONG_AGENT], "'--agent'", 64),
        (["session", "end", LONG_THREAD], "'THREAD'", 200),
    ],
)
def test_an_over_long_name_on_the_command_line_is_a_usage_error(
    tmp_path: Path, argv: list[str], option: str, limit: int
) -> None:
    done = subprocess.run(
        [*CAIRN, *argv],
        input="",
        capture_output=True,
        text=True,
        env=_env(tmp_path / "home"),
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"Invalid value for {option}" in done.stderr
    assert f"the limit is {limit} characters" in done.stderr
    assert "Traceback" not in done.stderr
