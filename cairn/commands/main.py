"""The ``cairn`` command: chat in the terminal, run the frontends, run workers, administer.

The larger groups (memory, memo, bench, session) live in their own modules and are imported only
when they run.

Every subcommand reads the settings once (environment, then cairn.toml) and stops with a clear
message naming the variable when one is missing or contradictory.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable, Iterator
from importlib.metadata import version
from typing import Any, TypeVar

import click

from cairn.commands.common import Bounded, LazyGroup, cli_errors, load_settings, name_checker
from cairn.core.errors import ConfigError
from cairn.core.redact import mask_url
from cairn.core.settings import Settings

__all__ = ["main"]

F = TypeVar("F", bound=Callable[..., Any])

EPILOG = """\b
Quick start (no setup, no network):
  cairn chat                  chat with the bot in this terminal
  echo "remember the VPN is vpn.example.com" | cairn chat --json
\b
Configuration comes from environment variables and an optional cairn.toml
(see `cairn config`); CAIRN_HOME (default ~/.cairn) holds the data.
"""


@click.group(
    cls=LazyGroup,
    epilog=EPILOG,
    context_settings={"help_option_names": ["-h", "--help"]},
    lazy={
        "memory": ("cairn.commands.memory:memory", "Look into and administer long-term memory."),
        "import": (
            "cairn.commands.imports:import_",
            "Import a team's chat history into memory (a Slack export, a Matrix room).",
        ),
        "memo": (
            "cairn.commands.memos:memo",
            "Memos between agents: durable notes delivered into an agent's next prompt.",
        ),
        "tools": (
            "cairn.commands.tools:tools",
            "The agents' tools from MCP servers: what each agent can call, and what needs "
            "approval.",
        ),
    },
)
@click.version_option(version("cairn-bot"), prog_name="cairn")
def main() -> None:
    """Cairn: a chat-ops bot for Slack and Matrix whose agents remember."""


@main.command()
@click.option(
    "--thread",
    default="main",
    show_default=True,
    callback=name_checker("thread"),
    help="Thread to start in.",
)
@click.option(
    "--user",
    default=None,
    callback=name_checker("user"),
    help="Who is speaking (default: your login name).",
)
@click.option(
    "--agent",
    default=None,
    callback=name_checker("agent"),
    help="Agent to address (default: CAIRN_AGENT).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per bot output.")
@click.option(
    "--stream",
    is_flag=True,
    help="Show answers as they are written (on a terminal they always are); with --json, "
    'as "delta" objects before each reply.',
)
def chat(thread: str, user: str | None, agent: str | None, as_json: bool, stream: bool) -> None:
    """Chat with Cairn in this terminal (a console thread).

    \b
    On a terminal it is interactive. Otherwise it reads one message per line from standard
    input, so a conversation can be scripted:
      printf 'remember deploys are frozen until Monday\\n/thread b\\nare deploys frozen?\\n' \\
        | cairn chat --json
    \b
    Lines starting with / are commands: /thread NAME, /user NAME, /agent NAME, /react EMOJI,
    /unreact EMOJI, /paste ... /end (a multi-line message), /help, /quit.
    With CAIRN_BROKER_URL set, messages are handled by `cairn worker` processes.
    """
    from cairn.bot.console import Console
    from cairn.bot.pipeline import Pipeline

    with cli_errors():
        settings = load_settings()
        pipeline = Pipeline.open(settings)
        try:
            console = Console(
                pipeline,
                as_json=as_json,
                interactive=sys.stdin.isatty(),
                thread=thread,
                user=user,
                agent=agent,
                stream=stream,
            )
            code = console.run(_lines())
            if console.abandoned and not settings.broker_url:
                # Closing would wait for the turns still running here as long as they take:
                # the console gave up on them, so leave as a crash would. Their messages stay
                # pending, and the next run takes them again and shows the replies.
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        finally:
            pipeline.close()
    sys.exit(code)


def _lines() -> Iterator[str]:
    """Standard input, line by line, until its end (or Ctrl-C on a terminal).

    Bytes that are not valid in the input's encoding never end the stream: they arrive as
    lone surrogates, and the console refuses that one line with a clear error.
    """
    if isinstance(sys.stdin, io.TextIOWrapper):
        sys.stdin.reconfigure(errors="surrogateescape")
    if sys.stdin.isatty():
        while True:
            try:
                yield input()
            except EOFError:
                return
            except KeyboardInterrupt:
                click.echo("", err=True)
                return
    else:
        yield from sys.stdin


@main.command()
def run() -> None:
    """Start every configured frontend (the console when none is configured).

    \b
    Slack is configured by SLACK_BOT_TOKEN plus SLACK_APP_TOKEN or SLACK_SIGNING_SECRET;
    Matrix by MATRIX_HOMESERVER, MATRIX_USER_ID and a password or access token.
    """
    import signal
    import threading

    from cairn.bot.frontend import configured_frontends, serve
    from cairn.bot.pipeline import Pipeline

    with cli_errors():
        settings = load_settings()
        if not (settings.slack.enabled or settings.matrix.homeserver):
            click.get_current_context().invoke(chat)
            return
        pipeline = Pipeline.open(settings)
        try:
            _serve_metrics(settings)
            frontends = configured_frontends(pipeline, settings)
            stop = threading.Event()
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, lambda *_: stop.set())
            click.echo(f"cairn: running {', '.join(f.name for f in frontends)}", err=True)
            serve(frontends, stop)
        finally:
            pipeline.close()


@main.command()
@click.option(
    "--concurrency",
    "-c",
    default=2,
    show_default=True,
    type=Bounded("--concurrency", high=1000),
    help="Parallel tasks.",
)
@click.option("--loglevel", "-l", default="INFO", show_default=True)
@click.option("--pool", default=None, help="Celery pool (default: threads with local Qdrant).")
@click.option("--beat", is_flag=True, help="Also run the periodic jobs (one beat schedules).")
def worker(concurrency: int, loglevel: str, pool: str | None, beat: bool) -> None:
    """Run a Celery worker that handles sessions queued on CAIRN_BROKER_URL.

    With the embedded Qdrant folder (no CAIRN_QDRANT_URL) the worker uses a thread pool,
    because only one process may open that folder; with a Qdrant server it forks.
    """
    with cli_errors():
        settings = load_settings()
        if not settings.broker_url:
            raise ConfigError(
                "CAIRN_BROKER_URL is not set: without a broker, `cairn chat` and `cairn run` "
                "handle messages in-process and no worker is needed"
            )
        from cairn.db import Database

        db = Database(settings.effective_database_url)
        db.migrate()
        db.dispose()
        from cairn.workers.celery_app import configure_celery

        app = configure_celery(settings)
        chosen = pool or ("prefork" if settings.qdrant_url else "threads")
        argv = [
            "worker",
            f"--loglevel={loglevel}",
            f"--concurrency={concurrency}",
            f"--pool={chosen}",
            "--queues=cairn",
            "--without-gossip",
            "--without-mingle",
        ]
        if beat:
            # Any number of workers may run a beat: one schedules, the others stand by.
            argv.append("--beat")
        _serve_metrics(settings)
        if chosen != "prefork":
            # Load the embedding model and open the stores before taking work, so the first
            # messages do not wait seconds for them (forked pools do this in each child).
            from cairn.runtime import get_runtime

            get_runtime()
        app.worker_main(argv)


def _serve_metrics(settings: Settings) -> None:
    """Serve /metrics on CAIRN_METRICS_PORT when it is set."""
    if settings.metrics_port:
        from cairn.core.metrics import serve_metrics

        serve_metrics(settings.metrics_port)
        click.echo(f"cairn: metrics on :{settings.metrics_port}/metrics", err=True)


@main.command()
def migrate() -> None:
    """Create or upgrade the database schema to this version (safe to run repeatedly)."""
    from cairn.db import Database

    with cli_errors():
        settings = load_settings()
        db = Database(settings.effective_database_url)
        before = db.current_revision()
        db.migrate()
        click.echo(f"database {db.safe_url}: {before or 'empty'} -> {db.current_revision()}")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def doctor(as_json: bool) -> None:
    """Check the configuration and every service Cairn uses; print what to fix.

    \b
    Checks: settings, database and its migrations, Redis, Celery workers (with a broker),
    Qdrant, the LLM key and model, Slack (auth.test), Matrix (whoami) and its end-to-end
    encryption (the device's keys in the store and on the homeserver), and that each declared
    MCP server starts and lists its tools. Exits 1 when a check
    fails; warnings (e.g. offline model) do not fail.
    """
    from dataclasses import asdict

    from cairn.commands.doctor import run_checks

    with cli_errors():
        checks = run_checks(load_settings())
    if as_json:
        click.echo(json.dumps([asdict(c) for c in checks], indent=2))
    else:
        marks = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "--  "}
        width = max(len(c.name) for c in checks)
        indent = " " * (6 + width + 1)
        for c in checks:
            first, *more = c.detail.splitlines() or [""]
            click.echo(f"{marks[c.status]}  {c.name:<{width}} {first}")
            for line in more:
                click.echo(indent + line)
            if c.fix:
                click.echo(f"{indent}-> {c.fix}")
    sys.exit(1 if any(c.status == "fail" for c in checks) else 0)


@main.command("config")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def show_config(as_json: bool) -> None:
    """Show the effective settings (secrets masked) and where they came from."""
    from cairn.core.settings import config_file

    with cli_errors():
        settings = load_settings()
        shown = settings.redacted()
        shown["(database)"] = mask_url(settings.effective_database_url)
        shown["(vectors)"] = mask_url(settings.qdrant_url or str(settings.qdrant_path))
        shown["(llm)"] = settings.llm.provider
        shown["(config file)"] = str(config_file() or "none")
        if as_json:
            click.echo(json.dumps(shown, indent=2, default=str))
            return
        width = max(len(k) for k in shown)
        for key, value in shown.items():
            click.echo(f"{key:<{width}}  {value}")


@main.group(
    cls=LazyGroup,
    lazy={
        "recall": (
            "cairn.bench.memory:bench_recall",
            "Recall@k of cairn's memory and four baselines on LoCoMo and real-chat conversations.",
        ),
        "scale": (
            "cairn.bench.memory:bench_scale",
            "Search latency (p50/p95, with and without query embedding) and write throughput.",
        ),
        "pipeline": (
            "cairn.bench.pipeline:pipeline_command",
            "Measure the message path: Redis + Celery workers, and the in-process default.",
        ),
        "stream": (
            "cairn.bench.stream:stream_command",
            "Measure answers as they are written: how soon they show, and at what cost.",
        ),
        "feedback": (
            "cairn.bench.feedback:feedback_command",
            "Simulate a team reacting to answers; bad memories in the top 5 before and after.",
        ),
        "context": (
            "cairn.bench.context:bench_context",
            "Drive a generated ops thread (or LoCoMo conversations) through the context engine "
            "and classic mode, and price every turn's prompt as its provider bills it, prompt "
            "caching included.",
        ),
        "poisoning": (
            "cairn.bench.poisoning:poisoning_command",
            "Tell the bot attack texts and honest facts; count what it kept as trusted memory.",
        ),
        "secrets": (
            "cairn.bench.secrets:secrets_command",
            "Tell the bot credentials and honest texts; count the credentials that survive "
            "anywhere.",
        ),
        "updates": (
            "cairn.bench.updates:updates_command",
            "Facts that change: is the current value recalled first, and the past one when asked?",
        ),
        "import": (
            "cairn.bench.imports:import_command",
            "Peak RSS of `cairn memory import` and `export` at each size (flat is the goal).",
        ),
        "slack-import": (
            "cairn.bench.slack_import:slack_import_command",
            "Messages/s, peak RSS and database size of `cairn import slack` at each size.",
        ),
    },
)
def bench() -> None:
    """Benchmarks: commands that measure and print figures (no pass/fail)."""


@main.group(
    cls=LazyGroup,
    lazy={
        "end": (
            "cairn.commands.session:session_end",
            "End the session of THREAD: extract learnings and announce them in the thread.",
        ),
        "show": (
            "cairn.commands.session:session_show",
            "Show a session (one chat thread): its state, its checkpoint and the engine's "
            "telemetry.",
        ),
    },
)
def session() -> None:
    """Look into agent sessions (one per chat thread)."""


if __name__ == "__main__":  # pragma: no cover
    main()
