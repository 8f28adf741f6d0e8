"""A PostgreSQL server of a test's own, which the test may stop and start again (a blip).

The shared server on 5432 is never touched. The binaries are pgserver's (a test extra), or the
machine's own under /usr/lib/postgresql; as root, the server runs as an unprivileged account.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

import psycopg
import pytest

from tests.services import (
    LOOPBACK,
    POSTGRES_SUPERUSER,
    _free_port,
    _package_file,
    _postgres_problem,
    _postgres_run_as,
    init_postgres,
)

__all__ = ["PrivatePostgres"]


def _bindir() -> Path | None:
    bundled = _package_file("pgserver", "pginstall/bin")
    if bundled is not None and (bundled / "postgres").exists():
        return bundled
    for found in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (found / "postgres").exists():
            return found
    return None


class PrivatePostgres:
    """Initialised in a temporary folder on a free port; :meth:`stop` and :meth:`start` keep
    the port and the data, as a restarted production server would."""

    def __init__(self) -> None:
        bindir = _bindir()
        if bindir is None:
            pytest.skip("no PostgreSQL binaries to start a private server")
        self.bindir = bindir
        self.run_as = _postgres_run_as()
        self.workdir = Path(tempfile.mkdtemp(prefix="cairn-private-postgres-"))
        self.datadir = self.workdir / "data"
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, database: str = "cairn") -> str:
        """The URL of ``database`` on this server."""
        return f"postgresql://{POSTGRES_SUPERUSER}@{LOOPBACK}:{self.port}/{database}"

    def __enter__(self) -> Self:
        if self.run_as is not None:
            os.chown(self.workdir, self.run_as.pw_uid, self.run_as.pw_gid)
        init_postgres(self.bindir, self.datadir, self.run_as)
        self.start()
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE cairn")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def start(self, timeout: float = 60.0) -> None:
        """Start the server (again) and wait until it takes connections."""
        log = (self.workdir / "postgres.log").open("ab")
        argv = [
            str(self.bindir / "postgres"),
            "-D", str(self.datadir),
            "-p", str(self.port),
            "-c", f"listen_addresses={LOOPBACK}",
            "-c", "unix_socket_directories=",
            "-c", "fsync=off",
            "-c", "full_page_writes=off",
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
            user=self.run_as.pw_uid if self.run_as else None,
            group=self.run_as.pw_gid if self.run_as else None,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while (problem := _postgres_problem(self.url("postgres"))) is not None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"private PostgreSQL did not start: {problem}")
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the server at once ("fast" shutdown: open connections are cut)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
