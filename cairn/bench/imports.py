"""``cairn bench import``: peak memory (RSS) of ``cairn memory import`` and ``export`` by size.

For each size a file of that many distinct memories is generated, then imported into a fresh
``CAIRN_HOME`` by a ``cairn memory import`` child process, then exported again by a ``cairn
memory export`` child; the peak resident set of each child is read from the kernel's
accounting of it (``wait4``), so the figure is the whole process's, interpreter included. A
streaming import and export keep the same peak whatever the size (docs/adr/0038).

Vectors are left out by default (``CAIRN_EMBEDDINGS=none``): the embedding model's own memory
and time would hide what the import holds; ``--embeddings`` sets another value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import click

__all__ = ["ImportFigures", "import_command", "measure", "peak_of", "write_records"]

_KINDS = ("fact", "decision", "preference", "pattern", "constraint")
_SERVICES = ("payments", "billing", "search", "ledger", "auth", "gateway", "mailer", "ingest")


@dataclass(frozen=True, slots=True)
class ImportFigures:
    """What one size cost: records, seconds and peak RSS (MiB) of the import and the export."""

    records: int
    import_seconds: float
    import_peak_mib: float
    export_seconds: float
    export_peak_mib: float


def write_records(path: Path, count: int, tenant: str = "console") -> None:
    """Write ``count`` distinct exported memories of ``tenant`` (agent ops, private) to ``path``."""
    with path.open("w", encoding="utf-8") as f:
        for n in range(count):
            service = _SERVICES[n % len(_SERVICES)]
            text = f"The {service} service runs release {n} on host node-{n % 977}.internal"
            record = {
                "format": "cairn.memory/1",
                "tenant_id": tenant,
                "agent": "ops",
                "visibility": "private",
                "kind": _KINDS[n % len(_KINDS)],
                "text": text,
                "author": f"user{n % 31}",
                "created_at": "2026-01-02T03:04:05+00:00",
            }
            f.write(json.dumps(record) + "\n")


def peak_of(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run ``args``; return (seconds, peak RSS in MiB). Raises ClickException when it fails."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as stderr:
        # Our own interpreter running cairn, with arguments built above.
        child = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=stderr)  # noqa: S603
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            stderr.seek(0)
            said = stderr.read().decode(errors="replace").strip()[-500:]
            raise click.ClickException(f"{' '.join(args[2:])} failed: {said}")
    return seconds, usage.ru_maxrss / 1024  # Linux reports KiB


def measure(count: int, workdir: Path, embeddings: str = "none") -> ImportFigures:
    """Import and export ``count`` generated records in a fresh home under ``workdir``."""
    home = workdir / f"home-{count}"
    source = workdir / f"records-{count}.jsonl"
    write_records(source, count)
    # The embedded default (an SQLite file in the home), whatever the caller's environment says.
    env = {k: v for k, v in os.environ.items() if k != "CAIRN_DATABASE_URL"}
    env |= {"CAIRN_HOME": str(home), "CAIRN_EMBEDDINGS": embeddings}
    cairn = [sys.executable, "-m", "cairn", "memory"]
    import_seconds, import_peak = peak_of(
        [*cairn, "import", str(source), "--tenant", "console"], env
    )
    export_seconds, export_peak = peak_of(
        [*cairn, "export", "--tenant", "console", "-o", str(workdir / f"out-{count}.jsonl")], env
    )
    return ImportFigures(count, import_seconds, import_peak, export_seconds, export_peak)


@click.command("import")
@click.option(
    "--records",
    "sizes",
    type=click.IntRange(1, 10_000_000),
    multiple=True,
    default=(20_000, 200_000),
    show_default=True,
    help="Sizes to measure (repeat the option).",
)
@click.option(
    "--embeddings", default="none", show_default=True, help="CAIRN_EMBEDDINGS for the children."
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def import_command(sizes: tuple[int, ...], embeddings: str, as_json: bool) -> None:
    """Peak RSS of `cairn memory import` and `export` at each size (flat is the goal)."""
    with tempfile.TemporaryDirectory(prefix="cairn-bench-import-") as tmp:
        figures = [measure(n, Path(tmp), embeddings) for n in sizes]
    if as_json:
        click.echo(json.dumps([asdict(f) for f in figures], indent=2))
        return
    click.echo(f"{'records':>9}  {'import s':>9}  {'import MiB':>10}  {'export s':>9}  export MiB")
    for f in figures:
        click.echo(
            f"{f.records:>9}  {f.import_seconds:>9.1f}  {f.import_peak_mib:>10.1f}  "
            f"{f.export_seconds:>9.1f}  {f.export_peak_mib:>10.1f}"
        )
    if len(figures) > 1:
        low, high = figures[0], figures[-1]
        click.echo(
            f"peak ratio {high.records}/{low.records}: import "
            f"{high.import_peak_mib / low.import_peak_mib:.2f}, export "
            f"{high.export_peak_mib / low.export_peak_mib:.2f}"
        )
