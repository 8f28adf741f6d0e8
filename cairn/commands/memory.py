"""The ``cairn memory`` commands and ``cairn session end``: look into and administer memory.

Every command is scoped: a tenant (default: the console's) and an agent (default: CAIRN_AGENT).
Bulk commands (export, gc) need an explicit ``--tenant``; an empty or malformed one is always
refused. ``--json`` prints machine-readable output; on a terminal, lists are tables.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, TypeVar

import click

from cairn.commands.common import Bounded, name_checker, tenant_checked
from cairn.commands.erase import memory_erase
from cairn.core.errors import NotFound
from cairn.core.progress import progress_bar
from cairn.memory.records import MEMORY_KINDS, Memory, memory_status
from cairn.memory.scope import Scope
from cairn.memory.store import MemoryStore

__all__ = ["memory", "memory_json", "scoped_runtime", "tenant_option"]

_Command = TypeVar("_Command", bound=Callable[..., Any])

MEMORY_ID = Bounded("a memory id")


@contextmanager
def scoped_runtime(
    tenant: str | None, agent: str | None, *, index: bool = True
) -> Iterator[tuple[Any, Scope]]:
    from cairn.commands.common import cli_errors, load_settings
    from cairn.runtime import build_runtime

    with cli_errors():
        settings = load_settings()
        rt = build_runtime(settings, index=index)
        try:
            tenant = settings.console_tenant if tenant is None else tenant
            # An operator's view: every conversation of the tenant, private ones included.
            yield rt, Scope(tenant, agent or settings.agent, every_conversation=True)
        finally:
            rt.close()


def tenant_option(help: str, *, required: bool = False) -> Callable[[_Command], _Command]:
    return click.option("--tenant", required=required, callback=tenant_checked, help=help)


def _scope_options(fn: Any) -> Any:
    fn = click.option(
        "--agent",
        default=None,
        callback=name_checker("agent"),
        help="Agent (default: CAIRN_AGENT).",
    )(fn)
    return tenant_option("Tenant (default: the console's).")(fn)


def memory_json(memory: Memory) -> dict[str, Any]:
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in asdict(memory).items()}


def _table(rows: list[Memory], scores: list[float] | None = None) -> None:
    if not rows:
        click.echo("(no memories)")
        return
    headers = ["id", *(["score"] if scores else []), "kind", "tier", "visibility", "text", "state"]
    cells = []
    for i, m in enumerate(rows):
        state = memory_status(m)
        score = [f"{scores[i]:.3f}"] if scores else []
        seen = f"{m.visibility}, in {m.private_to} only" if m.private_to else m.visibility
        cells.append([f"#{m.id}", *score, m.kind, m.tier, seen, m.text, state])
    if sys.stdout.isatty():
        try:
            from rich.console import Console
            from rich.table import Table

            table = Table(*headers)
            for row in cells:
                table.add_row(*row)
            Console().print(table)
            return
        except ImportError:
            pass
    for row in cells:
        click.echo("  ".join(c for c in row if c))


@click.group()
def memory() -> None:
    """Look into and administer long-term memory.

    \b
    Examples:
      cairn memory list --kind decision
      cairn memory search "deploy freeze" -k 10 --json
      cairn memory show 42
      cairn memory retract 42 --reason "outdated"
      cairn memory share 42 --agent ops
      cairn memory unshare 42 --agent ops
      cairn memory export --tenant console > console.jsonl
      cairn memory import console.jsonl
      cairn memory gc --tenant console --dry-run
      cairn memory erase --person U0123ABCD --dry-run
      cairn memory doctor
    """


@memory.command("list")
@_scope_options
@click.option("--kind", type=click.Choice(MEMORY_KINDS), default=None, help="Only this kind.")
@click.option("--tier", type=click.Choice(["hot", "warm", "cold"]), default=None)
@click.option("--limit", default=50, show_default=True, type=Bounded("--limit", high=1_000_000))
@click.option("--all", "include_retracted", is_flag=True, help="Include retracted memories.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def memory_list(
    tenant: str | None,
    agent: str | None,
    kind: str | None,
    tier: str | None,
    limit: int,
    include_retracted: bool,
    as_json: bool,
) -> None:
    """List the newest memories an agent can see."""
    with scoped_runtime(tenant, agent) as (rt, scope):
        rows = rt.memory.newest(
            scope, limit=limit, include_retracted=include_retracted, kind=kind, tier=tier
        )
        if as_json:
            for m in rows:
                click.echo(json.dumps(memory_json(m)))
        else:
            _table(rows)


@memory.command("search")
@click.argument("query")
@_scope_options
@click.option(
    "-k", default=5, show_default=True, type=Bounded("-k", high=1000), help="How many to return."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def memory_search(query: str, tenant: str | None, agent: str | None, k: int, as_json: bool) -> None:
    """What recall finds for QUERY (hybrid lexical + dense, weighted), best first.

    \b
    Example:
      cairn memory search "who owns the VPN?" -k 3
    """
    with scoped_runtime(tenant, agent) as (rt, scope):
        found = rt.memory.recall(query, scope, k)
        if as_json:
            for r in found:
                click.echo(json.dumps({**memory_json(r.memory), "score": r.score}))
        else:
            _table([r.memory for r in found], [r.score for r in found])


memory.add_command(memory_search, "recall")


@memory.command("show")
@click.argument("memory_id", type=MEMORY_ID)
@_scope_options
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def memory_show(memory_id: int, tenant: str | None, agent: str | None, as_json: bool) -> None:
    """Everything about one memory: scope, source, scores, tier, retraction, share history."""
    with scoped_runtime(tenant, agent) as (rt, scope):
        found = rt.memory.get(memory_id, scope)
        if found is None:
            raise NotFound(f"no memory #{memory_id} visible to {scope.agent} in {scope.tenant}")
        audit = _audit(rt.memory, found, scope)
        data = {**memory_json(found), "status": memory_status(found)}
        if as_json:
            click.echo(json.dumps({**data, "audit": audit}))
            return
        width = max(len(k) for k in data)
        for key, value in data.items():
            click.echo(f"{key:<{width}}  {value}")
        for act in audit:
            why = act["data"].get("reason") or ", ".join(act["data"].get("from") or [])
            click.echo(
                f"{'history':<{width}}  {act['created_at']} {act['action']} by {act['actor']}"
                + (f": {why}" if why else "")
            )


def _audit(store: MemoryStore, m: Memory, scope: Scope) -> list[dict[str, Any]]:
    """The recorded acts on ``m`` (share, retract, confirm...), oldest first, as JSON-ready
    dicts."""
    from cairn.memory import sharing

    owner = replace(scope, agent=m.agent or scope.agent)
    return [
        {**asdict(e), "created_at": e.created_at.isoformat()}
        for e in sharing.history(store, m.id, owner)
    ]


def _by_option(help_text: str) -> Callable[[_Command], _Command]:
    """The ``--by`` option of the commands that record who acted."""
    return click.option("--by", "by", default=None, callback=name_checker("user"), help=help_text)


@memory.command("retract")
@click.argument("memory_id", type=MEMORY_ID)
@_scope_options
@click.option("--reason", default="", help="Why (kept for audit).")
@_by_option("Who retracts (default: your login name).")
def memory_retract(
    memory_id: int, tenant: str | None, agent: str | None, reason: str, by: str | None
) -> None:
    """Retract a memory: a tombstone kept for audit, never recalled again."""
    import getpass

    with scoped_runtime(tenant, agent) as (rt, scope):
        m = rt.memory.retract(memory_id, scope, by=by or getpass.getuser(), reason=reason)
        click.echo(f"retracted #{m.id}: {m.text}")


def _share_command(action: str) -> Any:
    @_scope_options
    @_by_option("Who does it (default: your login name); recorded.")
    @click.option(
        "--workspace",
        is_flag=True,
        help="Between conversations instead of agents: a memory learned in a private "
        "conversation becomes visible in every conversation of the workspace (unshare: private "
        "to its conversation again). Done as an admin.",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print the memory and its history.")
    @click.argument("memory_id", type=MEMORY_ID)
    def command(
        memory_id: int,
        tenant: str | None,
        agent: str | None,
        by: str | None,
        workspace: bool,
        as_json: bool,
    ) -> None:
        import getpass

        from cairn.memory import sharing

        who = by or getpass.getuser()
        with scoped_runtime(tenant, agent) as (rt, scope):
            if workspace:
                across = sharing.widen if action == "share" else sharing.narrow
                m = across(rt.memory, memory_id, scope, by=who, admin=True)
                seen = "every conversation" if m.private_to is None else f"{m.private_to} only"
            else:
                between = sharing.share if action == "share" else sharing.unshare
                m = between(rt.memory, memory_id, scope, by=who)
                seen = f"every agent of {m.tenant}" if m.visibility != "private" else str(m.agent)
            if as_json:
                click.echo(json.dumps({**memory_json(m), "audit": _audit(rt.memory, m, scope)}))
            else:
                click.echo(f"{action}d #{m.id} (now visible to {seen}): {m.text}")

    return command


@memory.command("restore")
@click.argument("memory_id", type=MEMORY_ID)
@_scope_options
@_by_option("Who restores (default: your login name); recorded.")
def memory_restore(memory_id: int, tenant: str | None, agent: str | None, by: str | None) -> None:
    """Undo a retraction, as an admin: the memory is recalled again; the act is recorded."""
    import getpass

    with scoped_runtime(tenant, agent) as (rt, scope):
        m = rt.memory.restore(memory_id, scope, by=by or getpass.getuser(), admin=True)
        click.echo(f"restored #{m.id}: {m.text}")


memory.command(
    "share",
    help="Share an agent's private memory with the team (recorded; undo with unshare).\n\n"
    "\b\nExample:\n  cairn memory share 42 --agent ops --json",
)(_share_command("share"))
memory.command(
    "unshare",
    help="Undo the last share of a memory: it is private to its agent again, exactly as before.",
)(_share_command("unshare"))


@memory.command("export")
@tenant_option("The tenant to export (required).", required=True)
@click.option("--agent", default=None, help="Only this agent's private memories and shared ones.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--live-only", is_flag=True, help="Leave retracted memories out.")
def memory_export(tenant: str, agent: str | None, output: Path | None, live_only: bool) -> None:
    """Export a tenant's memories as JSON lines (every field; import restores them exactly).

    \b
    Example:
      cairn memory export --tenant console -o console.jsonl
    """
    from cairn.memory.portable import export_memories

    # On a terminal that shows the lines themselves, a bar would only garble them.
    quiet = output is None and sys.stdout.isatty()
    with (
        # The export reads the database only: opening the vector index would cost memory
        # that grows with it (docs/adr/0038).
        scoped_runtime(tenant, agent, index=False) as (rt, _),
        progress_bar("exporting", quiet=quiet) as progress,
    ):
        lines = export_memories(
            rt.db, tenant, agent=agent, include_retracted=not live_only, progress=progress
        )
        if output is None:
            for line in lines:
                click.echo(line)
            return
        with output.open("w", encoding="utf-8") as f:
            count = sum(1 for line in lines if f.write(line + "\n"))
    click.echo(f"exported {count} memories to {output}", err=True)


@memory.command("import")
# Bytes that are not UTF-8 become lone surrogates, which the import refuses with their line.
@click.argument("source", type=click.File("r", encoding="utf-8", errors="surrogateescape"))
@tenant_option("The tenant to import into (default: the console's).")
@click.option(
    "--allow-other-tenants",
    is_flag=True,
    help="Write records that name another tenant into that tenant.",
)
@click.option(
    "--move", is_flag=True, help="Write records that name another tenant into --tenant (new ids)."
)
@click.option(
    "--skip-invalid",
    is_flag=True,
    help="Import the valid records and list the invalid ones (default: import nothing then).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def memory_import(
    source: Any,
    tenant: str | None,
    allow_other_tenants: bool,
    move: bool,
    skip_invalid: bool,
    as_json: bool,
) -> None:
    """Import JSON lines written by `cairn memory export` (- reads standard input).

    \b
    Every record is checked as a chat write is; one invalid record stops the import before
    anything is written (each is listed with its line), unless --skip-invalid. Records that
    name another tenant than --tenant are refused unless --allow-other-tenants or --move.
    Duplicates of existing memories are skipped; imported ones are indexed at once.
    Example:
      cairn memory import console.jsonl --tenant console
    """
    from cairn.memory.portable import import_memories

    if allow_other_tenants and move:
        raise click.UsageError("--allow-other-tenants and --move exclude each other")
    with scoped_runtime(tenant, None) as (rt, scope):
        with progress_bar("importing", quiet=as_json) as progress:
            report = import_memories(
                rt.db,
                source,
                tenant=scope.tenant,
                move=move,
                allow_other_tenants=allow_other_tenants,
                skip_invalid=skip_invalid,
                progress=progress,
                total=_lines_in(source),
            )
        if _indexed_and_told(rt, report, as_json):
            return
        for rejected in report.rejected:
            click.echo(f"skipped line {rejected.line}: {rejected.reason}", err=True)
        into = ", ".join(f"{n} into {t}" for t, n in report.tenants.items())
        click.echo(
            f"imported {report.imported}{f' ({into})' if into else ''}, "
            f"skipped {report.skipped} already present"
            + (f" and {report.invalid} invalid" if report.invalid else "")
        )
        if report.invalid > len(report.rejected):
            click.echo(f"(the first {len(report.rejected)} invalid lines are listed)", err=True)


def _lines_in(source: Any) -> int | None:
    """How many lines the file ``source`` reads has (for the progress bar), counted without
    holding them; None for standard input or a pipe, which can be read only once."""
    path = Path(getattr(source, "name", ""))
    if not path.name or not path.is_file():
        return None
    lines = 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            lines += chunk.count(b"\n")
    return lines


def _indexed_and_told(rt: Any, report: Any, as_json: bool) -> bool:
    """Bring the index in step with what a command wrote (a bar shows it), then print
    ``report`` as JSON with ``as_json``; True when that was the command's whole output."""
    with progress_bar("indexing", quiet=as_json) as progress:
        rt.memory.flush_outbox(progress=progress, bulk=True)
    if as_json:
        click.echo(json.dumps(asdict(report)))
    return as_json


