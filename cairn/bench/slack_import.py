"""``cairn bench slack-import``: messages/s, peak RSS and database size of ``cairn import slack``.

For each size a Slack export of that many messages over 50 conversations (30 public channels,
10 private ones, 6 DMs, 4 group DMs; threads, edits, files, bots, joins) is written by
:mod:`cairn.bench.slack_export`, then imported into a fresh ``CAIRN_HOME`` by a ``cairn import
slack`` child process, whose peak resident set is read from the kernel's accounting of it (as
``cairn bench import`` does), and imported a second time (idempotence: nothing is added). A
streaming import keeps the same peak whatever the size (docs/adr/0042).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import click

from cairn.bench.imports import _peak_of
from cairn.bench.slack_export import write_export

__all__ = ["SlackImportFigures", "measure", "slack_import_command"]

# 50 conversations, as the issue asks: public, private, DMs, group DMs.
_PUBLIC, _PRIVATE, _DMS, _MPIMS = 30, 10, 6, 4
_CONVERSATIONS = _PUBLIC + _PRIVATE + _DMS + _MPIMS
_PER_DAY = 100


@dataclass(frozen=True, slots=True)
class SlackImportFigures:
    """One size: messages in the export, episodes stored, seconds, messages/s, peak RSS (MiB),
    database size (MiB), and what a second run of the same import stored (0 is the goal)."""

    messages: int
    stored: int
    seconds: float
    messages_per_second: float
    peak_mib: float
    database_mib: float
    second_run_stored: int
    second_run_seconds: float


def measure(messages: int, workdir: Path, embeddings: str) -> SlackImportFigures:
    """Write an export of about ``messages`` messages and import it twice in a fresh home."""
    days = max(1, round(messages / (_CONVERSATIONS * _PER_DAY)))
    per_day = max(1, round(messages / (_CONVERSATIONS * days)))
    export = workdir / f"export-{messages}.zip"
    written = write_export(
        export,
        public=_PUBLIC,
        private=_PRIVATE,
        dms=_DMS,
        mpims=_MPIMS,
        days=days,
        per_day=per_day,
    )
    home = workdir / f"home-{messages}"
    env = {k: v for k, v in os.environ.items() if k != "CAIRN_DATABASE_URL"}
    env |= {"CAIRN_HOME": str(home), "CAIRN_EMBEDDINGS": embeddings}
    command = [sys.executable, "-m", "cairn", "import", "slack", str(export), "--json"]
    seconds, peak = _peak_of(command, env)
    stored = _memories(home / "cairn.db")
    again_seconds, _ = _peak_of(command, env)
    again = _memories(home / "cairn.db") - stored
    database = (home / "cairn.db").stat().st_size / 2**20
    return SlackImportFigures(
        written.messages,
        stored,
        round(seconds, 1),
        round(written.messages / seconds, 1),
        round(peak, 1),
        round(database, 1),
        again,
        round(again_seconds, 1),
    )


def _memories(path: Path) -> int:
    """How many memories the database at ``path`` holds."""
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT count(*) FROM memory").fetchone()[0])


@click.command("slack-import")
@click.option(
    "--messages",
    "sizes",
    type=click.IntRange(_CONVERSATIONS, 10_000_000),
    multiple=True,
    default=(20_000, 100_000),
    show_default=True,
    help="Export sizes to measure, in messages over 50 conversations (repeat the option).",
)
@click.option(
    "--embeddings",
    default="auto",
    show_default=True,
    help="CAIRN_EMBEDDINGS for the children (auto: the packaged model; none: no vectors).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def slack_import_command(sizes: tuple[int, ...], embeddings: str, as_json: bool) -> None:
    """Messages/s, peak RSS and database size of `cairn import slack` at each size."""
    with tempfile.TemporaryDirectory(prefix="cairn-bench-slack-") as tmp:
        figures = [measure(n, Path(tmp), embeddings) for n in sizes]
    if as_json:
        click.echo(json.dumps([asdict(f) for f in figures], indent=2))
        return
    click.echo(f"{'messages':>9}  {'stored':>7}  {'s':>7}  {'msg/s':>7}  {'peak MiB':>8}  db MiB")
    for f in figures:
        click.echo(
            f"{f.messages:>9}  {f.stored:>7}  {f.seconds:>7.1f}  {f.messages_per_second:>7.1f}  "
            f"{f.peak_mib:>8.1f}  {f.database_mib:>6.1f}  (again: {f.second_run_stored} stored "
            f"in {f.second_run_seconds:.1f} s)"
        )
