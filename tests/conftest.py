"""Shared fixtures: a clean Cairn environment per test, and a runtime on real storage."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.core.settings import Settings, get_settings, load_settings
from cairn.runtime import Runtime, build_runtime, reset_runtime

pytest_plugins = ["tests.services"]

# Variables a developer's shell may set that would leak into tests.
_OWN_PREFIXES = ("CAIRN_", "SLACK_", "MATRIX_", "ANTHROPIC_", "OPENAI_", "AZURE_OPENAI_")


@pytest.fixture(autouse=True)
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test starts with no Cairn settings but a fresh CAIRN_HOME in its tmp folder."""
    for name in list(os.environ):
        if name.startswith(_OWN_PREFIXES) and name not in {
            "CAIRN_REQUIRE_SERVICES",
            "CAIRN_TEST_REDIS_URL",
            "CAIRN_TEST_POSTGRES_URL",
        }:
            monkeypatch.delenv(name)
    home = tmp_path / "cairn-home"
    monkeypatch.setenv("CAIRN_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()
    yield home
    get_settings.cache_clear()
    reset_runtime(None)


@pytest.fixture
def settings(clean_env: Path) -> Settings:
    """Settings of the embedded default in the test's CAIRN_HOME."""
    return load_settings()


@pytest.fixture
def runtime(settings: Settings) -> Iterator[Runtime]:
    """A runtime on SQLite and local-mode Qdrant in the test's CAIRN_HOME, offline model."""
    rt = build_runtime(settings)
    reset_runtime(rt)
    yield rt
    reset_runtime(None)
