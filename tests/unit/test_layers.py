"""The layering of docs/adr/0020 holds: import-linter's contracts are kept, every top-level part
of ``cairn`` is in a layer, and the ADR's diagram lists the layers the contracts check."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import cairn

ROOT = Path(__file__).resolve().parents[2]
ADR = ROOT / "docs" / "adr" / "0020-layers-that-only-look-down.md"


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _layers() -> list[list[str]]:
    [contract] = [c for c in _contracts() if c["type"] == "layers"]
    rows = contract["layers"]
    assert isinstance(rows, list)
    return [[name.strip() for name in re.split(r"[|:]", row)] for row in rows]


def test_import_contracts_are_kept() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint is not None, "import-linter is not installed (it is in the [test] extra)"
    done = subprocess.run(
        [lint, "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    kept = re.findall(r"^(.+) KEPT$", done.stdout, re.MULTILINE)
    assert len(kept) == len(_contracts()) >= 2, done.stdout


def test_every_part_of_cairn_is_in_a_layer() -> None:
    named = {name for row in _layers() for name in row}
    package = Path(cairn.__file__).parent
    parts = {
        f"cairn.{path.stem}"
        for path in package.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__")
        or (path.is_dir() and (path / "__init__.py").exists())
    }
    assert parts == named, f"not in a layer: {sorted(parts - named)}; gone: {sorted(named - parts)}"


def test_the_adr_diagram_lists_the_layers_the_contracts_check() -> None:
    text = ADR.read_text()
    block = re.search(r"```text\n(.*?)```", text, re.DOTALL)
    assert block is not None, "the ADR has no diagram"
    drawn = [
        sorted(re.findall(r"cairn(?:\.\w+)?", line.split("  ")[0]))
        for line in block.group(1).splitlines()
        if line.startswith("cairn")
    ]
    assert drawn == [sorted(row) for row in _layers()]
