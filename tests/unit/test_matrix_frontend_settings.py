"""The Matrix frontend refuses, at start, settings it cannot honour."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from nio.crypto import ENCRYPTION_ENABLED

from cairn.bot.matrix import MatrixFrontend
from cairn.bot.matrix.store import AccountLock, CryptoStore
from cairn.bot.pipeline import Pipeline
from cairn.core.errors import ConfigError
from cairn.core.settings import load_settings
from cairn.runtime import Runtime
from cairn.workers.dispatch import InProcessDispatcher


@pytest.fixture
def matrix_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIX_HOMESERVER", "http://127.0.0.1:9")
    monkeypatch.setenv("MATRIX_USER_ID", "@cairn:example.org")
    monkeypatch.setenv("MATRIX_PASSWORD", "secret")


def test_encryption_is_in_the_default_install() -> None:
    assert ENCRYPTION_ENABLED  # vodozemac comes with cairn-bot's own dependencies


def test_one_store_is_held_by_one_frontend_and_a_second_is_told_which_process_has_it(
    tmp_path: Path,
) -> None:
    store = CryptoStore(tmp_path / "store", "@cairn:example.org")
    assert store.holder() is None
    with AccountLock(store):
        assert store.holder() == os.getpid()
        with pytest.raises(ConfigError, match=rf"process {os.getpid()}.*@cairn:example.org"):
            AccountLock(store).__enter__()
    assert store.holder() is None
    with AccountLock(store):  # free again once the first let go
        assert store.lock_path.read_text().strip() == str(os.getpid())


def test_the_store_is_in_cairn_home_unless_named(
    matrix_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "home"))
    settings = load_settings()
    assert settings.matrix.store_dir(settings.home_dir) == tmp_path / "home" / "matrix" / "store"
    monkeypatch.setenv("CAIRN_MATRIX_STORE", str(tmp_path / "keys"))
    settings = load_settings()
    assert settings.matrix.store_dir(settings.home_dir) == tmp_path / "keys"


def test_the_tenant_is_the_bots_homeserver(matrix_env: None, runtime: Runtime) -> None:
    frontend = MatrixFrontend(Pipeline(runtime, InProcessDispatcher()), load_settings())
    assert frontend.tenant == "matrix:example.org"
    assert not frontend.healthy()  # not synced yet
