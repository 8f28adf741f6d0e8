"""A full disk is a message, never a silent death: Cairn refuses to start on a filesystem too
small or too full under CAIRN_HOME, refuses new messages with the reason in the thread and on
stderr while the disk is full, takes them again once there is room, and loses nothing it
acknowledged (issue 33, docs/adr/0038).

The filesystems are real: a small tmpfs mounted for the test where this machine lets us mount
one (as root), else the test's own folder with CAIRN_MIN_FREE_MB set just under its free
space, so that a real ballast file crosses the threshold.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from cairn.core.disk import DISK_FULL, disk_space
from cairn.db import Database
from cairn.db.models import MemoryRow

SIGBUS_EXIT = 135


def _mounted(folder: Path, size_mb: int) -> bool:
    """Mount a tmpfs of ``size_mb`` on ``folder``; False where this machine does not let us."""
    folder.mkdir(parents=True, exist_ok=True)
    if not shutil.which("mount") or os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path | None]:
    """A 120 MB tmpfs (None when mounting is impossible), unmounted after the test."""
    folder = tmp_path / "fs"
    mounted = _mounted(folder, 120)
    yield folder if mounted else None
    if mounted:
        subprocess.run(["umount", str(folder)], check=False)


def _env(home: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CAIRN_DATABASE_URL"}
    return env | {"CAIRN_HOME": str(home), "CAIRN_EMBEDDINGS": "none", **more}


def _cairn(*args: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cairn", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_a_filesystem_too_small_for_the_index_is_refused_with_the_reason(tmp_path: Path) -> None:
    folder = tmp_path / "tiny"
    if not _mounted(folder, 40):
        pytest.skip("cannot mount a tmpfs here; the threshold tests below still run")
    try:
        done = _cairn("chat", env=_env(folder / "home"), stdin="remember x is y\n")
        assert done.returncode not in (0, SIGBUS_EXIT)
        assert "too small for the embedded vector index: 40 MB" in done.stderr
        doctor = _cairn("doctor", env=_env(folder / "home"))
        assert doctor.returncode != SIGBUS_EXIT
        assert "FAIL  disk       the filesystem under CAIRN_HOME is too small" in doctor.stdout
        assert "not opened: the disk check failed" in doctor.stdout
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def test_a_disk_full_before_start_stops_chat_and_doctor_with_a_message(tmp_path: Path) -> None:
    # A threshold above what is free is a full disk to Cairn, whatever the filesystem.
    env = _env(tmp_path / "home", CAIRN_MIN_FREE_MB="10000000")
    done = _cairn("chat", "--json", env=env, stdin="remember x is y\n")
    assert done.returncode == 1
    assert f"{DISK_FULL}: " in done.stderr
    assert "CAIRN_MIN_FREE_MB is 10000000" in done.stderr
    doctor = _cairn("doctor", env=env)
    assert doctor.returncode != SIGBUS_EXIT
    assert f"FAIL  disk       {DISK_FULL}" in doctor.stdout


class _Chat:
    """`cairn chat --json` in a child process, spoken to one line at a time."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cairn", "chat", "--json"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._out: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._out.put(line)

    def say(self, text: str) -> list[dict[str, Any]]:
        """Send ``text``; the objects printed for it (the first within a minute, then until
        two quiet seconds)."""
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()
        out = [json.loads(self._out.get(timeout=60))]
        while True:
            try:
                out.append(json.loads(self._out.get(timeout=2)))
            except queue.Empty:
                return out

    def close(self) -> tuple[int, str]:
        assert self.process.stdin is not None
        assert self.process.stderr is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=60)
        return code, self.process.stderr.read()


def test_a_disk_full_mid_conversation_refuses_new_messages_until_there_is_room(
    tmp_path: Path, small_fs: Path | None
) -> None:
    where = small_fs or tmp_path
    home = where / "home"
    home.mkdir()
    free = disk_space(home, 0).free_mb
    threshold = 20 if small_fs else free - 30
    chat = _Chat(_env(home, CAIRN_MIN_FREE_MB=str(threshold)))
    ballast = where / "ballast"
    try:
        first = chat.say("remember the VPN is vpn-one.example.com")
        assert first[0]["type"] == "reply"

        free = disk_space(home, 0).free_mb
        with ballast.open("wb") as f:  # the disk fills: under the threshold by 10 MB
            for _ in range(free - threshold + 10):
                f.write(b"\0" * (1 << 20))
        full = chat.say("remember the standup is at 9:30")
        assert [o["type"] for o in full] == ["error"]
        assert full[0]["text"].startswith(DISK_FULL)

        ballast.unlink()  # freed again
        again = chat.say("remember the wiki is wiki-three.example.com")
        assert again[0]["type"] == "reply"
    finally:
        ballast.unlink(missing_ok=True)
        code, stderr = chat.close()
    assert code != SIGBUS_EXIT
    assert DISK_FULL in stderr  # the operator is told too, not only the thread
    db = Database(f"sqlite:///{home / 'cairn.db'}")
    try:
        with db.session() as s:
            texts = sorted(r.text for r in s.exec(select(MemoryRow)).all())
    finally:
        db.dispose()
    # Everything acknowledged is kept; what was refused was never taken.
    assert texts == ["the VPN is vpn-one.example.com", "the wiki is wiki-three.example.com"]


def test_healthz_fails_while_the_disk_is_full(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests.support.slack_harness import running_slack

    home = tmp_path / "home"
    home.mkdir()
    threshold = disk_space(home, 0).free_mb - 30
    monkeypatch.setenv("CAIRN_HOME", str(home))
    with running_slack(monkeypatch, CAIRN_MIN_FREE_MB=str(threshold)) as h:
        status, body = h.health()
        assert (status, body["checks"]["disk"]) == (200, True)
        ballast = tmp_path / "ballast"
        try:
            with ballast.open("wb") as f:
                for _ in range(disk_space(home, 0).free_mb - threshold + 10):
                    f.write(b"\0" * (1 << 20))
            status, body = h.health()
            assert (status, body["checks"]["disk"]) == (503, False)
        finally:
            ballast.unlink(missing_ok=True)
        assert h.health()[0] == 200
