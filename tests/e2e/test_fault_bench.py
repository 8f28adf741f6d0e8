"""The fault bench: Slack mentions under load through a database stop, a Redis restart and two
worker SIGKILLs, with nothing lost, duplicated or answered out of order.

Each scenario runs real processes (``cairn run`` with Slack over HTTP, ``cairn worker``) on a
PostgreSQL server and a Redis server of this module's own, posts one numbered mention every half
second as Slack would (see :mod:`tests.support.slack_load`), breaks something in the middle, and
counts the answers the bot posted to the Slack stand-in. At the end the figures of every scenario
are printed as one JSON object, and written to ``$CAIRN_FAULT_REPORT`` when it is set::

    CAIRN_FAULT_REPORT=faults.json .venv/bin/pytest tests/e2e/test_fault_bench.py
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.e2e.test_console_chat import _env
from tests.e2e.test_faults import Workers, _free_port, _healthy, _slack_run
from tests.support import chat_server, messages_server
from tests.support.chat_server import STAND_INS, model_env
from tests.support.heard import Heard, tool_reply
from tests.support.messages_server import Reply
from tests.support.private_postgres import PrivatePostgres
from tests.support.private_redis import PrivateRedis
from tests.support.processes import stop_group
from tests.support.slack_api import BOT_TOKEN, SlackAPI
from tests.support.slack_harness import SIGNING_SECRET
from tests.support.slack_load import Figures, SlackLoad

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

Report = dict[str, dict[str, int]]


class _ReportPlugin:
    """Prints the bench report once the run is over, where pytest prints its summary."""

    def __init__(self, report: Report) -> None:
        self.report = report

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.report:
            terminalreporter.write_sep("-", "fault bench")
            terminalreporter.write_line(json.dumps(self.report))


@pytest.fixture(scope="module")
def report(request: pytest.FixtureRequest) -> Iterator[Report]:
    """Each scenario's figures by name; printed, and written to $CAIRN_FAULT_REPORT, at the end."""
    figures: Report = {}
    request.config.pluginmanager.register(_ReportPlugin(figures), "cairn-fault-bench")
    yield figures
    path = os.environ.get("CAIRN_FAULT_REPORT")
    if path and figures:
        Path(path).write_text(json.dumps(figures, indent=2) + "\n")


@pytest.fixture(scope="module")
def postgres() -> Iterator[PrivatePostgres]:
    """One private server for the module; each scenario has a database of its own on it."""
    with PrivatePostgres() as server:
        yield server


