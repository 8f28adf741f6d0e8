"""``cairn doctor`` records whether the model calls tools, and ``cairn chat`` acts on it.

Both run as real subprocesses on one CAIRN_HOME, against the Chat Completions stand-in, with
CAIRN_MODEL_TOOLS unset unless a test sets it: a finding of "no tools" makes the next turn send
no tools at all (not even a first attempt the server would refuse), and a setting always wins.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from cairn.llm.openai import NO_TOOLS_NOTE
from cairn.llm.tool_findings import FINDINGS_FILE
from tests.e2e.test_console_chat import CAIRN, chat
from tests.e2e.test_openai_chat import FACT, KEY, _openai_env, ops_model
from tests.support.chat_server import ChatServer, chat_error, completion, tool_call
from tests.support.messages_server import Reply


def refuses_tools(request: dict[str, Any]) -> Reply | dict[str, Any]:
    """A model served as Ollama serves one that cannot take tools: 400 whenever tools come."""
    if "tools" in request:
        return Reply(400, chat_error("invalid_request_error", "gpt-test does not support tools"))
    return ops_model(request)


def ignores_tools(request: dict[str, Any]) -> dict[str, Any]:
    """A model that takes tools but never calls them: it answers in text."""
    if "tools" in request:
        return completion("I could call a tool, but I will just talk.")
    return ops_model(request)


def calls_tools(request: dict[str, Any]) -> dict[str, Any]:
    """ops_model, which also calls ``cairn doctor``'s ping tool when asked to."""
    if any(t["function"]["name"] == "ping" for t in request.get("tools", [])):
        return completion(calls=[tool_call("ping", {"echo": "ok"})])
    return ops_model(request)


def doctor(env: dict[str, str]) -> str:
    """Run ``cairn doctor``; its report (it exits 0: a tool-less model is a warning)."""
    done = subprocess.run(
        [*CAIRN, "doctor"], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _recorded(home: Path, url: str) -> dict[str, Any]:
    """The one finding in CAIRN_HOME, which must be keyed by the server's URL and the model."""
    [(key, finding)] = json.loads((home / FINDINGS_FILE).read_text()).items()
    assert key == f"{url.rstrip('/')} gpt-test"
    return dict(finding)


def _remember(server: ChatServer, home: Path) -> None:
    """Store FACT through a model that calls tools (told so, whatever is recorded)."""
    before, server.responder = server.responder, ops_model
    chat(_openai_env(home, server, CAIRN_MODEL_TOOLS="true"), f"remember {FACT}\n")
    server.responder = before


def _ask(server: ChatServer, home: Path, **extra: str) -> tuple[list[str], list[dict[str, Any]]]:
    """Ask for FACT in a new thread; the answers and the chat requests that turn sent."""
    sent = len(server.chat_bodies)
    out = chat(_openai_env(home, server, **extra), "which is the staging database?\n")
    return [o["text"] for o in out], server.chat_bodies[sent:]


def test_a_model_the_server_refuses_tools_for_is_recorded_and_sent_none(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with ChatServer(api_key=KEY, responder=refuses_tools) as server:
        url = server.base_url
        _remember(server, home)
        report = doctor(_openai_env(home, server))
        answers, asked = _ask(server, home)

    assert "the server refused tools for this model" in report
    assert "recorded: tools off for" in report
    assert "to override it, set CAIRN_MODEL_TOOLS=true" in report
    finding = _recorded(home, url)
    assert (finding["tools"], finding["how"]) == (False, "refused")
    assert answers == ["From the prompt: yes"]
    [body] = asked  # one request: the recorded finding, not a refused first try, decided
    assert "tools" not in body
    assert body["messages"][0]["content"].endswith(NO_TOOLS_NOTE)


def test_a_model_that_answers_in_text_is_recorded_and_a_later_doctor_refreshes_it(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    with ChatServer(api_key=KEY, responder=ignores_tools) as server:
        url = server.base_url
        _remember(server, home)
        first = doctor(_openai_env(home, server))
        off_answers, off_asked = _ask(server, home)
        off = _recorded(home, url)
        server.responder = calls_tools  # the server now serves a model that calls tools
        second = doctor(_openai_env(home, server))
        on_answers, on_asked = _ask(server, home)
        on = _recorded(home, url)

    assert "it answered in text instead" in first
    assert "recorded: tools off" in first
    assert (off["tools"], off["how"]) == (False, "text")
    assert off_answers == ["From the prompt: yes"]
    assert all("tools" not in body for body in off_asked)
    assert "it calls tools" in second
    assert "recorded: tools on" in second
    assert "to override it, set CAIRN_MODEL_TOOLS=false" in second
    assert (on["tools"], on["how"]) == (True, "called")
    assert on["found_at"] >= off["found_at"]
    assert on_answers == [f"From memory: {FACT}"]  # it called recall
    assert "recall" in {t["function"]["name"] for t in on_asked[0]["tools"]}


def test_an_explicit_model_tools_setting_wins_over_the_finding(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with ChatServer(api_key=KEY, responder=ignores_tools) as server:
        url = server.base_url
        _remember(server, home)
        report = doctor(_openai_env(home, server, CAIRN_MODEL_TOOLS="true"))
        server.responder = ops_model
        answers, asked = _ask(server, home, CAIRN_MODEL_TOOLS="true")

    assert "recorded: tools off" in report
    assert "CAIRN_MODEL_TOOLS=true is set and wins over this finding" in report
    assert _recorded(home, url)["tools"] is False
    assert answers == [f"From memory: {FACT}"]
    assert all("tools" in body for body in asked)
