"""Child processes that tests start in their own process group, and stop with all they started."""

from __future__ import annotations

import os
import signal
import subprocess

__all__ = ["stop_group"]


def stop_group(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """SIGTERM the process group of ``proc`` (started with ``start_new_session=True``) and
    wait; SIGKILL it when it does not end within ``timeout`` seconds."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
