"""``cairn import``: a team's chat history into memory (``slack`` reads a workspace export,
``matrix`` a room the bot is in, from the homeserver)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from cairn.core.errors import InvalidInput
from cairn.core.progress import progress_bar

if TYPE_CHECKING:
    from cairn.bot.imported import ImportReport

__all__ = ["import_"]

_F = TypeVar("_F", bound=Callable[..., Any])


@click.group("import")
def import_() -> None:
    """Import a team's chat history into memory (a Slack export, a Matrix room)."""


def _tenant(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from cairn.memory.portable import checked_tenant

    try:
        return None if value is None else checked_tenant(value)
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), ctx, param) from exc


def _day(ctx: click.Context, param: click.Parameter, value: str | None) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not a date (YYYY-MM-DD)", ctx, param) from exc


def _dates(what: str, zone: str = "YYYY-MM-DD") -> Callable[[_F], _F]:
    """``--since`` and ``--until``, keeping the ``what`` between two dates (inclusive)."""

    def add(fn: _F) -> _F:
        for name, where in (("--until", "up to this date"), ("--since", "from this date on")):
            fn = click.option(
                name, callback=_day, metavar="YYYY-MM-DD", help=f"Only {what} {where} ({zone})."
            )(fn)
        return fn

    return add


def _in_order(since: date | None, until: date | None) -> None:
    if since and until and since > until:
        raise click.UsageError(f"--since {since} comes after --until {until}")


@import_.command("slack")
@click.argument("export_zip", metavar="EXPORT.zip", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--channels",
    default="",
    help="Only these conversations: names or ids, comma-separated (default: all).",
)
@_dates("days")
@click.option(
    "--tenant",
    default=None,
    callback=_tenant,
    help="The tenant to import into (default: slack:TEAM).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the per-channel tally as JSON.")
def import_slack(
    export_zip: str,
    channels: str,
    since: date | None,
    until: date | None,
    tenant: str | None,
    as_json: bool,
) -> None:
    """Import a Slack workspace export: every person's message becomes an episode.

    \b
    EXPORT.zip is the zip a Slack admin downloads (Workspace settings, Import/Export data):
    users.json, channels.json (groups.json, dms.json, mpims.json where present) and a folder
    of daily JSON files per conversation. It is read one day file at a time, and checked
    whole before anything is written: a malformed file is refused with its path and line.
    \b
    Each message goes through the checks of a live one: credentials are masked, text that
    reads as an instruction to the bot is flagged, guests and bots are untrusted. It is kept
    as "Name: text" at its time, by its author, in its thread (edits: the last text, also
    for a message an earlier run imported; the old text is retracted). What
    is said in a private channel, a DM or a group DM stays private to it. Joins, bot posts
    and deletions are left out and counted.
    \b
    Running it again adds nothing; a run that was stopped continues where it stopped (the
    day files done are listed under CAIRN_HOME/imports). Ends with a table per channel.
    Examples:
      cairn import slack export.zip
      cairn import slack export.zip --channels general,deploys --since 2025-01-01 --json
    """
    from cairn.bot.slack.export import SlackExport
    from cairn.bot.slack.history import SlackImport, checkpoint_path
    from cairn.commands.memory import scoped_runtime

    _in_order(since, until)
    wanted = [c.strip().lstrip("#") for c in channels.split(",") if c.strip()]
    with scoped_runtime(tenant, None) as (rt, _):
        try:
            export = SlackExport(Path(export_zip))
        except InvalidInput as exc:
            raise click.ClickException(str(exc)) from exc
        with export:
            try:
                importer = SlackImport(
                    rt.memory,
                    export,
                    agent=rt.settings.agent,
                    tenant=tenant,
                    max_chars=rt.settings.max_message_chars,
                    untrusted_users=rt.settings.untrusted_users,
                )
                days = export.days(wanted, since, until)
                with progress_bar("checking", quiet=as_json) as progress:
                    total = importer.check(days, progress)
            except InvalidInput as exc:
                raise click.ClickException(f"nothing imported: {exc}") from exc
            checkpoint = checkpoint_path(rt.settings.home_dir, export, importer.tenant)
            try:
                with progress_bar("importing", quiet=as_json) as progress:
                    report = importer.run(
                        days, checkpoint=checkpoint, progress=progress, total=total
                    )
            except InvalidInput as exc:  # the zip changed under the run
                raise click.ClickException(
                    f"stopped: {exc}; the days before are imported, run again to continue"
                ) from exc
        with progress_bar("indexing", quiet=as_json) as progress:
            rt.memory.flush_outbox(progress=progress, bulk=True)
    _show(report, as_json)


