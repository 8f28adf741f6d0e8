"""Approving MCP tool calls end to end: ``cairn chat`` as a real subprocess with the offline
model, the real test MCP server over stdio, and (for the crash tests) real ``cairn worker``
processes on Redis.

What must hold: a call that needs approval runs only once a person allowed to approve says so,
exactly once, and the model is told what came of it; a denial or an expiry is reported and
nothing runs; someone not allowed gets a clear answer and changes nothing; a worker killed
while a call waits, or while an approved call runs, never makes it run twice.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from cairn.llm.types import DECISION_PREFIX
from tests.e2e.test_console_chat import CAIRN, _wait_ready, chat
from tests.e2e.test_mcp_tools import Deployment, _replies, _stdio
from tests.support.chat_server import STAND_INS, model_env
from tests.support.mcp_server import free_port, read_calls, running_http_server
from tests.support.processes import stop_group

pytestmark = pytest.mark.slow


@pytest.fixture
def ops(tmp_path: Path) -> _Ops:
    """The test server as ``ops``: restart_* and crash need approval, the rest is read."""
    calls = tmp_path / "calls.jsonl"
    found = _Ops(tmp_path, _stdio(calls), calls)
    found.write()
    return found


class _Ops(Deployment):
    """The test server with its own approvals (``Deployment`` writes fixed ones)."""

    def write(self, extra: str = "", *, top: str = "", approvals: str = "") -> None:
        self.config.write_text(
            f"""{top}
{self.server}
approval = "read"
approvals = {{ {approvals or '"restart_*" = "needs approval", "crash" = "needs approval"'} }}
timeout = 3
{extra}
"""
        )


def _of(outputs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in outputs if o["type"] == kind]


def _approvals(deployment: Deployment, thread: str = "main") -> list[dict[str, Any]]:
    shown = deployment.run("session", "show", thread, "--tenant", "console", "--json")
    assert shown.returncode == 0, shown.stderr
    found: list[dict[str, Any]] = json.loads(shown.stdout)["approvals"]
    return found


def _tools_run(deployment: Deployment) -> list[object]:
    return [c["tool"] for c in read_calls(deployment.calls)]


RESTART = 'run ops__restart_service {"service": "payments", "reason": "stuck"}\n'


def test_an_approved_call_runs_once_and_the_model_is_told_its_result(ops: _Ops) -> None:
    out = chat(ops.env(), RESTART + "/approve\n/approve 1\n", "--user", "ann", check=False)
    [request] = _of(out, "approval")
    assert request["approval"] == 1
    assert "ops__restart_service" in request["text"]
    assert '"service": "payments"' in request["text"]
    assert "/approve 1" in request["text"]
    notices = [o["text"] for o in _of(out, "notice")]
    assert any(
        n.startswith("ann approved request #1: ran ops__restart_service in") for n in notices
    )
    held, answered = _replies(out)
    assert "has not run" in held
    assert "ann approved request #1" in answered
    assert "payments restarted" in answered
    # The second /approve changes nothing: the request was decided.
    [refused] = _of(out, "decision")
    assert "already approved by ann" in refused["text"]
    assert _tools_run(ops) == ["restart_service"]

    [approval] = _approvals(ops)
    assert approval["status"] == "ran"
    assert approval["decided_by"] == "ann"
    assert approval["outcome"] == "ok"
    assert approval["duration_ms"] > 0
    assert approval["decided_at"] >= approval["requested_at"]
    described = ops.run("session", "show", "main", "--tenant", "console").stdout
    assert "approval #1 ran: ops__restart_service" in described
    assert "approved by ann" in described


def test_an_approved_call_runs_once_on_a_streamable_http_server(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    server_env = {"CAIRN_TEST_MCP_CALLS": str(calls), "CAIRN_TEST_MCP_TOKEN": "t0k-approve"}
    with running_http_server(free_port(), server_env) as url:
        http = _Ops(
            tmp_path,
            f'[mcp_servers.ops]\nurl = "{url}"\n'
            'headers = { Authorization = "Bearer t0k-approve" }',
            calls,
        )
        http.write()
        out = chat(http.env(), RESTART + "/approve\n", "--user", "ann")
    assert "payments restarted" in _replies(out)[-1]
    assert _tools_run(http) == ["restart_service"]
    assert _approvals(http)[0]["outcome"] == "ok"


def test_a_denied_call_never_runs_and_the_model_is_told(ops: _Ops) -> None:
    out = chat(ops.env(), RESTART + "/deny\n", "--user", "ann")
    notices = [o["text"] for o in _of(out, "notice")]
    assert "ann denied request #1: ops__restart_service did not run." in notices
    assert "ann denied request #1, so ops__restart_service did not run." in _replies(out)[-1]
    assert _tools_run(ops) == []
    [approval] = _approvals(ops)
    assert (approval["status"], approval["decided_by"], approval["outcome"]) == (
        "denied",
        "ann",
        "",
    )


def test_someone_not_allowed_to_approve_is_told_so_and_changes_nothing(ops: _Ops) -> None:
    ops.write('approvers = ["ann"]')
    script = RESTART + "/user bob\n/approve 1\n/user ann\n/approve 1\n"
    out = chat(ops.env(), script, "--user", "ann", check=False)
    [refused] = _of(out, "decision")
    assert refused["status"] == "refused"
    assert "You can't approve request #1 (ops__restart_service): only ann may" in refused["text"]
    # Ann, on the list, approves afterwards: it runs once.
    assert any("ann approved request #1" in o["text"] for o in _of(out, "notice"))
    assert _tools_run(ops) == ["restart_service"]
    assert _approvals(ops)[0]["decided_by"] == "ann"


def test_an_unknown_request_and_a_bad_number_are_refused_clearly(ops: _Ops) -> None:
    out = chat(ops.env(), "/approve 7\n/deny x\n/approve\n", check=False)
    [unknown] = _of(out, "decision")
    assert "There is no request #7 here to approve." in unknown["text"]
    errors = [o["text"] for o in _of(out, "error")]
    assert any(e.startswith("/deny takes a request number, e.g. /deny 3") for e in errors)
    assert "no request in this thread is waiting for a decision" in errors


def test_an_approval_typed_in_another_thread_is_refused_audited_and_changes_nothing(
    ops: _Ops,
) -> None:
    script = RESTART + "/thread elsewhere\n/approve 1\n/thread main\n/approve 1\n"
    out = chat(ops.env(), script, "--user", "ann", check=False)
    [refused] = _of(out, "decision")
    assert refused["status"] == "refused"
    assert refused["thread"] == "elsewhere"
    assert "Request #1 was asked in another thread: decide it there" in refused["text"]
    # Approved in its own thread afterwards: it runs once, approved there.
    notices = [o for o in _of(out, "notice") if "ann approved request #1" in o["text"]]
    assert [n["thread"] for n in notices] == ["main"]
    assert _tools_run(ops) == ["restart_service"]
    with sqlite3.connect(ops.home / "cairn.db") as db:
        audited = db.execute(
            "SELECT e.text, e.user FROM session_event e JOIN agent_session s "
            "ON s.id = e.session_id WHERE e.kind = 'error' AND s.thread_ref = 'main'"
        ).fetchall()
    assert audited == [
        (
            "refused: ann tried to approve request #1 (ops__restart_service) from another "
            "thread or message",
            "ann",
        )
    ]


def test_a_request_expires_and_a_late_approval_is_refused(ops: _Ops) -> None:
    ops.write("approval_ttl = 1")
    first = chat(ops.env(), RESTART, "--user", "ann")
    assert "expires at" in _of(first, "approval")[0]["text"]
    time.sleep(1.5)
    late = chat(ops.env(), "/approve 1\n", "--user", "ann", check=False)
    [refused] = _of(late, "decision")
    assert "Request #1 (ops__restart_service) expired at" in refused["text"]
    assert "request #1 (ops__restart_service) expired unanswered: it did not run." in [
        o["text"] for o in _of(late, "notice")
    ]
    assert "Request #1 expired unanswered" in _replies(late)[-1]
    assert _tools_run(ops) == []
    [approval] = _approvals(ops)
    assert (approval["status"], approval["decided_by"]) == ("expired", "")


def test_an_approval_for_a_tool_taken_off_the_allow_list_meanwhile_runs_nothing(
    ops: _Ops,
) -> None:
    first = chat(ops.env(), RESTART, "--user", "ann")
    assert _of(first, "approval")
    ops.write('allow = ["service_*"]')  # while the request waits, restarts are taken away
    later = chat(ops.env(), "/approve 1\n", "--user", "ann", check=False)
    assert (
        "ann approved request #1, but ops__restart_service is no longer among the tools "
        "agent cairn may call: it did not run."
    ) in [o["text"] for o in _of(later, "notice")]
    assert "did not run: This tool is no longer allowed for this agent" in _replies(later)[-1]
    assert _tools_run(ops) == []
    [approval] = _approvals(ops)
    assert (approval["status"], approval["outcome"]) == ("refused", "refused")
    described = ops.run("session", "show", "main", "--tenant", "console").stdout
    assert "approval #1 refused: ops__restart_service" in described


def test_a_server_that_crashes_during_an_approved_call_is_reported(ops: _Ops) -> None:
    out = chat(ops.env(), "run ops__crash\n/approve\n" + RESTART + "/approve\n", check=False)
    notices = [o["text"] for o in _of(out, "notice")]
    assert any("request #1: ran ops__crash" in n and "(crashed)" in n for n in notices)
    assert "ops__crash failed (crashed)" in _replies(out)[1]
    # The server is started again for the next approved call.
    assert "payments restarted" in _replies(out)[-1]
    assert _tools_run(ops) == ["crash", "restart_service"]
    crashed, restarted = _approvals(ops)
    assert (crashed["status"], crashed["outcome"]) == ("ran", "crashed")
    assert (restarted["status"], restarted["outcome"]) == ("ran", "ok")


def test_a_credential_in_the_arguments_is_refused_not_held(ops: _Ops) -> None:
    from tests.support.mcp_server import LEAKED_TOKEN

    script = f'run ops__restart_service {{"service": "payments", "token": "{LEAKED_TOKEN}"}}\n'
    out = chat(ops.env(), script)
    assert _of(out, "approval") == []
    assert "refused" in _replies(out)[0]
    assert _approvals(ops) == []
    assert _tools_run(ops) == []


@pytest.mark.parametrize("provider", sorted(STAND_INS))
def test_through_the_sdk_the_model_gets_the_decision_and_the_result_as_data(
    ops: _Ops, provider: str
) -> None:
    server_class, _ = STAND_INS[provider]
    with server_class(api_key="k") as server:
        server.push_tool_use("ops__restart_service", {"service": "payments"})
        server.push_text("I asked to restart payments; it needs approval.")
        server.push_text("Payments was restarted.")
        env = ops.env(**model_env(provider, server))
        out = chat(env, "restart payments please\n/approve\n", "--user", "ann")
        bodies = server.bodies
    assert _replies(out) == [
        "I asked to restart payments; it needs approval.",
        "Payments was restarted.",
    ]
    assert _tools_run(ops) == ["restart_service"]
    # The decision's turn: the person's decision and what the call gave, quoted as JSON data.
    last = bodies[-1]["messages"][-1]
    text = last["content"] if isinstance(last["content"], str) else last["content"][-1]["text"]
    body = text[text.index(DECISION_PREFIX) + len(DECISION_PREFIX) :]
    decision = json.loads(body)
    assert decision == {
        "approval": 1,
        "tool": "ops__restart_service",
        "arguments": {"service": "payments"},
        "decision": "approved",
        "decided_by": "ann",
        "status": "ok",
        "ran": True,
        "output": "payments restarted",
    }


# --- workers that die ----------------------------------------------------------------------


class _Worker:
    """A real ``cairn worker --beat`` on Redis, started and killed at will."""

    def __init__(self, deployment: Deployment, env: dict[str, str]) -> None:
        self.deployment, self.env = deployment, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log_path = self.deployment.home.parent / f"worker-{self.starts}.log"
        with log_path.open("w") as log:
            self.proc = subprocess.Popen(
                [*CAIRN, "worker", "--beat", "--concurrency", "2", "--loglevel", "INFO"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _wait_ready(log_path, self.proc)

    def kill(self) -> None:
        """SIGKILL the worker and every process it started (its MCP server too)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc)


