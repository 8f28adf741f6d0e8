"""``cairn chat`` waits at /quit and at the end of its input for the replies it still owes, up
to CAIRN_QUIT_TIMEOUT, and says so when it gives up (issue 33).

A turn that outlives CAIRN_REPLY_TIMEOUT (the offline model writes slowly here, with
CAIRN_LLM_OFFLINE_DELAY) used to be left behind: the console went on, and at the end it left
without the reply, which waited in the outbox for the next run.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_console_chat import CAIRN, _env, chat
from tests.e2e.test_console_restart import _pending

pytestmark = pytest.mark.slow

FACT = "the deploy window is friday"


def _run(env: dict[str, str], script: str) -> tuple[int, list[dict[str, object]], str]:
    done = subprocess.run(
        [*CAIRN, "chat", "--json"],
        input=script,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return done.returncode, lines, done.stderr


def test_quit_waits_for_a_reply_that_outlived_its_wait_and_shows_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = _env(home, CAIRN_REPLY_TIMEOUT="1", CAIRN_LLM_OFFLINE_DELAY="1")
    code, out, err = _run(env, f"remember {FACT}\n/quit\n")
    assert [o["type"] for o in out] == ["error", "reply", "notice"], out
    assert "no answer within 1s" in str(out[0]["text"])
    assert out[2]["text"] == f"remembered: {FACT}"
    assert "waiting up to 60s (CAIRN_QUIT_TIMEOUT) for 1 reply still owed" in err
    assert code == 1  # the message's own wait did time out
    assert _pending(home) == 0
    # Shown once: the next run has nothing left to show.
    assert chat(_env(home), "") == []


def test_quit_gives_up_after_the_quit_timeout_says_so_and_the_next_run_shows_the_reply(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    slow = _env(
        home,
        CAIRN_REPLY_TIMEOUT="1",
        CAIRN_QUIT_TIMEOUT="1",
        CAIRN_LLM_OFFLINE_DELAY="3",
    )
    code, out, _ = _run(slow, f"remember {FACT}\n")
    assert [o["type"] for o in out] == ["error", "error"], out
    assert out[1]["text"] == (
        "gave up after 1s (CAIRN_QUIT_TIMEOUT) waiting for 1 reply in thread main; "
        "leaving without it: the next `cairn chat` shows it"
    )
    assert code == 1
    # It left while the turn was still being written: it did not wait for it after all.
    assert _pending(home) == 1

    later = chat(_env(home), "")
    assert [o["type"] for o in later] == ["reply", "notice"], later
    assert later[1]["text"] == f"remembered: {FACT}"
    assert _pending(home) == 0
