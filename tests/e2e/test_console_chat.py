"""End to end through ``cairn chat`` as a real subprocess, on a fresh CAIRN_HOME.

The scripted conversation of the foundation issue: remember a fact in thread A, restart the
process, recall it in thread B. It runs on SQLite and PostgreSQL, in-process and through a real
``cairn worker`` (Celery) on a real Redis broker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import stop_group

CAIRN = [sys.executable, "-m", "cairn"]
FACT = "deploys are frozen until Monday"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("CAIRN_", "SLACK_", "MATRIX_", "ANTHROPIC_", "OPENAI_", "AZURE_OPENAI_")
        )
    }
    env.update({"CAIRN_HOME": str(home), "CAIRN_REPLY_TIMEOUT": "60", **extra})
    return env


def chat(env: dict[str, str], script: str, *args: str, check: bool = True) -> list[dict[str, Any]]:
    """Run ``cairn chat --json`` with ``script`` on stdin; the JSON lines it printed."""
    done = subprocess.run(
        [*CAIRN, "chat", "--json", *args],
        input=script,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    if check:
        assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _replies(outputs: list[dict[str, Any]]) -> list[str]:
    return [o["text"] for o in outputs if o["type"] == "reply"]


def _remember_then_recall_after_restart(env: dict[str, str]) -> None:
    first = chat(env, f"remember {FACT}\n", "--thread", "a")
    assert [o["type"] for o in first] == ["reply", "notice"]
    assert first[1]["text"] == f"remembered: {FACT}"

    # A new process: nothing may have been kept in memory only.
    second = chat(env, "/thread b\nare deploys frozen?\n/quit\n")
    [answer] = _replies(second)
    assert FACT in answer
    assert second[0]["thread"] == "b"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "fresh-home"


def test_remember_in_one_thread_recall_in_another_after_a_restart(home: Path) -> None:
    _remember_then_recall_after_restart(_env(home))
    assert (home / "cairn.db").is_file()
    assert (home / "qdrant").is_dir()


@pytest.mark.postgres
def test_the_same_conversation_on_postgresql(home: Path, postgres_url: str) -> None:
    _remember_then_recall_after_restart(_env(home, CAIRN_DATABASE_URL=postgres_url))
    assert not (home / "cairn.db").exists()


@pytest.fixture
def worker(home: Path, redis_url: str, request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """A real ``cairn worker`` (Celery) on the Redis broker; yields the environment to use."""
    extra = {"CAIRN_BROKER_URL": redis_url}
    if "postgres_url" in request.fixturenames:
        extra["CAIRN_DATABASE_URL"] = request.getfixturevalue("postgres_url")
    env = _env(home, **extra)
    log = (home.parent / "worker.log").open("w")
    proc = subprocess.Popen(
        [*CAIRN, "worker", "--concurrency", "2", "--loglevel", "INFO"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _wait_ready(home.parent / "worker.log", proc)
        yield env
    finally:
        stop_group(proc)
        log.close()


def _wait_ready(log: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"cairn worker exited with {proc.returncode}:\n{log.read_text()}")
        if "ready." in log.read_text():
            return
        time.sleep(0.2)
    pytest.fail(f"cairn worker did not become ready:\n{log.read_text()}")


@pytest.mark.redis
@pytest.mark.slow
def test_the_same_conversation_through_a_celery_worker_on_redis(
    worker: dict[str, str], home: Path
) -> None:
    _remember_then_recall_after_restart(worker)
    assert "cairn.process_session" in (home.parent / "worker.log").read_text()


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.slow
def test_the_same_conversation_on_postgresql_through_a_celery_worker(
    postgres_url: str, worker: dict[str, str]
) -> None:
    assert worker["CAIRN_DATABASE_URL"] == postgres_url
    _remember_then_recall_after_restart(worker)


@pytest.mark.redis
def test_messages_wait_for_a_worker_and_are_answered_once_it_starts(
    home: Path, redis_url: str
) -> None:
    # The end of input waits CAIRN_QUIT_TIMEOUT for the reply still owed; 1s keeps this short.
    env = _env(home, CAIRN_BROKER_URL=redis_url, CAIRN_REPLY_TIMEOUT="2", CAIRN_QUIT_TIMEOUT="1")
    done = subprocess.run(
        [*CAIRN, "chat", "--json"],
        input=f"remember {FACT}\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "is a worker running" in done.stdout
    assert "gave up after 1s (CAIRN_QUIT_TIMEOUT)" in done.stdout
    # The message is durable: a worker started later answers it, and the next chat shows it.
    log = (home.parent / "late-worker.log").open("w")
    proc = subprocess.Popen(
        [*CAIRN, "worker", "-c", "1"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _wait_ready(home.parent / "late-worker.log", proc)
        deadline = time.monotonic() + 30
        shown: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not shown:
            shown = chat(env, "/quit\n")
            time.sleep(0.3)
        assert [o["text"] for o in shown if o["type"] == "notice"] == [f"remembered: {FACT}"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


def test_console_commands_paste_react_and_switch_user(home: Path) -> None:
    env = _env(home)
    script = (
        "\n".join(
            [
                "/user ann",
                "/paste",
                "remember the error budget policy is:",
                "  freeze deploys when the budget is spent",
                "/end",
                "/react white_check_mark",
                "/user bob",
                "/react white_check_mark",
                "/react white_check_mark",
                "/react eyes",
                "/unreact white_check_mark",
                "/user carol",
                "/react x",
                "/quit",
                "this line is never read",
            ]
        )
        + "\n"
    )
    out = chat(env, script)
    kinds = [o["type"] for o in out]
    assert kinds == ["reply", "notice", *["reaction"] * 6]
    notice = out[1]["text"]
    assert notice.startswith("remembered: the error budget policy is:\n  freeze deploys")
    own, confirm, repeat, eyes, undo, dispute = out[2:]
    assert "not counted" in own["text"]
    assert "you wrote it" in own["text"]
    assert (confirm["effect"], confirm["status"]) == ("confirm", "handled")
    assert confirm["text"].endswith(": confirmed")
    assert repeat["text"] == ":white_check_mark: already counted"
    assert (eyes["effect"], eyes["status"]) == (None, "ignored")
    assert undo["removed"] is True
    assert "undid" in undo["text"]
    assert "dispute" in dispute["text"]


def test_bad_input_gets_a_clear_error_and_the_conversation_goes_on(home: Path) -> None:
    env = _env(home, CAIRN_MAX_MESSAGE_CHARS="200")
    out = chat(env, "x" * 500 + "\n/bogus\n/react +1\nremember staging is db-stg\n", check=False)
    errors = [o["text"] for o in out if o["type"] == "error"]
    assert "limit is 200" in errors[0]
    assert "unknown command /bogus" in errors[1]
    assert "no bot message in this thread" in errors[2]
    assert [o["text"] for o in out if o["type"] == "notice"] == ["remembered: staging is db-stg"]


def test_a_contradictory_setting_stops_at_start_naming_the_variable(home: Path) -> None:
    env = _env(home, SLACK_BOT_TOKEN="xoxb-123")
    done = subprocess.run(
        [*CAIRN, "chat"], input="", capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 2
    assert "SLACK_APP_TOKEN" in done.stderr
    assert "SLACK_SIGNING_SECRET" in done.stderr


def test_an_unreachable_broker_is_a_clear_error(home: Path) -> None:
    env = _env(home, CAIRN_BROKER_URL="redis://127.0.0.1:9/0")
    done = subprocess.run(
        [*CAIRN, "chat"],
        input="hi\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "CAIRN_BROKER_URL: cannot reach Redis at redis://127.0.0.1:9/0" in done.stderr


def test_help_teaches_the_commands() -> None:
    done = subprocess.run(
        [*CAIRN, "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    for word in ("chat", "run", "worker", "migrate", "config", "memory", "Quick start"):
        assert word in done.stdout
    chat_help = subprocess.run(
        [*CAIRN, "chat", "--help"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "/paste" in chat_help
    assert "--json" in chat_help
