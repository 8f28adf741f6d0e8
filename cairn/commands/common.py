"""What every ``cairn`` subcommand shares: reading the settings, turning errors into one line,
checking names given as options, and the command group that imports its subcommands lazily."""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from cairn.core.bounded import ID_MAX, bounded_int
from cairn.core.errors import CairnError, ConfigError, InvalidInput
from cairn.core.redact import mask_urls
from cairn.core.settings import Settings, get_settings

__all__ = [
    "Bounded",
    "FiniteRange",
    "IntList",
    "LazyGroup",
    "cli_errors",
    "load_settings",
    "name_checker",
    "tenant_checked",
]


class Bounded(click.ParamType[int]):
    """A whole number from ``low`` to ``high`` as an argument or option (an id, a count): read
    by :func:`cairn.core.bounded.bounded_int`, so an absurd one is a usage error naming it."""

    name = "integer"

    def __init__(self, what: str, low: int = 1, high: int = ID_MAX) -> None:
        self.what, self.low, self.high = what, low, high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            return bounded_int(value, self.what, low=self.low, high=self.high)
        except InvalidInput as exc:
            self.fail(str(exc), param, ctx)


class FiniteRange(click.FloatRange):
    """``click.FloatRange`` that also refuses ``nan`` (which passes every comparison, so
    FloatRange lets it through) and the infinities."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class IntList(click.ParamType[tuple[int, ...]]):
    """Comma-separated whole numbers, each from ``low`` to ``high`` (cut-offs, sizes,
    budgets), as a sorted tuple without repeats; anything else is a usage error naming the
    option and the bounds."""

    name = "numbers"

    def __init__(self, what: str, low: int, high: int) -> None:
        self.what, self.low, self.high = what, low, high

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        parts = [p for p in str(value).split(",") if p.strip()]
        if not parts:
            self.fail(f"{self.what} needs at least one number", param, ctx)
        try:
            numbers = {bounded_int(p, self.what, low=self.low, high=self.high) for p in parts}
        except InvalidInput as exc:
            self.fail(f"{exc} (in a comma-separated list)", param, ctx)
        return tuple(sorted(numbers))


class LazyGroup(click.Group):
    """A command group whose subcommands in ``lazy`` are imported only when they run.

    ``lazy`` maps a name to ``("module:attribute", short help)``. ``--help`` lists them from
    that short help, so `cairn --help` does not import the memory store, the benchmarks or the
    workers (a test keeps each short help equal to the command's own).
    """

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]] | None = None, **kw: Any):
        super().__init__(*args, **kw)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, _, attribute = self.lazy[cmd_name][0].partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows: list[tuple[str, str]] = []
        limit = formatter.width - 6 - max((len(n) for n in self.list_commands(ctx)), default=0)
        for name in self.list_commands(ctx):
            if name in self.lazy and name not in self.commands:
                rows.append((name, _shortened(self.lazy[name][1], limit)))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _shortened(text: str, limit: int) -> str:
    """``text`` cut at a word to at most ``limit`` characters, "..." marking the cut."""
    if len(text) <= limit:
        return text
    return text[: max(limit - 3, 1)].rsplit(" ", 1)[0].rstrip(" ,;:") + "..."


def load_settings() -> Settings:
    from cairn.core.logs import configure_logging

    get_settings.cache_clear()
    settings = get_settings()
    configure_logging(settings.log_level, secrets=settings.secret_values())
    return settings


@contextmanager
def cli_errors() -> Iterator[None]:
    """Turn Cairn's named errors into one clear line and exit code 2 (config) or 1.

    The line never shows a password or token written in a URL, whichever layer wrote it.
    """
    try:
        yield
    except ConfigError as exc:
        click.echo(f"cairn: {mask_urls(str(exc))}", err=True)
        sys.exit(2)
    except CairnError as exc:
        click.echo(f"cairn: {mask_urls(str(exc))}", err=True)
        sys.exit(1)


def name_checker(field: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback for an option naming a thread, user, agent... (``field`` is a key of
    :data:`cairn.sessions.events.NAME_LIMITS`): the value, or None when the option was not given.

    Raises click.BadParameter (a usage error) when the value is empty, longer than the schema
    keeps, or has a control character or an undecodable byte.
    """

    def check(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        from cairn.sessions.events import checked_name  # the schema is not imported for --help

        if value is None:
            return None
        if not str(value).strip():
            raise click.BadParameter("cannot be empty", ctx, param)
        try:
            return checked_name(field, str(value))
        except CairnError as exc:
            raise click.BadParameter(str(exc), ctx, param) from exc

    return check


def tenant_checked(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback for ``--tenant``: the value, or None when the option was not given;
    an empty or malformed one is refused (never read as "the default")."""
    from cairn.memory.portable import checked_tenant

    if value is None:
        return None
    try:
        return checked_tenant(value)
    except CairnError as exc:
        raise click.BadParameter(str(exc), ctx, param) from exc
