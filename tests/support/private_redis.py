"""A Redis server of a test's own, which the test may stop and start again (a broker restart).

The shared server on 6379 is never touched. The server keeps nothing on disk, as a broker that
lost its memory in a restart would.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from tests.services import _free_port

__all__ = ["PrivateRedis"]


class PrivateRedis:
    """A Redis server of this test's own, so the test may stop and restart it."""

    def __init__(self, folder: Path) -> None:
        binary = shutil.which("redis-server") or str(Path(sys.executable).parent / "redis-server")
        if not Path(binary).exists():
            pytest.skip("no redis-server binary to start a private Redis")
        self.binary, self.folder, self.port = binary, folder, _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The URL of database 0 on this server."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server (again, on the same port) and wait until it answers a ping."""
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if client.ping():
                    return
            except redis.RedisError:
                time.sleep(0.1)
        pytest.fail("private Redis did not start")

    def stop(self) -> None:
        """Stop the server (SIGTERM) and wait for it to exit."""
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
            self.proc = None
