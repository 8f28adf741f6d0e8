"""A reply owed by a killed ``cairn chat`` is shown by the next run while it runs (issue 33).

The first run takes a message in and is killed (SIGKILL) while its turn is still thinking (the
offline model's delay); the next run queues it again at start, and must print its reply before
it ends, not leave it for the run after.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from tests.e2e.test_console_chat import CAIRN, _env, chat
from tests.support.processes import stop_group


def _pending(home: Path) -> int:
    with sqlite3.connect(home / "cairn.db") as db:
        (count,) = db.execute(
            "SELECT count(*) FROM session_event WHERE status = 'pending'"
        ).fetchone()
    return int(count)


def _taken_in(home: Path) -> bool:
    """Whether the run has queued its one message (False while its database is being made)."""
    try:
        return (home / "cairn.db").exists() and _pending(home) == 1
    except sqlite3.OperationalError:  # the file is there, its tables not yet
        return False


def test_the_reply_to_a_message_a_killed_run_took_in_is_shown_by_the_next_run(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    env = _env(home, CAIRN_LLM_OFFLINE_DELAY="2")
    first = subprocess.Popen(
        [*CAIRN, "chat", "--json", "--thread", "a"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    try:
        assert first.stdin is not None
        first.stdin.write(b"remember the deploy window is friday\n")
        first.stdin.flush()
        deadline = time.monotonic() + 60
        while not _taken_in(home):
            assert time.monotonic() < deadline, "the first run never took the message in"
            time.sleep(0.05)
        os.killpg(first.pid, signal.SIGKILL)  # mid-turn: the model is still thinking
        first.wait()
    finally:
        stop_group(first)
    assert _pending(home) == 1

    # The next run is asked something else, in another thread; the owed reply comes too.
    out = chat(env, "/thread b\n")
    owed = [o for o in out if o.get("thread") == "a"]
    assert [o["type"] for o in owed] == ["reply", "notice"], out
    assert owed[1]["text"] == "remembered: the deploy window is friday"
    assert _pending(home) == 0
    # Shown once: the run after has nothing left to show.
    assert chat(env, "/thread c\n") == []
