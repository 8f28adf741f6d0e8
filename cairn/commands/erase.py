"""``cairn memory erase``: a person's words out of every store, on request (docs/adr/0043)."""

from __future__ import annotations

import getpass
import json
from dataclasses import asdict
from typing import Any

import click

from cairn.commands.common import name_checker, tenant_checked

__all__ = ["memory_erase"]


@click.command("erase")
@click.option(
    "--person",
    required=True,
    callback=name_checker("user"),
    help="Whom to erase: a Slack user id (U123ABC), a Matrix user id (@ann:example.org) "
    "or a console name.",
)
@click.option(
    "--tenant", callback=tenant_checked, help="Only in this tenant (default: in every tenant)."
)
@click.option("--by", default=None, callback=name_checker("user"), help="Who asks (recorded).")
@click.option("--dry-run", is_flag=True, help="Count what would go; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def memory_erase(
    person: str, tenant: str | None, by: str | None, dry_run: bool, as_json: bool
) -> None:
    """Erase everything a person said and taught, for an erasure request.

    \b
    Deleted, in every tenant unless --tenant:
      - memories they wrote or that were written in their turns (imported
        history included), with their points in the vector index, and the
        learnings drawn from their words;
      - their messages, reactions and approvals in the session logs, with what
        the bot did and said in answer (tool calls, tool output, replies);
      - the pastes, files and tool output those turns kept as artifacts;
      - memos they sent or asked for, their reasons for retractions, and the
        records of theirs in the event spool of a frontend that is stopped.
    Bot messages in other threads that showed one of their memories keep their
    place but say "[erased on request]". Other people's memories stay.
    Afterwards the SQLite file is vacuumed, its log truncated and the embedded
    index compacted, so the freed bytes are gone from CAIRN_HOME. One audit row
    records whom, by whom and when, with counts only (never the content).
    Cairn does not keep exports: files you wrote with `cairn memory export`
    are yours to delete. With the embedded index, stop `cairn run` first (one
    process holds the index; erase refuses, erasing nothing, while it is held).

    \b
    Examples:
      cairn memory erase --person U0123ABCD --dry-run
      cairn memory erase --person @ann:example.org --by dpo --json
    """
    from cairn.commands.common import cli_errors, load_settings
    from cairn.runtime import build_runtime

    with cli_errors():
        rt = build_runtime(load_settings())
        try:
            _erase(rt, person, tenant, by, dry_run, as_json)
        finally:
            rt.close()


def _erase(
    rt: Any, person: str, tenant: str | None, by: str | None, dry_run: bool, as_json: bool
) -> None:
    from cairn.bot.spool import forget_in_spools
    from cairn.memory.erasure import compact, erase_person

    store = rt.memory
    report = erase_person(
        rt.db,
        store.index,
        person,
        by=by or getpass.getuser(),
        tenant=tenant,
        dry_run=dry_run,
    )
    spooled, held = forget_in_spools(rt.settings.home_dir, person, dry_run=dry_run)
    problems = [] if dry_run else compact(rt.db, store.index)
    if held:
        problems.append(
            f"{held} spool segment(s) are held by a running frontend: erase again after it stops"
        )
    counts = {**report.counts, "spool_records": spooled}
    if as_json:
        click.echo(json.dumps({**asdict(report), "counts": counts, "problems": problems}))
    else:
        verb = "would erase" if dry_run else "erased"
        what = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in counts.items() if n)
        click.echo(f"{verb} {person}: {what or 'nothing was found'}")
        if report.audit_id is not None:
            click.echo(f"recorded as erasure #{report.audit_id}")
        for problem in problems:
            click.echo(f"warning: {problem}", err=True)
