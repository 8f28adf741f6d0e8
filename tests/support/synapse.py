"""A real Matrix homeserver (Synapse, from PyPI) on 127.0.0.1 for tests.

Synapse is installed once into its own virtual environment, outside the repository and the
project's venv, in ``CAIRN_TEST_CACHE`` (default ``~/.cache/cairn-tests``) under
``synapse-<version>``, so later runs reuse it; an install that did not finish is redone. Each
:func:`running_synapse` block generates a configuration for server name ``localhost`` with
SQLite, no trusted key servers, registration by shared secret only and raised rate limits,
starts the server on a free loopback port, and stops it (and deletes its data) when the block
ends, whether the tests passed or not. The server is our child and is told to die with us, so a
killed test run leaves nothing running either.

Run ``python -m tests.support.synapse`` to install Synapse ahead of time (CI may do this).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "SYNAPSE_VERSION",
    "Synapse",
    "SynapseUnavailable",
    "User",
    "install_synapse",
    "running_synapse",
]

SYNAPSE_VERSION = "1.163.2"
SERVER_NAME = "localhost"
LOOPBACK = "127.0.0.1"
INSTALL_SECONDS = 900.0
START_SECONDS = 120.0
STOP_SECONDS = 20.0
CACHE_ENV = "CAIRN_TEST_CACHE"
_INSTALLED_MARKER = "cairn-installed.txt"
_PR_SET_PDEATHSIG = 1

# Rate limits high enough that a test never waits on them.
_UNLIMITED = {"per_second": 10000, "burst_count": 10000}
_RATE_LIMITS: dict[str, Any] = {
    "rc_message": _UNLIMITED,
    "rc_registration": _UNLIMITED,
    "rc_registration_token_validity": _UNLIMITED,
    "rc_login": {"address": _UNLIMITED, "account": _UNLIMITED, "failed_attempts": _UNLIMITED},
    "rc_admin_redaction": _UNLIMITED,
    "rc_joins": {"local": _UNLIMITED, "remote": _UNLIMITED},
    "rc_joins_per_room": _UNLIMITED,
    "rc_invites": {"per_room": _UNLIMITED, "per_user": _UNLIMITED, "per_issuer": _UNLIMITED},
    "rc_3pid_validation": _UNLIMITED,
    "rc_presence": {"per_user": _UNLIMITED},
    "rc_delayed_event_mgmt": _UNLIMITED,
    "rc_room_creation": _UNLIMITED,
    "rc_reports": _UNLIMITED,
}


class SynapseUnavailable(Exception):
    """Synapse could not be installed or started; the message says why (with its log)."""


@dataclass(frozen=True)
class User:
    """A registered account: its id, password and an access token of a fresh device."""

    user_id: str
    password: str
    access_token: str


@dataclass
class Synapse:
    """A running homeserver: where it answers and how to register accounts on it."""

    base_url: str
    server_name: str
    shared_secret: str
    workdir: Path
    process: subprocess.Popen[bytes]

    def register(self, localpart: str, *, password: str | None = None, admin: bool = False) -> User:
        """Register ``@localpart:server`` through the shared-secret admin API."""
        password = password or secrets.token_urlsafe(12)
        url = f"{self.base_url}/_synapse/admin/v1/register"
        nonce = str(_request("GET", url)["nonce"])
        signed = "\x00".join((nonce, localpart, password, "admin" if admin else "notadmin"))
        mac = hmac.new(self.shared_secret.encode(), signed.encode(), digestmod=hashlib.sha1)
        body = {
            "nonce": nonce,
            "username": localpart,
            "password": password,
            "admin": admin,
            "mac": mac.hexdigest(),
        }
        answer = _request("POST", url, body)
        return User(str(answer["user_id"]), password, str(answer["access_token"]))

    def log(self) -> str:
        """The end of the server's log, for failure messages."""
        return _tail(self.workdir / "homeserver.log")


def cache_dir() -> Path:
    """Where the Synapse virtual environment is kept between runs."""
    return Path(os.environ.get(CACHE_ENV) or "~/.cache/cairn-tests").expanduser()


