"""Exactly one scheduler of periodic jobs, whatever gets killed.

Real ``cairn worker --beat`` processes, each with its own CAIRN_HOME (as on separate machines),
share a Redis broker of the test's own. The test watches that Redis with MONITOR: every
periodic job a beat queues is an LPUSH whose headers carry ``celery_beat_task`` and the pid of
the process that sent it (``origin: gen<pid>@host``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from cairn.core.settings import load_settings
from cairn.workers import upkeep
from cairn.workers.beat import LAST_RUN_KEY, scheduler_holder
from tests.e2e.test_console_chat import CAIRN, _env, _wait_ready
from tests.e2e.test_faults import private_redis  # noqa: F401 (the fixture, with its own Redis)
from tests.support.private_redis import PrivateRedis

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc"),
]

INTERVAL = 1.0  # CAIRN_BEAT_INTERVAL: the reconcile and requeue jobs run every second
TTL = 3.0  # CAIRN_LOCK_TTL: a dead scheduler's lock lapses within 3 s
BEAT_EXIT_SECONDS = 20.0  # a beat whose worker died is gone within this, even on a loaded machine
ORIGIN = re.compile(r"gen(\d+)@")
# How long a freshly started worker may take to queue its first periodic job: the beat starts
# after the worker is ready, and on a loaded 2-core machine that took over 30 s.
START_TIMEOUT = 90.0

StartWorker = Callable[[str], subprocess.Popen[bytes]]


class BeatWatch:
    """Records (monotonic time, sender pid) of every periodic job queued on the broker."""

    def __init__(self, url: str) -> None:
        self.jobs: list[tuple[float, int]] = []
        self.logs: list[Path] = []  # the workers' logs, shown when no beat sends
        self.ended = ""  # why the watch last stopped watching, if it did
        self.stopped = threading.Event()
        self._client = redis.Redis.from_url(url)
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        # Watches again after anything that ends a MONITOR (a reply it cannot parse, a dropped
        # connection), so that one odd command does not blind the test; the last cause is kept.
        while not self.stopped.is_set():
            try:
                with self._client.monitor() as monitor:
                    for seen in monitor.listen():
                        command = str(seen.get("command", ""))
                        if command.startswith("LPUSH") and "celery_beat_task" in command:
                            found = ORIGIN.search(command)
                            if found:
                                self.jobs.append((time.monotonic(), int(found.group(1))))
            except Exception as exc:  # the private Redis stopped at the end of the test, or worse
                self.ended = repr(exc)
                self.stopped.wait(0.2)

    def senders(self, since: float, until: float = float("inf")) -> set[int]:
        """Pids that queued periodic jobs between ``since`` and ``until``."""
        return {pid for at, pid in list(self.jobs) if since <= at < until}

    def wait_for_sender(self, since: float, timeout: float, *, other_than: int = 0) -> int:
        """The first pid (other than ``other_than``) to queue a periodic job after ``since``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for pid in sorted(self.senders(since) - {other_than}):
                return pid
            time.sleep(0.05)
        pytest.fail(f"no beat queued a periodic job within {timeout:.0f}s\n{self._report()}")

    def _report(self) -> str:
        """What the watch and the workers say: the end of each log, each process's state."""
        lines = [f"watch ended: {self.ended or 'no'}; jobs seen: {len(self.jobs)}"]
        try:  # what the beats wrote to Redis, whatever the watch saw
            lines.append(f"lock held by: {scheduler_holder(self._client)}")
            lines.append(f"last runs: {self._client.hgetall(LAST_RUN_KEY)}")
            lines.append(f"queued: {self._client.llen('cairn')}")
        except redis.RedisError as exc:
            lines.append(f"Redis: {exc}")
        for log in self.logs:
            lines.append(f"--- {log.name} (last 40 lines)")
            lines.extend(log.read_text(errors="replace").splitlines()[-40:])
        for pid_dir in Path("/proc").glob("[0-9]*"):
            with contextlib.suppress(OSError):
                command = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                if "cairn" in command and "worker" in command:
                    wchan = (pid_dir / "wchan").read_text()
                    lines.append(f"pid {pid_dir.name} {_stat(int(pid_dir.name))!r:.60} {wchan}")
        return "\n".join(lines)


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name; None for a process gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if fields[0] == "Z" else fields