@pytest.fixture
def workers(ops: _Ops, redis_url: str) -> Any:
    env = ops.env(
        CAIRN_BROKER_URL=redis_url,
        CAIRN_BEAT_INTERVAL="1",
        CAIRN_STALE_AFTER="2",
        CAIRN_LOCK_TTL="3",
    )
    worker = _Worker(ops, env)
    try:
        yield worker
    finally:
        worker.stop()


@pytest.mark.redis
def test_a_worker_killed_while_a_call_waits_leaves_the_approval_to_complete_once(
    ops: _Ops, workers: _Worker
) -> None:
    workers.start()
    asked = chat(workers.env, RESTART, "--user", "ann")
    assert _of(asked, "approval")[0]["approval"] == 1
    workers.kill()  # nothing holds the waiting turn: no worker is needed until a decision
    workers.start()
    out = chat(workers.env, "/approve 1\n", "--user", "ann")
    assert [o["type"] for o in out] == ["notice", "reply"]
    assert "payments restarted" in _replies(out)[0]
    assert _tools_run(ops) == ["restart_service"]
    assert [a["status"] for a in _approvals(ops)] == ["ran"]
    # The decision's turn was answered once: the held reply, the request, then one notice
    # and one reply, in the outbox.
    assert _outbox_kinds(ops) == ["reply", "approval", "notice", "reply"]


