"""The context engine's settings: read from CAIRN_CONTEXT_*, contradictions refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.core.errors import ConfigError
from cairn.core.settings import load_settings


def test_the_engine_reads_its_tuning_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_CONTEXT_MODE", "classic")
    monkeypatch.setenv("CAIRN_CONTEXT_SOFT_AFTER", "4")
    monkeypatch.setenv("CAIRN_CONTEXT_HARD_AFTER", "9")
    monkeypatch.setenv("CAIRN_CONTEXT_WEIGHT_RELEVANCE", "3.5")
    monkeypatch.setenv("CAIRN_CONTEXT_COMPACT_AT", "0.5")
    config = load_settings().context
    assert (config.mode, config.soft_after, config.hard_after) == ("classic", 4, 9)
    assert (config.weight_relevance, config.compact_at) == (3.5, 0.5)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"CAIRN_CONTEXT_SOFT_AFTER": "30", "CAIRN_CONTEXT_HARD_AFTER": "10"},
         "CAIRN_CONTEXT_SOFT_AFTER must be below CAIRN_CONTEXT_HARD_AFTER"),
        ({"CAIRN_CONTEXT_COMPACT_AT": "0.9", "CAIRN_CONTEXT_EMERGENCY_AT": "0.8"},
         "CAIRN_CONTEXT_COMPACT_AT must be below CAIRN_CONTEXT_EMERGENCY_AT"),
        ({"CAIRN_CONTEXT_MODE": "verbatim"}, "CAIRN_CONTEXT_MODE"),
        ({"CAIRN_CONTEXT_EMERGENCY_AT": "1.5"}, "CAIRN_CONTEXT_EMERGENCY_AT"),
    ],
)  # fmt: skip
def test_contradictory_engine_settings_stop_with_the_variable_named(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], named: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=named):
        load_settings()


def test_the_engine_recalls_its_memory_pool_and_classic_mode_recall_k(tmp_path: Path) -> None:
    from cairn.core.settings import ContextSettings
    from cairn.db import Database
    from cairn.memory.context.engine import ContextEngine

    db = Database(f"sqlite:///{tmp_path / 'c.db'}")
    engine = ContextEngine(db, ContextSettings(memory_pool=60))
    classic = ContextEngine(db, ContextSettings(mode="classic", memory_pool=60))
    assert (engine.recall_size(5), engine.recall_size(80)) == (60, 80)
    assert classic.recall_size(5) == 5  # classic shows every recalled memory: no pool
    db.dispose()


def test_the_memory_pool_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().context.memory_pool == 30
    monkeypatch.setenv("CAIRN_CONTEXT_MEMORY_POOL", "120")
    assert load_settings().context.memory_pool == 120