def _parent(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[1]) if fields else None


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _stat(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    return _stat(pid) is None


@pytest.fixture
def watch(private_redis: PrivateRedis) -> Iterator[BeatWatch]:  # noqa: F811 - imported above
    watching = BeatWatch(private_redis.url)
    yield watching
    watching.stopped.set()


@pytest.fixture
def beat_workers(
    tmp_path: Path,
    watch: BeatWatch,
    private_redis: PrivateRedis,  # noqa: F811 - the fixture imported above
) -> Iterator[StartWorker]:
    """Starts ``cairn worker --beat`` in its own process group (named by its home); at the end
    kills each group, which also reaches a beat that outlived its worker."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str) -> subprocess.Popen[bytes]:
        env = _env(
            tmp_path / name,
            CAIRN_BROKER_URL=private_redis.url,
            CAIRN_BEAT_INTERVAL=str(INTERVAL),
            CAIRN_LOCK_TTL=str(TTL),
        )
        watch.logs.append(tmp_path / f"{name}.log")
        with (tmp_path / f"{name}.log").open("w") as out:
            proc = subprocess.Popen(
                [*CAIRN, "worker", "-c", "1", "--beat"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def test_a_beat_ends_with_its_worker_killed_by_sigkill(
    tmp_path: Path, watch: BeatWatch, beat_workers: StartWorker
) -> None:
    worker = beat_workers("home")
    _wait_ready(tmp_path / "home.log", worker)
    beat = watch.wait_for_sender(since=0, timeout=START_TIMEOUT)
    assert _parent(beat) == worker.pid

    os.kill(worker.pid, signal.SIGKILL)  # the worker only, as `kill -9 <pid>` does
    worker.wait(timeout=10)

    # The beat is told at once (SIGTERM on its parent's death); how long its shutdown takes
    # depends on the machine's load, so the bound is generous and the check is what follows.
    assert _wait_gone(beat, timeout=BEAT_EXIT_SECONDS), f"the beat {beat} outlived its worker"
    gone = time.monotonic()
    time.sleep(3 * INTERVAL)
    assert watch.senders(since=gone + 0.5) == set(), "periodic jobs kept coming"


def test_two_beats_schedule_once_and_the_standby_takes_over_after_a_sigkill(
    tmp_path: Path,
    watch: BeatWatch,
    beat_workers: StartWorker,
    private_redis: PrivateRedis,  # noqa: F811 - the fixture imported above
) -> None:
    workers = {beat_workers(name): name for name in ("one", "two")}  # both at once
    for proc, name in workers.items():
        _wait_ready(tmp_path / f"{name}.log", proc)
    first = watch.wait_for_sender(since=0, timeout=START_TIMEOUT)
    time.sleep(1.0)  # both beats are up and have tried the lock by now

    window = time.monotonic()
    time.sleep(4 * INTERVAL)
    assert watch.senders(since=window) == {first}, "more than one beat scheduled"
    # Every second, a reconcile, a requeue and an approval-expiry job: about 12 in 4 s from
    # one scheduler (two schedulers would send twice that).
    settings = load_settings(CAIRN_BEAT_INTERVAL=str(INTERVAL))
    each_second = sum(1 for job in upkeep.JOBS if job.every(settings) <= INTERVAL)
    assert len([at for at, _ in watch.jobs if at >= window]) <= 4 * each_second + each_second

    scheduling = next(proc for proc in workers if proc.pid == _parent(first))
    os.kill(scheduling.pid, signal.SIGKILL)
    scheduling.wait(timeout=10)
    killed = time.monotonic()

    second = watch.wait_for_sender(since=killed, timeout=TTL + 2 * INTERVAL, other_than=first)
    standby = next(proc for proc in workers if proc is not scheduling)
    assert _parent(second) == standby.pid
    time.sleep(2 * INTERVAL)
    assert watch.senders(since=killed + 0.5) == {second}

    # cairn doctor names the beat that schedules.
    env = _env(tmp_path / "doctor", CAIRN_BROKER_URL=private_redis.url)
    done = subprocess.run(
        [*CAIRN, "doctor", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    workers_check = next(c for c in json.loads(done.stdout) if c["name"] == "workers")
    assert f":{second}:" in workers_check["detail"], workers_check
