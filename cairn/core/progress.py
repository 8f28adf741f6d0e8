"""Progress of long admin work (export, import, reindex, gc): a bar on a terminal, else lines.

Domain functions take an optional :data:`ProgressCallback` and call it with ``(done, total)``
as they go; they know nothing of terminals. Commands get one from :func:`progress_bar`, which
draws a rich bar on standard error when it is a terminal. When standard error is piped it
prints a plain line there every few seconds instead (a log reader sees the work advance, and
work shorter than that prints nothing), and when the command prints JSON it stays silent, so
scripted output stays exactly what it was.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

__all__ = ["LINE_INTERVAL", "ProgressCallback", "progress_bar"]

LINE_INTERVAL = 5.0
"""Seconds between two progress lines when standard error is not a terminal."""

ProgressCallback = Callable[[int, int], None]
"""Called with (items done, items in all) as work advances; ``total`` may grow."""


def _ignore(done: int, total: int) -> None:
    """The callback when nobody is watching."""


@contextmanager
def progress_bar(
    description: str,
    *,
    quiet: bool = False,
    console: Console | None = None,
    interval: float = LINE_INTERVAL,
) -> Iterator[ProgressCallback]:
    """A callback that draws ``description`` with a bar on ``console`` (standard error).

    The bar is drawn on a terminal; elsewhere the callback prints a line such as
    ``importing: 12000 of 200000 (6%), 10 s`` at most every ``interval`` seconds, and a last
    one when the block ends if it printed any. With ``quiet`` (``--json``) it does nothing.
    The bar stays on screen, complete, when the block ends.
    """
    console = console or Console(stderr=True)
    if quiet:
        yield _ignore
        return
    if not console.is_terminal:
        with _lines(description, console, interval) as report:
            yield report
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as bar:
        task = bar.add_task(description, total=None)

        def report(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield report


@contextmanager
def _lines(description: str, console: Console, interval: float) -> Iterator[ProgressCallback]:
    """Plain progress lines for a log: one every ``interval`` seconds, and the last one."""
    started = time.monotonic()
    printed_at = started
    last = printed = (0, 0)

    def line(done: int, total: int) -> None:
        nonlocal printed
        printed = (done, total)
        share = f" ({done * 100 // total}%)" if total else ""
        seconds = time.monotonic() - started
        console.print(
            f"{description}: {done} of {total}{share}, {seconds:.0f} s",
            highlight=False,
            soft_wrap=True,
        )

    def report(done: int, total: int) -> None:
        nonlocal printed_at, last
        last = (done, total)
        now = time.monotonic()
        if now - printed_at >= interval:
            printed_at = now
            line(done, total)

    yield report
    if printed != (0, 0) and printed != last:
        line(*last)