def install_synapse() -> Path:
    """The Python of a virtual environment with Synapse installed, installing it if needed.

    Concurrent test processes wait on a lock file; an environment without the marker that a
    finished install writes is deleted and built again. Raises SynapseUnavailable.
    """
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    venv = root / f"synapse-{SYNAPSE_VERSION}"
    python = venv / "bin" / "python"
    marker = venv / _INSTALLED_MARKER
    with (root / "synapse-install.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file():
            return python
        shutil.rmtree(venv, ignore_errors=True)
        steps = [
            [sys.executable, "-m", "venv", str(venv)],
            [str(python), "-m", "pip", "install", "--quiet", f"matrix-synapse=={SYNAPSE_VERSION}"],
        ]
        for argv in steps:
            try:
                done = subprocess.run(
                    argv,
                    capture_output=True,
                    text=True,
                    timeout=INSTALL_SECONDS,
                    check=False,
                    stdin=subprocess.DEVNULL,
                )
            except subprocess.TimeoutExpired:
                raise SynapseUnavailable(
                    f"`{' '.join(argv)}` did not finish in {INSTALL_SECONDS:.0f}s"
                ) from None
            if done.returncode != 0:
                output = (done.stderr or done.stdout).strip()[-3000:]
                raise SynapseUnavailable(f"`{' '.join(argv)}` failed: {output}")
        marker.write_text(f"matrix-synapse=={SYNAPSE_VERSION}\n")
        return python


@contextlib.contextmanager
def running_synapse() -> Iterator[Synapse]:
    """Install (once), configure and run Synapse on a free loopback port until the block ends.

    Raises SynapseUnavailable, with the end of the server's log, when it does not start.
    """
    python = install_synapse()
    workdir = Path(tempfile.mkdtemp(prefix="cairn-test-synapse-"))
    try:
        port = _free_port()
        secret = secrets.token_hex(16)
        config = _write_config(python, workdir, port, secret)
        log_file = (workdir / "stdout.log").open("wb")
        try:
            process = subprocess.Popen(
                [str(python), "-m", "synapse.app.homeserver", "--config-path", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                preexec_fn=_die_with_parent_hook(),
            )
            try:
                base_url = f"http://{LOOPBACK}:{port}"
                server = Synapse(base_url, SERVER_NAME, secret, workdir, process)
                _wait_until_ready(server)
                yield server
            finally:
                _stop(process)
        finally:
            log_file.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _write_config(python: Path, workdir: Path, port: int, secret: str) -> Path:
    """A homeserver.yaml for ``localhost`` on ``port``; the signing key is generated by Synapse."""
    log_config = workdir / "log.yaml"
    log_config.write_text(
        json.dumps(
            {
                "version": 1,
                "formatters": {
                    "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}
                },
                "handlers": {
                    "file": {
                        "class": "logging.FileHandler",
                        "formatter": "plain",
                        "filename": str(workdir / "homeserver.log"),
                    }
                },
                "root": {"level": "INFO", "handlers": ["file"]},
                "disable_existing_loggers": False,
            }
        )
    )
    config: dict[str, Any] = {
        "server_name": SERVER_NAME,
        "public_baseurl": f"http://{LOOPBACK}:{port}/",
        "pid_file": str(workdir / "homeserver.pid"),
        "listeners": [
            {
                "port": port,
                "bind_addresses": [LOOPBACK],
                "type": "http",
                "tls": False,
                "x_forwarded": False,
                "resources": [{"names": ["client"], "compress": False}],
            }
        ],
        "database": {"name": "sqlite3", "args": {"database": str(workdir / "homeserver.db")}},
        "log_config": str(log_config),
        "media_store_path": str(workdir / "media"),
        "signing_key_path": str(workdir / "signing.key"),
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "report_stats": False,
        "enable_registration": False,
        "registration_shared_secret": secret,
        "macaroon_secret_key": secrets.token_hex(16),
        "form_secret": secrets.token_hex(16),
        "presence": {"enabled": False},
        "url_preview_enabled": False,
        "enable_metrics": False,
        "federation_domain_whitelist": [],
        **_RATE_LIMITS,
    }
    path = workdir / "homeserver.yaml"
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    keys = subprocess.run(
        [
            str(python),
            "-m",
            "synapse.app.homeserver",
            "--config-path",
            str(path),
            "--generate-keys",
        ],
        capture_output=True,
        text=True,
        timeout=START_SECONDS,
        check=False,
        cwd=workdir,
        stdin=subprocess.DEVNULL,
    )
    if keys.returncode != 0:
        raise SynapseUnavailable(f"Synapse could not generate its keys: {keys.stderr[-3000:]}")
    return path


def _wait_until_ready(server: Synapse) -> None:
    deadline = time.monotonic() + START_SECONDS
    url = f"{server.base_url}/_matrix/client/versions"
    while True:
        if server.process.poll() is not None:
            raise SynapseUnavailable(
                f"Synapse exited with {server.process.returncode}: "
                f"{_tail(server.workdir / 'stdout.log')}\n{server.log()}"
            )
        try:
            _request("GET", url, timeout=2)
            return
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            raise SynapseUnavailable(
                f"Synapse did not answer within {START_SECONDS:.0f}s: {server.log()}"
            )
        time.sleep(0.2)


def _request(
    method: str, url: str, body: dict[str, Any] | None = None, *, timeout: float = 30
) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(  # noqa: S310 (loopback http only)
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            answer: dict[str, Any] = json.loads(response.read() or b"{}")
            return answer
    except urllib.error.HTTPError as exc:
        raise SynapseUnavailable(f"{method} {url} -> {exc.code}: {exc.read()[:500]!r}") from None


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has Linux send SIGTERM to Synapse when the test process dies."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    return die_with_parent


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_text(errors="replace").strip()[-limit:] or "(empty log)"
    except OSError:
        return "(no log)"


if __name__ == "__main__":
    print(install_synapse())