def _database(postgres: PrivatePostgres, name: str) -> str:
    with psycopg.connect(postgres.url("postgres"), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return postgres.url(name)


def _frontend_env(home: Path, database_url: str, slack: SlackAPI, **extra: str) -> dict[str, str]:
    """``cairn run`` with Slack over HTTP on ``database_url``."""
    return _env(
        home,
        CAIRN_DATABASE_URL=database_url,
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack.base_url,
        CAIRN_HTTP_HOST="127.0.0.1",
        # "bench fact 3" and "bench fact 13" are different facts: fold only identical ones.
        CAIRN_MEMORY_NEAR_DUPLICATE="1",
        **extra,
    )


@contextlib.contextmanager
def _mentions(env: dict[str, str], log: Path, slack: SlackAPI) -> Iterator[SlackLoad]:
    """``cairn run`` on ``env``, and a stream of mentions posted to it (started)."""
    port = _free_port()
    frontend = _slack_run(env, port, log)
    load = SlackLoad(slack, port, SIGNING_SECRET)
    try:
        slack.wait_for(lambda: _healthy(port), timeout=90, what="/healthz of cairn run")
        load.start()
        yield load
    finally:
        load.stop()
        stop_group(frontend)


def _finish(load: SlackLoad) -> Figures:
    """Stop posting, then wait (bounded) for the answers; the figures then."""
    load.stop()
    return load.settle(timeout=60)


def _record(report: Report, name: str, load: SlackLoad, figures: Figures) -> None:
    """Put the figures in the report, then hold them to the promise."""
    report[name] = figures.as_dict()
    detail = f"{figures}; {load.report()}"
    assert figures.lost == 0, detail
    assert figures.duplicated == 0, detail
    assert figures.order_violations == 0, detail
    assert figures.answered == figures.sent, detail


def test_database_stop_under_slack_load_loses_nothing(
    tmp_path: Path, postgres: PrivatePostgres, report: Report
) -> None:
    with SlackAPI() as slack:
        env = _frontend_env(tmp_path / "home", _database(postgres, "database_stop"), slack)
        # No broker: in-process workers; no API key: the offline model.
        with _mentions(env, tmp_path / "run.log", slack) as load:
            try:
                time.sleep(8)
                postgres.stop()  # fast shutdown: open connections are cut
                time.sleep(10)
            finally:
                postgres.start()  # same port, same data
            time.sleep(10)
            figures = _finish(load)
    _record(report, "database_stop", load, figures)


def test_redis_restart_under_slack_load_loses_nothing(
    tmp_path: Path, postgres: PrivatePostgres, report: Report
) -> None:
    broker = PrivateRedis(tmp_path)
    broker.start()
    with SlackAPI() as slack:
        env = _frontend_env(
            tmp_path / "home",
            _database(postgres, "redis_restart"),
            slack,
            CAIRN_BROKER_URL=broker.url,
            CAIRN_STALE_AFTER="1",
            CAIRN_BEAT_INTERVAL="1",
        )
        workers = Workers(env, tmp_path)
        try:
            workers.start("--beat")
            workers.start()
            with _mentions(env, tmp_path / "run.log", slack) as load:
                time.sleep(8)
                broker.stop()
                time.sleep(5)
                broker.start()  # same port, empty: what was queued is gone
                time.sleep(8)
                figures = _finish(load)
        finally:
            workers.stop_all()
            broker.stop()
    _record(report, "redis_restart", load, figures)


# Each provider's tiny model: it answers tool results with "Done: <result>".
_ECHO = {"anthropic": messages_server.echo_responder, "openai": chat_server.echo_responder}


class _HangingModel:
    """Stand-ins of ``provider``'s model, one per worker slot, that ask to remember the bench
    fact of each mention; the first call about each doomed mention hangs, so that its worker
    can be killed mid-turn, and :meth:`wait_hung` says which slot's worker is making that call."""

    def __init__(self, provider: str, doomed: set[int]) -> None:
        self.provider = provider
        self.doomed = doomed
        self.hung: dict[int, int] = {}
        self._changed = threading.Condition()
        server_class, _ = STAND_INS[provider]
        self.servers = [server_class(api_key="k", responder=self._for(slot)) for slot in (0, 1)]

    def _for(self, slot: int) -> Callable[[dict[str, Any]], Reply | dict[str, Any]]:
        echo = _ECHO[self.provider]

        def respond(request: dict[str, Any]) -> Reply | dict[str, Any]:
            heard = Heard(self.provider, request)
            if heard.tool_results:
                return echo(request)  # "Done: ..."
            # Turns not yet answered are merged into one user message: this turn's is the last.
            n = int(re.findall(r"remember bench fact (\d+) ", heard.said)[-1])
            answer = tool_reply(
                self.provider, "remember", {"text": f"bench fact {n} for the fault bench"}
            )
            with self._changed:
                if n not in self.doomed or n in self.hung:
                    return answer
                self.hung[n] = slot
                self._changed.notify_all()
            return Reply(body=answer, delay=60.0)

        return respond

    def wait_hung(self, n: int, timeout: float = 60.0) -> int:
        """The slot whose worker is making the (hanging) model call about mention ``n``."""
        with self._changed:
            assert self._changed.wait_for(lambda: n in self.hung, timeout), f"#{n} never asked"
            return self.hung[n]


@pytest.mark.parametrize("provider", sorted(STAND_INS))
def test_worker_sigkill_mid_turn_under_slack_load_loses_nothing(
    tmp_path: Path, postgres: PrivatePostgres, report: Report, provider: str
) -> None:
    model = _HangingModel(provider, doomed={8, 24})
    broker = PrivateRedis(tmp_path)
    broker.start()
    with SlackAPI() as slack, model.servers[0] as llm0, model.servers[1] as llm1:
        database = _database(postgres, f"worker_sigkill_{provider}")
        envs = [
            _frontend_env(
                tmp_path / "home",
                database,
                slack,
                CAIRN_BROKER_URL=broker.url,
                **model_env(provider, llm),
                CAIRN_STALE_AFTER="2",
                CAIRN_BEAT_INTERVAL="1",
                CAIRN_LOCK_TTL="3",
                CAIRN_LLM_TIMEOUT="90",
            )
            for llm in (llm0, llm1)
        ]
        slots = [Workers(env, tmp_path / f"slot-{k}") for k, env in enumerate(envs)]
        # The worker of slot 0, and each replacement of it, runs the beat.
        beat: tuple[list[str], ...] = (["--beat"], [])
        try:
            live = []
            for k, workers in enumerate(slots):
                workers.folder.mkdir()
                live.append(workers.start(*beat[k]))
            with _mentions(envs[0], tmp_path / "run.log", slack) as load:
                for n in sorted(model.doomed):
                    slot = model.wait_hung(n)  # its model call is in flight
                    slots[slot].kill(live[slot])
                    live[slot] = slots[slot].start(*beat[slot])
                time.sleep(4)
                figures = _finish(load)
        finally:
            for workers in slots:
                workers.stop_all()
            broker.stop()
    _record(report, f"worker_sigkill_{provider}", load, figures)
    assert sorted(model.hung) == sorted(model.doomed)
