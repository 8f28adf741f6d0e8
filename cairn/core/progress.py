"""Progress of long admin work (export, import, reindex, gc): a bar on a terminal, else silence.

Domain functions take an optional :data:`ProgressCallback` and call it with ``(done, total)``
as they go; they know nothing of terminals. Commands get one from :func:`progress_bar`, which
draws a rich bar on standard error when it is a terminal, and does nothing when standard error
is piped or the command prints JSON, so scripted output stays exactly what it was.
"""

from __future__ import annotations

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

__all__ = ["ProgressCallback", "progress_bar"]

ProgressCallback = Callable[[int, int], None]
"""Called with (items done, items in all) as work advances; ``total`` may grow."""


def _ignore(done: int, total: int) -> None:
    """The callback when nobody is watching."""


@contextmanager
def progress_bar(
    description: str, *, quiet: bool = False, console: Console | None = None
) -> Iterator[ProgressCallback]:
    """A callback that draws ``description`` with a bar on ``console`` (standard error).

    The bar is drawn only on a terminal and when not ``quiet`` (``--json``); otherwise the
    callback does nothing. The bar stays on screen, complete, when the block ends.
    """
    console = console or Console(stderr=True)
    if quiet or not console.is_terminal:
        yield _ignore
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
