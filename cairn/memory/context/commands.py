"""The context engine's commands: ``cairn bench context`` and ``cairn session show``."""

from __future__ import annotations

import json
import statistics
from typing import Any

import click
from sqlmodel import select

from cairn.db import Database
from cairn.errors import ConfigError, InvalidInput, NotFound

__all__ = ["bench_context", "session_show"]


@click.command("context")
@click.option("--turns", default=300, show_default=True, type=click.IntRange(50, 5000),
              help="Messages in the generated thread.")  # fmt: skip
@click.option("--budget", default=30000, show_default=True, type=click.IntRange(1000, 1_000_000),
              help="Token budget of each prompt.")  # fmt: skip
@click.option("--seed", default=7, show_default=True, help="Seed of the generated thread.")
@click.option("--json", "as_json", is_flag=True, help='Print {"engine": ..., "classic": ...}.')
def bench_context(turns: int, budget: int, seed: int, as_json: bool) -> None:
    """Drive a generated ops thread through the context engine and classic mode.

    \b
    The thread (a deterministic generator: incidents, pasted logs, diffs, test failures,
    type-checker errors, stack traces, constraints and decisions stated early, look-back
    questions later) is written to a temporary SQLite database and each turn's prompt is
    compiled in both modes, with no model calls. Per mode it prints the prompt tokens at
    turns 50 / 100 / 300, the maximum, whether the budget was ever exceeded, the share of
    constraints and decisions present in every later prompt, the share of look-back questions
    whose fact is in the prompt answering them, and compile time p50 / p95.
    \b
    Examples:
      cairn bench context
      cairn bench context --turns 100 --budget 20000 --json
    """
    from cairn.cli import _errors
    from cairn.memory.context.bench import run_benchmark
    from cairn.workers.tools import CONTEXT_TOOL_SPECS, TOOL_SPECS
    from cairn.workers.turn import SYSTEM_FRAME

    with _errors():
        figures = run_benchmark(
            turns=turns,
            budget=budget,
            system=SYSTEM_FRAME.format(agent="cairn"),
            tools=TOOL_SPECS + CONTEXT_TOOL_SPECS,
            seed=seed,
        )
        result = {name: fig.as_json() for name, fig in figures.items()}
        if as_json:
            click.echo(json.dumps(result))
            return
        click.echo(f"context benchmark: {turns} turns, budget {budget} tokens, seed {seed}")
        rows = [
            ("prompt tokens at turn 50", "tokens_at", "50"),
            ("prompt tokens at turn 100", "tokens_at", "100"),
            ("prompt tokens at turn 300", "tokens_at", "300"),
            ("max prompt tokens", "max_prompt_tokens", None),
            ("budget exceeded", "budget_exceeded", None),
            ("constraints+decisions retained", "constraints_retained", None),
            ("look-back facts present", "lookback_present", None),
            ("compile ms p50", "compile_ms", "p50"),
            ("compile ms p95", "compile_ms", "p95"),
        ]
        click.echo(f"{'':34}{'engine':>14}{'classic':>14}")
        for label, key, sub in rows:
            cells = []
            for mode in ("engine", "classic"):
                value = result[mode][key]
                value = value[sub] if sub else value
                cells.append(f"{value:>14.3f}" if isinstance(value, float) else f"{value!s:>14}")
            click.echo(f"{label:34}{''.join(cells)}")
        engine, classic = result["engine"], result["classic"]
        share = engine["tokens_at"]["300"] / max(1, classic["tokens_at"]["300"])
        prepare = sorted(figures["engine"].prepare_ms)
        click.echo(f"engine tokens at the last checkpoint turn: {share:.1%} of classic's")
        click.echo(
            "engine resume + distil of the new message, ms p50 / p95: "
            f"{statistics.median(prepare):.1f} / {prepare[int(len(prepare) * 0.95) - 1]:.1f}"
        )


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
    from cairn.cli import _errors, _settings

    with _errors():
        settings = _settings()
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
    from cairn.db.models import AgentSession, SessionEvent
    from cairn.memory.context.artifacts import ArtifactStore
    from cairn.memory.context.config import EngineConfig
    from cairn.memory.context.engine import ContextEngine
    from cairn.memory.context.state import tier

    with db.session() as s:
        query = select(AgentSession).where(AgentSession.thread_ref == thread)
        if tenant:
            query = query.where(AgentSession.tenant_id == tenant)
        if channel:
            query = query.where(AgentSession.channel == channel)
        found = list(s.exec(query).all())
        if not found:
            raise NotFound(f"no session for thread {thread!r}")
        if len(found) > 1:
            where = ", ".join(f"--tenant {f.tenant_id} --channel {f.channel}" for f in found[:5])
            raise InvalidInput(
                f"thread {thread!r} names {len(found)} sessions; add one of: {where}"
            )
        session = found[0]
        events = len(
            s.exec(select(SessionEvent.id).where(SessionEvent.session_id == session.id)).all()
        )
        kinds = list(
            s.exec(select(SessionEvent.kind).where(SessionEvent.session_id == session.id)).all()
        )
    try:
        from cairn.config import get_settings

        config = EngineConfig.from_settings(get_settings())
    except ConfigError:
        config = EngineConfig()
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
    return "\n".join(lines)
