"""``cairn bench slack-import``: messages/s, peak RSS and database size of ``cairn import slack``.

For each size a Slack export of that many messages over 50 conversations (30 public channels,
10 private ones, 6 DMs, 4 group DMs; threads, edits, files, bots, joins) is written by
:mod:`cairn.bench.slack_export`, then imported into a fresh ``CAIRN_HOME`` by a ``cairn import
slack`` child process, whose peak resident set is read from the kernel's accounting of it (as
``cairn bench import`` does), and imported a second time (idempotence: nothing is added). A
streaming import keeps the same peak whatever the size (docs/adr/0042).

With ``--kill-at F`` the first run is killed (SIGKILL) once it has stored that fraction of the
export's messages, and the next run resumes it. Whatever the option, the figures say what the
home holds at the end: people's messages missing, stored twice, and kept outside their
conversation's privacy (a private channel's, DM's or group DM's message not private to it, or a
public channel's message kept private). All three are 0 when the import is right.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import click

from cairn.bench.imports import peak_of
from cairn.bench.slack_export import write_export

__all__ = ["SlackImportFigures", "measure", "slack_import_command"]

# 50 conversations, as the issue asks: public, private, DMs, group DMs.
_PUBLIC, _PRIVATE, _DMS, _MPIMS = 30, 10, 6, 4
_CONVERSATIONS = _PUBLIC + _PRIVATE + _DMS + _MPIMS
_PER_DAY = 100


@dataclass(frozen=True, slots=True)
class SlackImportFigures:
    """One size: messages in the export, episodes stored, seconds, messages/s, peak RSS (MiB),
    database size (MiB), and what a second run of the same import stored (0 is the goal).

    With a kill, ``killed_at`` is the episodes stored when the first run was killed, and
    ``seconds`` and ``peak_mib`` cover the killed run and the one that resumed it. ``missing``,
    ``doubled`` and ``not_private`` are checks of the home at the end (0 is the goal)."""

    messages: int
    stored: int
    seconds: float
    messages_per_second: float
    peak_mib: float
    database_mib: float
    second_run_stored: int
    second_run_seconds: float
    missing: int
    doubled: int
    not_private: int
    killed_at: int | None = None


def measure(
    messages: int, workdir: Path, embeddings: str, kill_at: float | None = None
) -> SlackImportFigures:
    """Write an export of about ``messages`` messages and import it twice in a fresh home; with
    ``kill_at``, the first import is killed once it has stored that fraction and resumed."""
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
    people = sum(written.human.values())
    killed_at, killed_seconds, killed_peak = None, 0.0, 0.0
    if kill_at is not None:
        killed_at, killed_seconds, killed_peak = _killed(command, env, home, int(people * kill_at))
    seconds, peak = peak_of(command, env)
    seconds, peak = seconds + killed_seconds, max(peak, killed_peak)
    stored = _memories(home / "cairn.db")
    again_seconds, _ = peak_of(command, env)
    again = _memories(home / "cairn.db") - stored
    database = (home / "cairn.db").stat().st_size / 2**20
    public = {cid for cid in written.conversations.values() if cid.startswith("C")}
    missing, doubled, not_private = _checked(home / "cairn.db", people, public)
    return SlackImportFigures(
        written.messages,
        stored,
        round(seconds, 1),
        round(written.messages / seconds, 1),
        round(peak, 1),
        round(database, 1),
        again,
        round(again_seconds, 1),
        missing,
        doubled,
        not_private,
        killed_at,
    )


def _killed(
    command: list[str], env: dict[str, str], home: Path, when: int
) -> tuple[int, float, float]:
    """Start ``command`` and SIGKILL it once the home holds ``when`` memories; return what it
    held then, the seconds it ran and its peak RSS (MiB)."""
    started = time.perf_counter()
    # Our own interpreter running cairn, with arguments built by measure().
    child = subprocess.Popen(  # noqa: S603
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    while child.poll() is None and _memories(home / "cairn.db") < when:
        time.sleep(0.2)
    if child.poll() is not None:
        raise click.ClickException(
            f"the import ended (exit {child.returncode}) before it stored {when} messages, "
            "so it could not be killed part-way; use a larger --messages or a smaller --kill-at"
        )
    os.kill(child.pid, signal.SIGKILL)
    _, _, usage = os.wait4(child.pid, 0)
    child.returncode = -signal.SIGKILL
    return _memories(home / "cairn.db"), time.perf_counter() - started, usage.ru_maxrss / 1024


def _memories(path: Path) -> int:
    """How many memories the database at ``path`` holds (0 before the import made it)."""
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
            return int(db.execute("SELECT count(*) FROM memory").fetchone()[0])
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc) or not path.exists():
            return 0
        raise


def _checked(path: Path, people: int, public: set[str]) -> tuple[int, int, int]:
    """People's messages not stored, messages stored more than once, and messages kept
    outside their conversation's privacy, in the home's database at ``path``."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        rows = db.execute(
            "SELECT source_channel, source_message, private_to FROM memory"
        ).fetchall()
    distinct = {(channel, message) for channel, message, _ in rows}
    not_private = sum(
        1
        for channel, _, private_to in rows
        if private_to != (None if channel in public else channel)
    )
    return max(0, people - len(distinct)), len(rows) - len(distinct), not_private


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
@click.option(
    "--kill-at",
    type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
    default=None,
    help="SIGKILL the first import once it has stored this fraction of the messages (0.5: "
    "half), then resume it; the figures cover both runs. Default: no kill.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def slack_import_command(
    sizes: tuple[int, ...], embeddings: str, kill_at: float | None, as_json: bool
) -> None:
    """Messages/s, peak RSS and database size of `cairn import slack` at each size.

    Each size is an export generated over 50 conversations and imported by a child process
    into a fresh home, then imported again (the second run must store nothing). The last
    columns check the home: messages missing, stored twice, or kept outside their
    conversation's privacy (0 is right). `--kill-at 0.5` kills the first run half-way and
    resumes it, to show that a killed import loses nothing.
    """
    with tempfile.TemporaryDirectory(prefix="cairn-bench-slack-") as tmp:
        figures = [measure(n, Path(tmp), embeddings, kill_at) for n in sizes]
    if as_json:
        click.echo(json.dumps([asdict(f) for f in figures], indent=2))
        return
    click.echo(
        f"{'messages':>9}  {'stored':>7}  {'s':>7}  {'msg/s':>7}  {'peak MiB':>8}  {'db MiB':>6}"
        f"  {'missing':>7}  {'doubled':>7}  {'not private':>11}"
    )
    for f in figures:
        click.echo(
            f"{f.messages:>9}  {f.stored:>7}  {f.seconds:>7.1f}  {f.messages_per_second:>7.1f}  "
            f"{f.peak_mib:>8.1f}  {f.database_mib:>6.1f}  {f.missing:>7}  {f.doubled:>7}  "
            f"{f.not_private:>11}  (again: {f.second_run_stored} stored in "
            f"{f.second_run_seconds:.1f} s"
            + (f"; killed at {f.killed_at} stored, then resumed)" if f.killed_at else ")")
        )