@pytest.mark.redis
def test_a_worker_killed_while_an_approved_call_runs_never_runs_it_twice(
    ops: _Ops, workers: _Worker
) -> None:
    ops.write(approvals='"slow_task" = "needs approval"')
    workers.start()
    chat(workers.env, 'run ops__slow_task {"seconds": 6}\n', "--user", "ann")
    script = ops.home.parent / "approve.txt"
    script.write_text("/approve 1\n")
    with script.open() as stdin:
        approving = subprocess.Popen(
            [*CAIRN, "chat", "--json", "--user", "ann"],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=workers.env,
            text=True,
        )
    _wait_for(lambda: _tools_run(ops) == ["slow_task"], "the approved call to start")
    workers.kill()  # mid-call: the server dies with the worker
    workers.start()  # its beat re-queues the session; the call is not run again
    out, _ = approving.communicate(timeout=90)
    outputs = [json.loads(line) for line in out.splitlines() if line.strip()]
    notices = [o["text"] for o in _of(outputs, "notice")]
    assert any("whether it took effect is unknown" in n for n in notices), outputs
    assert "unknown" in _replies(outputs)[0]
    assert _tools_run(ops) == ["slow_task"]
    [approval] = _approvals(ops)
    assert approval["status"] == "running"  # taken, never finished, never run again


def _outbox_kinds(deployment: Deployment) -> list[str]:
    """The kinds of every message the bot queued, in order (from the embedded database)."""
    with sqlite3.connect(deployment.home / "cairn.db") as db:
        return [k for (k,) in db.execute("SELECT kind FROM outbound_message ORDER BY id")]


def _wait_for(condition: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")
