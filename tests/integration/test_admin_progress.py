"""Progress of long admin work: export, import, gc and reindex drive their progress to the end,
draw a bar only on a terminal, and leave piped and --json output exactly as it was."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

from rich.console import Console

from cairn.core.progress import progress_bar
from cairn.memory import Scope
from cairn.memory.portable import export_memories, import_memories
from cairn.memory.reindex import reindex
from cairn.memory.tiers import collect_garbage
from cairn.runtime import Runtime

FACTS = [f"service {n} is owned by team {n % 3}" for n in range(12)]


class _Heard:
    """Records what a progress callback was told."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, done: int, total: int) -> None:
        assert 0 <= done <= total
        self.calls.append((done, total))

    @property
    def last(self) -> tuple[int, int]:
        return self.calls[-1]


def _seed(rt: Runtime) -> None:
    for fact in FACTS:
        rt.memory.remember(fact, Scope("console", "cairn"))


_SEED = """
from cairn.core.settings import load_settings
from cairn.memory import Scope
from cairn.runtime import build_runtime

def seed(facts):
    rt = build_runtime(load_settings())
    for fact in facts:
        rt.memory.remember(fact, Scope("console", "cairn"))
    rt.close()
"""


def test_export_import_gc_and_reindex_drive_their_progress_to_the_total(
    runtime: Runtime,
) -> None:
    _seed(runtime)
    n = len(FACTS)

    exported = _Heard()
    lines = list(export_memories(runtime.db, "console", progress=exported))
    assert len(lines) == n
    assert exported.last == (n, n)  # told once a batch, and at the end

    imported = _Heard()
    report = import_memories(runtime.db, lines, tenant="globex", move=True, progress=imported)
    assert report.imported == n
    assert imported.last == (n, n)

    indexed = _Heard()
    assert runtime.memory.flush_outbox(limit=5, progress=indexed) == n
    assert indexed.calls == [(5, n), (10, n), (n, n)]

    collected = _Heard()
    gc = collect_garbage(runtime.db, "console", runtime.settings.memory, progress=collected)
    assert gc.pruned == 0
    assert collected.last == (n, n)

    rebuilt = _Heard()
    again = reindex(runtime.memory, progress=rebuilt)
    assert again.queued == 2 * n
    assert again.pending == 0
    assert rebuilt.last == (2 * n, 2 * n)


def test_the_bar_is_drawn_on_a_terminal_and_nowhere_else() -> None:
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=80)
    with progress_bar("reindexing", console=terminal) as report:
        for done in range(1, 4):
            report(done, 3)
    assert "reindexing" in screen.getvalue()
    assert "3/3" in screen.getvalue()

    for console, quiet in (
        (Console(file=io.StringIO(), force_terminal=False), False),  # piped
        (Console(file=io.StringIO(), force_terminal=True), True),  # --json
    ):
        with progress_bar("reindexing", console=console, quiet=quiet) as report:
            report(3, 3)
        assert console.file.getvalue() == ""  # type: ignore[attr-defined]


def test_piped_admin_commands_print_only_their_output() -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args],
            capture_output=True,
            text=True,
            env=os.environ.copy(),
            timeout=120,
            check=True,
        )

    def cairn(*args: str) -> subprocess.CompletedProcess[str]:
        return run("-m", "cairn", *args)

    # Seeded in a process of its own: the embedded index folder admits one process at a time.
    run("-c", f"{_SEED}\nseed({FACTS!r})")
    exported = cairn("memory", "export", "--tenant", "console")
    assert [json.loads(line)["text"] for line in exported.stdout.splitlines()] == FACTS
    reindexed = cairn("memory", "reindex", "--json")
    assert json.loads(reindexed.stdout) == {"queued": 12, "applied": 12, "pending": 0}
    collected = cairn("memory", "gc", "--tenant", "console", "--json")
    assert json.loads(collected.stdout)["pruned"] == 0
    for done in (exported, reindexed, collected):
        assert "━" not in done.stderr  # no bar
        assert "\r" not in done.stderr  # no redraws
        assert "\x1b[" not in done.stderr  # no terminal codes
