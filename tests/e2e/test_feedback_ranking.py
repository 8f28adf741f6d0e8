"""Reactions teach recall, end to end through ``cairn chat`` (a real subprocess on a fresh
CAIRN_HOME, offline model): after +1 on a reply that used memory M and -1 on one that used N,
M ranks above N for the same question, though N ranked first before; and a memory its author
retracted by reaction is never recalled again, in any thread, after a restart."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.e2e.test_console_chat import CAIRN, _env, chat

M = "the staging cache host is redis-stg-4"
N = "the staging database host is db-stg-1"
RETRACTED = "the staging queue host is mq-stg-2"
QUESTION = "staging host"


def _search(env: dict[str, str], query: str, k: int = 5) -> list[dict[str, Any]]:
    done = subprocess.run(
        [*CAIRN, "memory", "search", query, "-k", str(k), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _reply(outputs: list[dict[str, Any]]) -> str:
    (reply,) = [o["text"] for o in outputs if o["type"] == "reply"]
    return str(reply)


def test_thumbs_up_and_down_reorder_recall_and_a_retraction_is_final(tmp_path: Path) -> None:
    # One memory per answer, so that each reaction acts on exactly the memory that answered.
    env = _env(tmp_path / "home", CAIRN_RECALL_K="1")
    taught = chat(
        env, f"remember {N}\nremember {M}\nremember {RETRACTED}\n/react x\n", "--thread", "teach"
    )
    assert [o["effect"] for o in taught if o["type"] == "reaction"] == ["retract"]
    assert [o["text"] for o in _search(env, QUESTION, 2)] == [N, M]  # N first, before feedback

    useful = chat(env, "what do you know about the staging cache?\n/react +1\n", "--thread", "q1")
    assert M in _reply(useful)
    useless = chat(
        env, "what do you know about the staging database?\n/react -1\n", "--thread", "q2"
    )
    assert N in _reply(useless)
    assert [o["effect"] for o in useful + useless if o["type"] == "reaction"] == [
        "useful",
        "not_useful",
    ]

    ranked = _search(env, QUESTION, 5)
    texts = [o["text"] for o in ranked]
    assert texts.index(M) < texts.index(N)
    by_text = {o["text"]: o for o in ranked}
    assert (by_text[M]["usefulness"], by_text[N]["usefulness"]) == (1.0, -1.0)

    # Retracted by its author: never recalled again, whatever is asked, wherever.
    for question in ("what do you know about the staging queue?", "what is mq-stg-2?"):
        asked = chat(env, f"{question}\n", "--thread", "later")
        assert RETRACTED not in _reply(asked)
    for query in ("staging queue host", "mq-stg-2", QUESTION):
        assert RETRACTED not in [o["text"] for o in _search(env, query, 10)]
