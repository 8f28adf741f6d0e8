"""``cairn session show`` and ``cairn session end``: one chat thread's session."""

from __future__ import annotations

import json
import statistics
from typing import Any

import click
from sqlmodel import select

from cairn.commands.common import name_checker
from cairn.commands.memory import memory_json, scoped_runtime, tenant_option
from cairn.core.errors import ConfigError, InvalidInput, NotFound
from cairn.core.settings import ContextSettings
from cairn.db import Database
from cairn.db.models import AgentSession

__all__ = ["session_end", "session_report", "session_show", "thread_session"]


@click.command("show")
@click.argument("thread")
@click.option("--tenant", default=None, help="Tenant, when the thread name is not unique.")
@click.option("--channel", default=None, help="Channel, when the thread name is not unique.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def session_show(thread: str, tenant: str | None, channel: str | None, as_json: bool) -> None:
    """Show a session (one chat thread): its state, its checkpoint and the engine's telemetry.

    \b
    THREAD is the thread's id (a console thread's name, a Slack thread ts, a Matrix event id).
    Telemetry: tokens per band, pressure events (compaction, emergency, safety net), artifacts
    created and retrieved, memories recalled and memos shown, compile times.
    \b
    Examples:
      cairn session show main
      cairn session show incident-42 --tenant console --json
    """
    from cairn.commands.common import cli_errors, load_settings

    with cli_errors():
        settings = load_settings()
        db = Database(settings.effective_database_url)
        try:
            db.migrate()  # as every command does: an older schema lacks the engine's tables
            report = session_report(db, thread, tenant=tenant, channel=channel)
        finally:
            db.dispose()
        if as_json:
            click.echo(json.dumps(report, default=str))
        else:
            click.echo(_describe(report))


def session_report(
    db: Database, thread: str, *, tenant: str | None = None, channel: str | None = None
) -> dict[str, Any]:
    """Everything ``cairn session show`` prints, as one JSON-able dict.

    Raises NotFound when no session matches, InvalidInput when several do.
    """
    from cairn.db.models import SessionEvent
    from cairn.memory.context.artifacts import ArtifactStore
    from cairn.memory.context.engine import ContextEngine
    from cairn.memory.context.state import tier
    from cairn.sessions.approvals import Approvals, describe

    with db.session() as s:
        session = thread_session(s, thread, tenant=tenant, channel=channel)
        events = len(
            s.exec(select(SessionEvent.id).where(SessionEvent.session_id == session.id)).all()
        )
        kinds = list(
            s.exec(select(SessionEvent.kind).where(SessionEvent.session_id == session.id)).all()
        )
    try:
        from cairn.core.settings import get_settings

        config = get_settings().context
    except ConfigError:
        config = ContextSettings()
    approvals = describe(Approvals(db).of_session(session.id or 0))
    engine = ContextEngine(db, config)
    state = engine.checkpoint(session.id or 0)
    rows = engine.telemetry(session.id or 0)
    artifacts = ArtifactStore(db).of_session(session.id or 0)
    bands: dict[str, list[int]] = {}
    pressure_events: dict[str, int] = {}
    levels: dict[str, int] = {}
    for row in rows:
        levels[row.level] = levels.get(row.level, 0) + 1
        for name, value in row.bands.items():
            if name == "events":
                for ev in value:
                    pressure_events[ev] = pressure_events.get(ev, 0) + 1
            elif isinstance(value, int):
                bands.setdefault(name, []).append(value)
    ms = sorted(r.compile_ms for r in rows)
    return {
        "session": {
            "id": session.id,
            "tenant": session.tenant_id,
            "platform": session.platform,
            "channel": session.channel,
            "thread": session.thread_ref,
            "agent": session.agent,
            "status": session.status,
            "events": events,
            "tool_calls": kinds.count("tool_call"),
            "created_at": session.created_at.isoformat(),
        },
        "checkpoint": {
            "through_seq": state.through_seq,
            "turn": state.turn,
            "request": state.request,
            "items": [
                {
                    "id": i.id,
                    "kind": i.kind,
                    "text": i.text,
                    "rationale": i.rationale,
                    "status": i.status,
                    "tier": tier(i, state.turn, config.soft_after, config.hard_after),
                }
                for i in state.items.values()
            ],
            "open_errors": sorted(state.open_errors),
            "fixed_errors": state.fixed_errors,
            "findings": state.findings,
            "files": state.files,
        },
        "telemetry": {
            "turns": len(rows),
            "levels": levels,
            "pressure_events": pressure_events,
            "max_pressure": max((r.pressure for r in rows), default=0.0),
            "tokens_per_band": {
                name: {
                    "last": values[-1],
                    "mean": round(statistics.mean(values), 1),
                    "max": max(values),
                }
                for name, values in sorted(bands.items())
            },
            "artifacts_created": len(artifacts),
            "artifacts_retrieved": sum(r.artifacts_retrieved for r in rows),
            "memories_recalled": sum(r.memories_recalled for r in rows),
            "memos_shown": sum(r.memos_shown for r in rows),
            "compile_ms": {
                "p50": round(statistics.median(ms), 3) if ms else 0.0,
                "p95": round(ms[min(len(ms) - 1, int(len(ms) * 0.95))], 3) if ms else 0.0,
            },
        },
        "approvals": approvals,
        "artifacts": [
            {"id": a.short, "kind": a.kind, "title": a.title, "chars": a.chars, "tokens": a.tokens}
            for a in artifacts
        ],
    }


def _describe(report: dict[str, Any]) -> str:
    s, c, t = report["session"], report["checkpoint"], report["telemetry"]
    lines = [
        f"session #{s['id']}: {s['platform']} {s['tenant']} / {s['channel']} / {s['thread']} "
        f"(agent {s['agent']}, {s['status']}), {s['events']} events, {s['tool_calls']} tool calls",
        f"checkpoint: through event {c['through_seq']}, turn {c['turn']}",
    ]
    if c["request"]:
        lines.append(f"  request: {c['request']}")
    for item in c["items"]:
        why = f" (because {item['rationale']})" if item["rationale"] else ""
        head = f"  [{item['id']}] {item['kind']}, {item['status']}, {item['tier']}"
        lines.append(f"{head}: {item['text']}{why}")
    for sig in c["open_errors"]:
        lines.append(f"  open error: {sig}")
    for fixed in c["fixed_errors"]:
        lines.append(f"  fixed: {fixed}")
    lines.append(
        f"telemetry: {t['turns']} turns compiled; levels {t['levels'] or '{}'}; "
        f"pressure events {t['pressure_events'] or '{}'}; max pressure {t['max_pressure']:.2f}"
    )
    for name, v in t["tokens_per_band"].items():
        lines.append(f"  {name:<12} last {v['last']:>7}  mean {v['mean']:>9}  max {v['max']:>7}")
    lines.append(
        f"  artifacts created {t['artifacts_created']}, retrieved {t['artifacts_retrieved']}; "
        f"memories recalled {t['memories_recalled']}; memos shown {t['memos_shown']}; "
        f"compile ms p50 {t['compile_ms']['p50']} p95 {t['compile_ms']['p95']}"
    )
    for a in report["artifacts"][-10:]:
        lines.append(f"  artifact {a['id']} {a['kind']}: {a['title']}")
    for a in report["approvals"]:
        lines.append(_approval_line(a))
    return "\n".join(lines)


def _approval_line(a: dict[str, Any]) -> str:
    """One tool call held for approval: what, asked by whom, decided by whom, what it gave."""
    line = (
        f"  approval #{a['id']} {a['status']}: {a['tool']} {json.dumps(a['arguments'])}, "
        f"asked by {a['requested_by'] or 'unknown'} at {a['requested_at']}"
    )
    if a["decided_by"]:
        verb = "denied" if a["status"] == "denied" else "approved"
        line += f"; {verb} by {a['decided_by']} at {a['decided_at']}"
    elif a["status"] == "expired":
        line += f"; expired at {a['decided_at']}"
    else:
        line += f"; expires at {a['expires_at']}"
    if a["outcome"]:
        line += f"; ran in {a['duration_ms']} ms: {a['outcome']}"
    return line


def thread_session(
    s: Any, thread: str, *, tenant: str | None = None, channel: str | None = None
) -> AgentSession:
    """The one session of ``thread`` (narrowed by ``tenant`` and ``channel``), read in ``s``.

    Raises NotFound when no session matches, InvalidInput (naming the options that would tell
    them apart) when several do.
    """
    query = select(AgentSession).where(AgentSession.thread_ref == thread)
    if tenant:
        query = query.where(AgentSession.tenant_id == tenant)
    if channel:
        query = query.where(AgentSession.channel == channel)
    found = list(s.exec(query).all())
    if not found:
        where = f" in {tenant}" if tenant else ""
        raise NotFound(f"no session for thread {thread!r}{where}")
    if len(found) > 1:
        where = ", ".join(f"--tenant {f.tenant_id} --channel {f.channel}" for f in found[:5])
        raise InvalidInput(f"thread {thread!r} names {len(found)} sessions; add one of: {where}")
    session: AgentSession = found[0]
    return session


@click.command("end")
@click.argument("thread", callback=name_checker("thread"))
@tenant_option("Tenant (default: the console's).")
@click.option("--channel", default=None, help="Channel of the thread (default: any).")
@click.option("--json", "as_json", is_flag=True, help="Print the learnings as JSON.")
def session_end(thread: str, tenant: str | None, channel: str | None, as_json: bool) -> None:
    """End the session of THREAD: extract learnings and announce them in the thread.

    \b
    The model proposes what is worth remembering; valid learnings are stored unconfirmed and
    posted as "remembered: ..." notices that people can confirm or retract by reaction.
    Example:
      cairn session end incident-42
    """
    from cairn.workers.session_end import end_session

    with scoped_runtime(tenant, None) as (rt, scope):
        with rt.db.session() as s:
            session_id = thread_session(s, thread, tenant=scope.tenant, channel=channel).id or 0
        learned = end_session(rt, session_id)
        if as_json:
            click.echo(json.dumps([memory_json(m) for m in learned]))
        else:
            for m in learned:
                click.echo(f"remembered: {m.text} (#{m.id}, {m.kind}, unconfirmed)")
            if not learned:
                click.echo("session ended; nothing new to remember")
