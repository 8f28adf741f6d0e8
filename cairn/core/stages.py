"""Where a message's time goes: named spans, summed per message, for ``cairn bench pipeline``.

Off unless CAIRN_STAGE_LOG names a directory (read once, at import): then each process appends
one JSON line per message it handled to ``DIR/stages-PID.jsonl``, ``{"where": ..., "total":
ms, STAGE: ms, ...}``, the milliseconds spent in each named span during that message (a stage
entered several times, as the gate is by its backstops, is summed). Spans may nest: "ingest"
holds "gate". Off, a span is a shared no-op context, so the message path pays nothing for it.

The bench turns it on for its own processes and reads the lines back with :func:`read`. It
pauses recording (:func:`pause`, a marker file every process looks for per message) while it
measures throughput, whose lines it would not read: the flood then pays for no timing, as a
deployment pays for none.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from types import TracebackType
from typing import TextIO

from cairn.core.stats import percentiles

__all__ = [
    "DIRECTORY_VARIABLE",
    "message",
    "note",
    "pause",
    "read",
    "record_to",
    "span",
    "summary",
]

DIRECTORY_VARIABLE = "CAIRN_STAGE_LOG"
_PAUSED = "paused"  # a file of that name in the directory: no message is timed meanwhile

_DIRECTORY = os.environ.get(DIRECTORY_VARIABLE, "")
_OFF: AbstractContextManager[None] = nullcontext()
_local = threading.local()
_write_lock = threading.Lock()
_files: dict[int, TextIO] = {}


class _Span:
    """Adds the time spent inside it to the current message's ``name``."""

    __slots__ = ("_name", "_started")

    def __init__(self, name: str) -> None:
        self._name = name
        self._started = 0.0

    def __enter__(self) -> None:
        self._started = time.perf_counter()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        note(self._name, (time.perf_counter() - self._started) * 1000)


def note(name: str, milliseconds: float) -> None:
    """Add ``milliseconds`` to stage ``name`` of the current message (timed outside a span)."""
    current: dict[str, float] | None = getattr(_local, "current", None)
    if current is not None:
        current[name] = current.get(name, 0.0) + milliseconds


def span(name: str) -> AbstractContextManager[None]:
    """A span of stage ``name`` within the current message (a no-op when timing is off, or
    outside a message)."""
    if not _DIRECTORY or getattr(_local, "current", None) is None:
        return _OFF
    return _Span(name)


@contextmanager
def message(where: str) -> Iterator[None]:
    """Time one message's handling in ``where`` ("frontend", "worker"), with the spans inside;
    its line is written when it ends, even when it raised."""
    if (
        not _DIRECTORY
        or getattr(_local, "current", None) is not None
        or os.path.exists(os.path.join(_DIRECTORY, _PAUSED))
    ):
        yield  # off, nested in a message already timed, or paused
        return
    _local.current = {}
    started = time.perf_counter()
    try:
        yield
    finally:
        spans: dict[str, float] = _local.current
        _local.current = None
        line = {"where": where, "total": (time.perf_counter() - started) * 1000, **spans}
        _write(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in line.items()}))


def record_to(directory: Path | None) -> None:
    """Turn timing on in this process, writing under ``directory`` (None: off again)."""
    global _DIRECTORY
    with _write_lock:
        for handle in _files.values():
            handle.close()
        _files.clear()
        _DIRECTORY = str(directory) if directory is not None else ""


def pause(directory: Path, paused: bool) -> None:
    """Pause (or resume) timing in every process that records under ``directory``: a message
    that starts meanwhile is not timed and writes no line."""
    marker = directory / _PAUSED
    if paused:
        directory.mkdir(parents=True, exist_ok=True)
        marker.touch()
    else:
        marker.unlink(missing_ok=True)


def _write(line: str) -> None:
    pid = os.getpid()
    with _write_lock:
        handle = _files.get(pid)
        if handle is None:  # opened once per process (a fork gets a file of its own)
            Path(_DIRECTORY).mkdir(parents=True, exist_ok=True)
            handle = open(Path(_DIRECTORY) / f"stages-{pid}.jsonl", "a", encoding="utf-8")  # noqa: SIM115
            _files[pid] = handle
        handle.write(line + "\n")
        handle.flush()


def read(directory: Path, *, skip: dict[str, int] | None = None) -> list[dict[str, float | str]]:
    """Every line written under ``directory``; ``skip`` (file name -> lines already read) is
    updated, so that a second call returns only what was written since."""
    lines: list[dict[str, float | str]] = []
    for path in sorted(directory.glob("stages-*.jsonl")):
        text = path.read_text(encoding="utf-8")
        rows = text[: text.rfind("\n") + 1].splitlines()  # a line being written is left
        seen = skip.get(path.name, 0) if skip is not None else 0
        complete = rows[seen:]
        lines += [json.loads(r) for r in complete]
        if skip is not None:
            skip[path.name] = seen + len(complete)
    return lines


def summary(lines: list[dict[str, float | str]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per place ("frontend", "worker") and stage: p50 and p95 in ms over the messages that
    went through the stage, and how many did."""
    by_place: dict[str, dict[str, list[float]]] = {}
    for line in lines:
        place = by_place.setdefault(str(line["where"]), {})
        for stage, value in line.items():
            if stage != "where":
                place.setdefault(stage, []).append(float(value))
    return {
        place: {
            stage: {**percentiles(values, (0.5, 0.95), digits=3), "messages": len(values)}
            for stage, values in sorted(stages.items())
        }
        for place, stages in sorted(by_place.items())
    }
