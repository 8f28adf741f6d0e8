"""The Matrix frontend refuses, at start, settings it cannot honour."""

from __future__ import annotations

import pytest
from nio.crypto import ENCRYPTION_ENABLED

from cairn.bot.matrix import MatrixFrontend
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


@pytest.mark.skipif(ENCRYPTION_ENABLED, reason="matrix-nio's e2e extra is installed here")
def test_encryption_without_the_e2e_extra_is_refused_with_what_to_install(
    matrix_env: None, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_MATRIX_ENCRYPTION", "true")
    pipeline = Pipeline(runtime, InProcessDispatcher())
    with pytest.raises(ConfigError, match=r"cairn-bot\[matrix-e2e\]"):
        MatrixFrontend(pipeline, load_settings())


def test_the_tenant_is_the_bots_homeserver(matrix_env: None, runtime: Runtime) -> None:
    frontend = MatrixFrontend(Pipeline(runtime, InProcessDispatcher()), load_settings())
    assert frontend.tenant == "matrix:example.org"
    assert not frontend.healthy()  # not synced yet
