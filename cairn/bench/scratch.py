"""A runtime of a benchmark's own, so that no bench reads or writes CAIRN_HOME's data."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cairn.core.settings import load_settings
from cairn.runtime import Runtime, build_runtime

__all__ = ["scratch_runtime"]


@contextmanager
def scratch_runtime(name: str, **overrides: Any) -> Iterator[Runtime]:
    """A runtime on SQLite and the embedded vector index in a temporary folder, in-process
    and offline, with agent ``cairn``; ``overrides`` are further settings by variable name."""
    with tempfile.TemporaryDirectory(prefix=f"cairn-bench-{name}-") as tmp:
        settings = load_settings(
            CAIRN_HOME=tmp,
            CAIRN_DATABASE_URL=f"sqlite:///{Path(tmp) / 'bench.db'}",
            CAIRN_QDRANT_URL=None,
            CAIRN_BROKER_URL=None,
            CAIRN_REDIS_URL=None,
            CAIRN_LLM="offline",
            CAIRN_AGENT="cairn",
            CAIRN_UNTRUSTED_USERS=[],
            **overrides,
        )
        rt = build_runtime(settings)
        try:
            yield rt
        finally:
            rt.close()
