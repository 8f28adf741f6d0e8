"""A benchmark's corpus read as JSON: the one shipped with Cairn, or a file of one's own."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import click

from cairn.core.errors import InvalidInput

__all__ = ["corpus_items", "corpus_option"]

F = TypeVar("F", bound=Callable[..., Any])


def corpus_option(shape: str) -> Callable[[F], F]:
    """The ``--corpus FILE`` option of a bench whose corpus entries are ``shape`` (said in
    the help); the command gets a Path, or None for the shipped corpus."""
    return click.option(
        "--corpus",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help=f"A corpus of your own ({shape}); default: the one shipped with Cairn.",
    )


def corpus_items(shipped: str, path: Path | None = None) -> tuple[list[Any], str]:
    """The JSON list of entries in ``path``, or in the corpus file ``shipped`` with Cairn (in
    cairn.bench) when there is none, and the name to give it in an error about an entry.

    Raises InvalidInput when the file is not JSON or not a JSON list; its entries are the
    caller's to check.
    """
    if path is None:
        raw = resources.files("cairn.bench").joinpath(shipped).read_text("utf-8")
        where = "the shipped corpus"
    else:
        raw, where = path.read_text("utf-8"), str(path)
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InvalidInput(f"{where} is not JSON: {exc}") from exc
    if not isinstance(data, list):
        raise InvalidInput(f"{where} must be a JSON list of entries")
    return data, where
