"""The log lines a benchmark's run writes, captured as Cairn writes them, so that a bench can
look for what should never be logged."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from cairn.core.logs import configure_logging

__all__ = ["captured_logs"]


@contextmanager
def captured_logs(secrets: Sequence[str] = ()) -> Iterator[list[str]]:
    """Every log line of any level written inside the block, in the list yielded (filled when
    the block ends), each as Cairn's configured handler writes it to a file or a pipe: with its
    redaction (``secrets`` are the configured secret values) and one JSON object a line.

    Meanwhile Cairn's own handler (on standard error) is set aside, so that the debug lines do
    not reach the terminal; it is put back, with the root logger's level, when the block ends.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    lines: list[str] = []
    configure_logging("DEBUG", secrets=secrets, stream=stream, as_json=True)
    try:
        yield lines
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        lines.extend(stream.getvalue().splitlines())
