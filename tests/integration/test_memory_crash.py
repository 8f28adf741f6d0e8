"""Crash safety of the write path: a process killed after the database commit and before the
vector upsert leaves the memory in the outbox, and the next start makes it searchable."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cairn.core.settings import load_settings
from cairn.memory import Scope
from cairn.runtime import build_runtime

# The child process remembers a fact, but dies (SIGKILL, no cleanup) the moment the store
# hands the memory to the vector index: the database has committed, the index has nothing.
CHILD = textwrap.dedent(
    """
    import os, signal
    from cairn.core.settings import load_settings
    from cairn.memory import Scope
    from cairn.memory.index import EdgeIndex, QdrantIndex
    from cairn.runtime import build_runtime

    def die(self, items):
        if items:
            os.kill(os.getpid(), signal.SIGKILL)

    EdgeIndex.upsert = die
    QdrantIndex.upsert = die
    rt = build_runtime(load_settings())
    rt.memory.remember("The incident bridge is on channel 7", Scope("acme", "ops"))
    raise SystemExit("not reached: the process should have been killed")
    """
)


@pytest.mark.slow
def test_a_memory_committed_before_a_crash_is_searchable_after_restart(
    clean_env: Path,
) -> None:
    child = subprocess.run(
        [sys.executable, "-c", CHILD],
        env={**os.environ, "CAIRN_HOME": str(clean_env)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == -9, child.stderr
    rt = build_runtime(load_settings())  # the restart: build_runtime reconciles the outbox
    try:
        assert rt.memory.pending_outbox() == 0
        assert rt.memory.index is not None
        found = rt.memory.candidates("incident bridge channel", Scope("acme", "ops"), 5)
        assert not found.degraded
        assert found.lexical  # served by the index, not the database fallback
        assert rt.memory.recall("where is the incident bridge?", Scope("acme", "ops"), 1)[
            0
        ].memory.text == ("The incident bridge is on channel 7")
    finally:
        rt.close()