@memory.command("gc")
@tenant_option("The tenant to collect (required).", required=True)
@click.option("--dry-run", is_flag=True, help="Report what would be pruned; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def memory_gc(tenant: str, dry_run: bool, as_json: bool) -> None:
    """Rotate tiers (hot/warm/cold by decay and budgets) and tombstone stale cold memories.

    Pruning is a retraction with its reason recorded, never a delete. Then retention:
    sessions idle for over CAIRN_RETENTION_SESSION_DAYS and unconfirmed episodes older than
    CAIRN_RETENTION_EPISODE_DAYS are deleted (facts, decisions and the rest are kept).
    """
    from cairn.memory.retention import apply_retention
    from cairn.memory.tiers import collect_garbage

    with scoped_runtime(tenant, None) as (rt, _):
        with progress_bar("collecting", quiet=as_json) as progress:
            report = collect_garbage(
                rt.db,
                tenant,
                rt.settings.memory,
                dry_run=dry_run,
                progress=progress,
            )
        kept = apply_retention(rt.db, rt.memory.index, tenant, rt.settings.workers, dry_run=dry_run)
        _indexed_and_told(rt, report, False)
        if as_json:
            click.echo(json.dumps({**asdict(report), "retention": asdict(kept)}))
            return
        moved = ", ".join(f"{n} to {t}" for t, n in report.moved.items() if n) or "none"
        counts = ", ".join(f"{n} {t}" for t, n in report.counts.items())
        verb = "would prune" if dry_run else "pruned"
        click.echo(f"moved: {moved}; {verb} {report.pruned}; now {counts or 'unchanged'}")
        verb = "would delete" if dry_run else "deleted"
        click.echo(
            f"retention: {verb} {kept.sessions} sessions ({kept.events} events) "
            f"and {kept.episodes} episodes"
        )


@memory.command("reindex")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def memory_reindex(as_json: bool) -> None:
    """Rebuild the vector index from the database: every live memory is indexed again.

    For an index folder that was lost or a Qdrant collection that was dropped; `cairn memory
    doctor --repair` does the same only when counts differ. Example:
      cairn memory reindex --json
    """
    from cairn.memory.reindex import reindex

    with scoped_runtime(None, None) as (rt, _):
        with progress_bar("reindexing", quiet=as_json) as progress:
            report = reindex(rt.memory, progress=progress)
        if as_json:
            click.echo(json.dumps(asdict(report)))
        else:
            click.echo(
                f"queued {report.queued} live memories, indexed {report.applied}"
                + (f", {report.pending} left pending (see the log)" if report.pending else "")
            )


@memory.command("doctor")
@click.option("--repair", is_flag=True, help="Replay the outbox and re-index what is missing.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def memory_doctor(repair: bool, as_json: bool) -> None:
    """Check memory's parts: embedding model, vector index, outbox, database vs index counts."""
    from sqlmodel import col, func, select

    from cairn.db.models import MemoryRow
    from cairn.memory.index import IndexUnavailable
    from cairn.memory.index.port import FIRST_INDEXABLE_ID

    with scoped_runtime(None, None) as (rt, _):
        store = rt.memory
        replayed = reindexed = 0
        if repair:
            replayed, reindexed = store.reconcile()
        live_rows = col(MemoryRow.retracted).is_(False)
        with rt.db.session() as s:
            live = int(s.exec(select(func.count()).select_from(MemoryRow).where(live_rows)).one())
            # Rows the index cannot hold (an old import let them in) are named, not hidden.
            unindexable = [
                mid or 0
                for mid in s.exec(
                    select(MemoryRow.id).where(live_rows, col(MemoryRow.id) < FIRST_INDEXABLE_ID)
                ).all()
            ]
        indexed: int | str
        try:
            indexed = store.index.count() if store.index is not None else "no index"
        except IndexUnavailable as exc:
            indexed = f"unavailable: {exc}"
        findings = {
            "embeddings": store.embedder.name if store.embedder else "none (lexical only)",
            "index": getattr(store.index, "where", "none"),
            "live_memories": live,
            "indexed": indexed,
            "outbox_pending": store.pending_outbox(),
            "unindexable": unindexable,
            "replayed": replayed,
            "reindexed": reindexed,
        }
        healthy = indexed == live and findings["outbox_pending"] == 0 and not unindexable
        findings["healthy"] = healthy
        if as_json:
            click.echo(json.dumps(findings))
        else:
            for key, value in findings.items():
                click.echo(f"{key:<15} {value}")
            if unindexable:
                click.echo(
                    "memories with ids the index cannot hold are never found by meaning: "
                    "export them, retract them (`cairn memory retract -- ID`) and import them "
                    "without their ids"
                )
            elif not healthy:
                click.echo("run `cairn memory doctor --repair` to bring the index in step")
        if not healthy:
            sys.exit(1)


memory.add_command(memory_erase)
