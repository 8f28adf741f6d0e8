"""`cairn --help` lists every command without importing the heavy ones, and says the same."""

from __future__ import annotations

import subprocess
import sys

import click

from cairn.cli import main
from cairn.commands.common import LazyGroup


def _lazy_groups(group: click.Group, ctx: click.Context) -> list[LazyGroup]:
    found = [group] if isinstance(group, LazyGroup) else []
    for name in group.list_commands(ctx):
        command = group.commands.get(name)
        if isinstance(command, click.Group):
            found.extend(_lazy_groups(command, ctx))
    return found


def test_each_lazy_entry_names_a_command_with_that_short_help() -> None:
    ctx = click.Context(main)
    groups = _lazy_groups(main, ctx)
    assert {g.name for g in groups} == {"main", "bench", "session"}
    for group in groups:
        for name, (_path, short_help) in group.lazy.items():
            command = group.get_command(ctx, name)
            assert command is not None, f"{group.name} {name}"
            assert command.get_short_help_str(1000) == short_help, f"{group.name} {name}"


def test_help_lists_lazy_commands_without_importing_them() -> None:
    probe = (
        "import sys\n"
        "from cairn.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in ('cairn.memory.store', 'cairn.bench.pipeline', 'cairn.bench.memory')"
        " if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert "HEAVY []" in done.stdout
    for name in ("memory", "memo", "bench", "session", "chat", "run", "worker"):
        assert f"\n  {name} " in done.stdout
