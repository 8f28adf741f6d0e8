"""``cairn memo``: a person sends memos to agents and agents' inboxes show them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.e2e.test_console_chat import _env


def memo(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cairn", "memo", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_send_list_and_acknowledge(tmp_path: Path) -> None:
    env = _env(tmp_path / "home")
    assert (
        memo(
            env,
            "send",
            "--to",
            "review",
            "--priority",
            "5",
            "--expires",
            "2d",
            "deploys are frozen until Monday",
        ).returncode
        == 0
    )
    assert memo(env, "send", "--to", "*", "standup moved to 10:00").returncode == 0
    assert memo(env, "send", "--to", "ops", "only for ops").returncode == 0

    inbox = json.loads(memo(env, "list", "--agent", "review", "--json").stdout)
    assert [m["text"] for m in inbox] == [
        "deploys are frozen until Monday",
        "standup moved to 10:00",
    ]
    assert memo(env, "ack", str(inbox[0]["id"]), "--agent", "review").returncode == 0
    after = json.loads(memo(env, "list", "--agent", "review", "--json").stdout)
    assert [m["text"] for m in after] == ["standup moved to 10:00"]


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    env = _env(tmp_path / "home")
    bad_expiry = memo(env, "send", "--to", "review", "--expires", "soon", "x")
    assert bad_expiry.returncode == 1
    assert "--expires takes a duration like 30m" in bad_expiry.stderr
    bad_name = memo(env, "send", "--to", "Review Team", "x")
    assert "not an agent name" in bad_name.stderr
    missing = memo(env, "ack", "99", "--agent", "review")
    assert "no memo #99 for review" in missing.stderr
