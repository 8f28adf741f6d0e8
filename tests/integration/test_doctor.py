"""``cairn doctor`` against real services: what works is ok, what doesn't says how to fix it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from alembic import command

from cairn.commands.doctor import Check, run_checks
from cairn.core.settings import load_settings
from cairn.db import Database, alembic_config
from tests.support.messages_server import MessagesServer


def _by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def _migrate(home: Path) -> None:
    db = Database(f"sqlite:///{home / 'cairn.db'}")
    db.migrate()
    db.dispose()


def _migrate_to_the_first_schema(home: Path) -> None:
    """Leave the embedded database behind this Cairn, as an older Cairn left it."""
    db = Database(f"sqlite:///{home / 'cairn.db'}")
    with db.engine.begin() as conn:
        cfg = alembic_config(db.url)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
    db.dispose()


def _doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cairn", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_embedded_default_passes_after_migration(clean_env: Path) -> None:
    _migrate(clean_env)
    checks = _by_name(run_checks(load_settings()))
    assert checks["database"].status == "ok"
    assert checks["vectors"].status == "ok"
    assert checks["llm"].status == "warn"
    assert "offline" in checks["llm"].detail
    skipped = ("redis", "workers", "slack", "matrix", "matrix-e2e")
    assert {checks[n].status for n in skipped} == {"skip"}


def _matrix_e2e(monkeypatch: pytest.MonkeyPatch, **env: str) -> Check:
    """The matrix-e2e check of a bot on a homeserver nobody answers at, never started."""
    monkeypatch.setenv("MATRIX_HOMESERVER", "http://127.0.0.1:9")
    monkeypatch.setenv("MATRIX_USER_ID", "@cairn:localhost")
    monkeypatch.setenv("MATRIX_PASSWORD", "secret")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return _by_name(run_checks(load_settings()))["matrix-e2e"]


def test_matrix_encryption_turned_off_is_a_warning_naming_the_setting(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = _matrix_e2e(monkeypatch, CAIRN_MATRIX_ENCRYPTION="false")
    assert check.status == "warn"
    assert check.detail.startswith("off (CAIRN_MATRIX_ENCRYPTION=false)")
    assert "unset CAIRN_MATRIX_ENCRYPTION" in check.fix


def test_a_matrix_bot_that_never_logged_in_has_no_device_yet(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = _matrix_e2e(monkeypatch)
    assert check.status == "warn"
    store = clean_env / "matrix" / "store"
    assert check.detail == f"no device yet; its keys will be kept in {store}"
    assert "start the Matrix frontend once" in check.fix


def test_a_database_behind_this_cairn_fails_and_says_to_migrate(clean_env: Path) -> None:
    _migrate_to_the_first_schema(clean_env)
    check = _by_name(run_checks(load_settings()))["database"]
    assert check.status == "fail"
    assert "at schema 0001" in check.detail
    assert check.fix == "run `cairn migrate`"


def test_a_fresh_home_is_not_a_failure(clean_env: Path) -> None:
    # Every other command creates the embedded database on first use; a newcomer's first
    # `cairn doctor` says so instead of failing.
    done = _doctor()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout
    database = next(line for line in done.stdout.splitlines() if " database " in line)
    assert database.startswith("ok")
    assert "created on first use" in database
    assert "cairn migrate" in done.stdout


def test_an_empty_server_database_is_a_warning_naming_the_command(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> None:
    monkeypatch.setenv("CAIRN_DATABASE_URL", postgres_url)
    check = _by_name(run_checks(load_settings()))["database"]
    assert check.status == "warn"
    assert "empty" in check.detail
    assert "run `cairn migrate`" in check.fix


@pytest.mark.parametrize(
    ("key", "model", "status", "words"),
    [
        ("sk-good", "claude-sonnet-4-6", "ok", "model claude-sonnet-4-6"),
        ("sk-bad", "claude-sonnet-4-6", "fail", "rejected ANTHROPIC_API_KEY"),
        ("sk-good", "claude-nonexistent", "fail", "not found"),
    ],
)
def test_the_llm_check_tries_the_key_and_the_model(
    clean_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    key: str,
    model: str,
    status: str,
    words: str,
) -> None:
    with MessagesServer(api_key="sk-good") as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("CAIRN_MODEL", model)
        check = _by_name(run_checks(load_settings()))["llm"]
    assert check.status == status
    assert words in check.detail
    assert key not in check.detail


def test_redis_and_workers_are_checked_on_the_broker(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str
) -> None:
    monkeypatch.setenv("CAIRN_BROKER_URL", redis_url)
    checks = _by_name(run_checks(load_settings()))
    assert checks["redis"].status == "ok"
    assert checks["workers"].status == "warn"
    assert "cairn worker" in checks["workers"].fix


class _AuthTest(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        good = self.headers.get("Authorization") == "Bearer xoxb-good"
        body = (
            {"ok": True, "team": "Acme", "user": "cairn"}
            if good
            else {"ok": False, "error": "invalid_auth"}
        )
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def slack_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _AuthTest)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/api/"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("token", "status"), [("xoxb-good", "ok"), ("xoxb-revoked", "fail")])
def test_slack_credentials_are_tried_with_auth_test(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, slack_api: str, token: str, status: str
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", token)
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1")
    monkeypatch.setenv("SLACK_API_URL", slack_api)
    check = _by_name(run_checks(load_settings()))["slack"]
    assert check.status == status
    if status == "ok":
        assert "workspace Acme as cairn, Socket Mode" in check.detail
    else:
        assert "invalid_auth" in check.detail


def test_the_command_prints_json_and_fails_on_a_failed_check(clean_env: Path) -> None:
    _migrate_to_the_first_schema(clean_env)
    done = _doctor("--json")
    assert done.returncode == 1
    report = {c["name"]: c for c in json.loads(done.stdout)}
    assert report["database"]["status"] == "fail"
    _migrate(clean_env)
    again = _doctor()
    assert again.returncode == 0, again.stdout
    assert "ok    database" in again.stdout
