"""`cairn worker` processes for the benchmarks that measure the Redis mode.

A bench starts its own workers on a settings environment of its own (a fresh CAIRN_HOME, the
offline model), so that what the caller's environment configures (another database, a live
broker, an API key) never reaches them; it stops them, and their process groups, when done.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import cairn
from cairn.core.errors import CairnError
from cairn.core.settings import Settings
from cairn.workers.celery_app import configure_celery

__all__ = ["bench_env", "start_workers", "stop_workers"]

# What a bench takes from the caller's environment: which embedding model runs, and how.
PASSED_THROUGH = frozenset({"CAIRN_EMBEDDINGS", "CAIRN_EMBEDDING_ENGINE"})


def bench_env(
    home: Path, settings: Mapping[str, str], *, passed: Iterable[str] = ()
) -> dict[str, str]:
    """The environment of a bench's processes: the caller's, minus every CAIRN_ and ANTHROPIC_
    variable except the embedding ones and ``passed``, plus CAIRN_HOME=``home``, the offline
    model, quiet logs and ``settings``."""
    keep = PASSED_THROUGH | set(passed)
    return (
        {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CAIRN_", "ANTHROPIC_")) or k in keep
        }
        | {"CAIRN_HOME": str(home), "CAIRN_LLM": "offline", "CAIRN_LOG_LEVEL": "ERROR"}
        | dict(settings)
    )


def start_workers(
    settings: Settings,
    env: Mapping[str, str],
    home: Path,
    count: int,
    *,
    concurrency: int = 4,
    timeout: float = 90.0,
) -> list[subprocess.Popen[bytes]]:
    """Start ``count`` `cairn worker` processes on ``env`` (logs in ``home``) and wait until
    each answers a Celery ping; raises CairnError, with a worker's log, if one does not."""
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []
    try:
        for n in range(count):
            logs.append(home / f"worker-{n}.log")
            with logs[-1].open("w") as out:
                procs.append(
                    subprocess.Popen(  # noqa: S603 (our interpreter and a number: no input)
                        [
                            sys.executable,
                            "-m",
                            "cairn",
                            "worker",
                            "-c",
                            str(concurrency),
                            "-l",
                            "WARNING",
                        ],
                        env=_same_code(env),
                        cwd=home,  # no cairn.toml of the caller's working folder
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,  # its pool children stop with it
                    )
                )
        if procs:
            _wait_ready(settings, procs, logs, timeout)
    except BaseException:
        stop_workers(procs)
        raise
    return procs


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    """Stop the workers (SIGTERM to each process group, SIGKILL after 30 s)."""
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _same_code(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with this process's ``cairn`` first on the path: a worker started in another
    folder runs the very code the bench does, not whichever copy is installed."""
    here = str(Path(cairn.__file__).resolve().parent.parent)
    path = [here, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    return {**env, "PYTHONPATH": os.pathsep.join(path)}


def _wait_ready(
    settings: Settings, procs: list[subprocess.Popen[bytes]], logs: list[Path], timeout: float
) -> None:
    """Wait until every worker answers a Celery ping."""
    control = configure_celery(settings).control
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc, log in zip(procs, logs, strict=True):
            if proc.poll() is not None:
                raise CairnError(f"a bench worker exited early:\n{log.read_text()[-2000:]}")
        if len(control.ping(timeout=1.0) or []) >= len(procs):
            return
    raise CairnError(f"bench workers did not start:\n{logs[-1].read_text()[-2000:]}")