@import_.command("matrix")
@click.argument("room")
@_dates("messages", "UTC")
@click.option(
    "--full",
    is_flag=True,
    help="Read the whole room again, not only what is new since the last run (adds only what "
    "is missing: messages whose keys arrived since, say).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the room's tally as JSON.")
def import_matrix(
    room: str, since: date | None, until: date | None, full: bool, as_json: bool
) -> None:
    """Import the history of a Matrix room the bot is in: every person's message an episode.

    \b
    ROOM is a room id (!abc:example.org) or an alias (#ops:example.org). The bot reads it from
    the homeserver (MATRIX_HOMESERVER, MATRIX_USER_ID and the login `cairn run` uses) with its
    own device, so an encrypted room's messages are read with the keys the bot holds; those
    whose keys it never got are counted as undecryptable. While `cairn run` runs, it holds
    the device: the import is handed to it, this command shows its progress and tally, and
    if it stops part-way this command takes the device over and finishes.
    \b
    Each message goes through the checks of a live one: credentials are masked, text that
    reads as an instruction to the bot is flagged, users of homeservers outside
    CAIRN_MATRIX_TRUSTED_SERVERS are untrusted. It is kept as "Name: text" at its time, by its
    author, in its thread (edits: the last text, also for a message an earlier run imported;
    the old text is retracted). What was said in a room that is not public,
    or is encrypted, stays private to it. Joins, notices, the bot's own messages, deletions
    and bare files are left out and counted.
    \b
    Running it again reads only what was said since; a run that was stopped continues where
    it stopped (CAIRN_HOME/imports). Ends with the room's tally.
    Examples:
      cairn import matrix '#ops:example.org'
      cairn import matrix '!AbCdEf:example.org' --since 2025-01-01 --json
    """
    import asyncio

    from cairn.bot.matrix.history import import_room
    from cairn.commands.memory import scoped_runtime

    _in_order(since, until)
    # A room id is "!" and an opaque string (a server part only before room version 12).
    if not (room.startswith("!") and len(room) > 1 and room.isprintable()) and not (
        room.startswith("#") and ":" in room and room.isprintable()
    ):
        raise click.BadParameter(
            f"{room!r} is neither a room id (!abc:server) nor an alias (#name:server)",
            param_hint="ROOM",
        )
    with scoped_runtime(None, None) as (rt, _):
        with progress_bar("reading", quiet=as_json) as progress:
            report = asyncio.run(
                import_room(
                    rt.settings,
                    rt.memory,
                    room,
                    since=since,
                    until=until,
                    full=full,
                    progress=progress,
                    say=None if as_json else lambda line: click.echo(line, err=True),
                )
            )
        with progress_bar("indexing", quiet=as_json) as progress:
            rt.memory.flush_outbox(progress=progress, bulk=True)
    _show(report, as_json)


def _show(report: ImportReport, as_json: bool) -> None:
    """The import's tally: as JSON with ``as_json``, else the closing table."""
    if as_json:
        click.echo(json.dumps(asdict(report) | {"stored": report.stored}))
        return
    _table(report)


def _table(report: ImportReport) -> None:
    """The closing table: one row per conversation."""
    from rich.console import Console
    from rich.table import Table

    platform = report.tenant.partition(":")[0].capitalize()
    table = Table(title=f"{platform} import into {report.tenant}")
    parts = report.unit.split()[-1]  # "files", "pages"
    headings = (
        "channel", "kind", parts, "read", "stored", "present", "edited", "skipped", "secrets",
        "flagged",
    )  # fmt: skip
    for heading in headings:
        left = heading in ("channel", "kind", parts)
        table.add_column(heading, justify="left" if left else "right", no_wrap=left)
    for tally in report.channels.values():
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(tally.skipped.items())) or "0"
        table.add_row(
            tally.name,
            f"{tally.kind}{' (private)' if tally.private else ''}",
            f"{tally.days}" + (f" ({tally.resumed} done before)" if tally.resumed else ""),
            str(tally.read),
            str(tally.stored),
            str(tally.present),
            str(tally.edited),
            skipped,
            str(tally.secrets),
            str(tally.flagged),
        )
    console = Console()
    if not console.is_terminal:  # a log or a pipe: whole rows, however wide
        console = Console(width=200)
    console.print(table)
    resumed = f"; {report.resumed} already done by an earlier run" if report.resumed else ""
    click.echo(f"{report.stored} episodes stored from {report.days} {report.unit}{resumed}")
