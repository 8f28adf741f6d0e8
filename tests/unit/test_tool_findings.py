"""The findings file of ``cairn doctor``: what the OpenAI-compatible adapter does with it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cairn.core.settings import load_settings
from cairn.llm.openai import OpenAILLM
from cairn.llm.tool_findings import FINDINGS_FILE, TRUSTED_FOR, ToolFinding, ToolFindings

URL = "http://127.0.0.1:9/v1"


def _adapter(home: Path, **extra: str) -> OpenAILLM:
    given = {"CAIRN_LLM": "openai", "OPENAI_BASE_URL": URL, "CAIRN_MODEL": "m", **extra}
    settings = load_settings(CAIRN_HOME=str(home), **given)
    return OpenAILLM.from_settings(settings)


def _record(home: Path, tools: bool, age: timedelta) -> None:
    finding = ToolFinding(tools, "called" if tools else "text", datetime.now(UTC) - age)
    ToolFindings(home).record(f"{URL} m", finding)


def test_a_recent_finding_decides_when_the_setting_is_unset(tmp_path: Path) -> None:
    _record(tmp_path, False, timedelta(days=1))
    llm = _adapter(tmp_path)
    assert llm.tools is False
    assert llm.tools_source.startswith("cairn doctor on ")


def test_a_finding_older_than_it_is_trusted_for_is_not_used_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _record(tmp_path, False, TRUSTED_FOR + timedelta(hours=1))
    llm = _adapter(tmp_path)
    assert llm.tools is True
    assert llm.tools_source == "the default"
    assert "run `cairn doctor` to probe afresh" in caplog.text


def test_another_model_or_server_is_not_decided_by_the_finding(tmp_path: Path) -> None:
    _record(tmp_path, False, timedelta(days=1))
    assert _adapter(tmp_path, CAIRN_MODEL="other").tools is True


def test_the_setting_wins_over_the_finding(tmp_path: Path) -> None:
    _record(tmp_path, False, timedelta(days=1))
    llm = _adapter(tmp_path, CAIRN_MODEL_TOOLS="true")
    assert (llm.tools, llm.tools_source) == (True, "CAIRN_MODEL_TOOLS=true")


def test_an_unreadable_file_is_ignored_and_rewritten_whole(tmp_path: Path) -> None:
    (tmp_path / FINDINGS_FILE).write_text("{not json")
    assert _adapter(tmp_path).tools is True
    _record(tmp_path, True, timedelta(0))
    assert ToolFindings(tmp_path).get(f"{URL} m") is not None
    assert not list(tmp_path.glob(".model_tools-*"))
