"""A long message is kept, never refused (issue 31): as memories cut at sentence ends, through
the store, ``cairn bench recall``, ``cairn bench context --locomo`` and a chat turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlmodel import select

from cairn.cli import main
from cairn.core.settings import MemorySettings
from cairn.db import Database
from cairn.db.models import MemoryRow
from cairn.memory.records import MAX_MEMORY_CHARS, MAX_WRITE_CHARS
from cairn.memory.scope import Scope
from cairn.memory.store import MemoryStore
from cairn.runtime import Runtime
from cairn.sessions.events import ChatEvent
from cairn.sessions.ingest import Admission, ingest
from cairn.sessions.log import EventLog
from cairn.workers.turn import handle_pending
from tests.integration.test_session_flow import _outbound

OPS = Scope("acme", "cairn")
# 50,000 characters and more: the longest message a person may paste into a chat.
LONG = " ".join(
    f"Step {i} of the runbook restarts worker-{i} and waits for its health check."
    for i in range(700)
)
NEEDLE = "The rollback of the payments service was approved by Ingrid on Tuesday."


def _long_with_needle() -> str:
    half = len(LONG) // 2
    cut = LONG.index(". ", half) + 2
    return f"{LONG[:cut]}{NEEDLE} {LONG[cut:]}"


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    db = Database(f"sqlite:///{tmp_path / 'long.db'}")
    db.migrate()
    return MemoryStore(db, None, weights=MemorySettings())


def test_a_50000_character_episode_is_kept_in_parts_cut_at_sentence_ends(
    store: MemoryStore,
) -> None:
    text = _long_with_needle()
    assert len(text) > 50_000
    written = store.remember(text, OPS, kind="episode")
    parts = written.parts
    assert len(parts) >= 26
    assert written.memory == parts[0]
    assert all(len(p.text) <= MAX_MEMORY_CHARS for p in parts)
    for n, part in enumerate(parts, 1):
        assert part.text.startswith(f"(part {n}/{len(parts)}) Step ")
        assert part.text.endswith((".", NEEDLE))  # every cut is at a sentence's end
    said = " ".join(p.text.split(") ", 1)[1] for p in parts)
    assert said == text  # nothing lost, nothing doubled
    found = store.recall("who approved the payments rollback", OPS, 1)
    assert NEEDLE in found[0].memory.text


def test_a_long_fact_is_kept_in_parts_and_only_an_absurd_one_is_refused(
    store: MemoryStore,
) -> None:
    written = store.remember(LONG, OPS, kind="fact")
    assert len(written.parts) > 1
    with store.db.session() as s:
        assert len(s.exec(select(MemoryRow)).all()) == len(written.parts)
    from cairn.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match=f"at most {MAX_WRITE_CHARS}"):
        store.remember("word " * (MAX_WRITE_CHARS // 5 + 1), OPS)


def test_a_credential_split_by_a_cut_is_still_refused(store: MemoryStore) -> None:
    from cairn.core.errors import InvalidInput

    secret = "my password is Tr0ub4dor&3-horse-battery"
    with pytest.raises(InvalidInput, match="secret"):
        store.remember(LONG[: MAX_MEMORY_CHARS - 20] + " " + secret + " " + LONG, OPS)


def test_an_episode_holding_a_credential_is_kept_masked_and_a_fact_refused(
    store: MemoryStore,
) -> None:
    from cairn.core.errors import InvalidInput
    from cairn.core.secrets import SECRET_MARK

    said = "Bob: the staging password is Tr0ub4dor&3-horse-battery, the deploy starts at 5."
    kept = store.remember(said, OPS, kind="episode").memory
    assert "Tr0ub4dor" not in kept.text
    assert SECRET_MARK in kept.text
    assert "the deploy starts at 5" in kept.text
    with pytest.raises(InvalidInput, match="secret"):
        store.remember(said, OPS, kind="fact")


def _conversation(folder: Path) -> Path:
    """A LoCoMo-format conversation with one 50,000-character turn among short ones."""
    folder.mkdir()
    turns = [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "Morning! Did the restart go well?"},
        {"speaker": "Bob", "dia_id": "D1:2", "text": _long_with_needle()},
        {"speaker": "Ann", "dia_id": "D1:3", "text": "Great, thanks for pasting the whole log."},
    ]
    conversation = {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": turns,
    }
    qa = [{"question": "Who approved the rollback of payments?", "answer": "Ingrid",
           "evidence": ["D1:2"], "category": 4}]  # fmt: skip
    (folder / "long.json").write_text(json.dumps({"conversation": conversation, "qa": qa}))
    return folder


def test_bench_recall_reads_a_conversation_with_a_50000_character_turn(tmp_path: Path) -> None:
    data = _conversation(tmp_path / "locomo")
    result = CliRunner().invoke(main, ["bench", "recall", "--data", str(data), "--json"])
    assert result.exit_code == 0, result.output
    cairn = json.loads(result.stdout)["methods"]["cairn"]
    assert cairn["n"] == 1
    assert cairn["recall@5"] == 1.0


def test_bench_context_replays_a_conversation_with_a_50000_character_turn(
    tmp_path: Path,
) -> None:
    data = _conversation(tmp_path / "locomo")
    result = CliRunner().invoke(
        main, ["bench", "context", "--locomo", str(data), "--budget", "4000", "--json"]
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert (figures["turns"], figures["questions"]) == (3, 1)


def test_remembering_a_50000_character_message_in_chat(runtime: Runtime) -> None:
    text = f"remember {_long_with_needle()}"
    event = ChatEvent("console", "acme", "C1", "t-1", "ann", text=text, event_id="m-long")
    result = ingest(EventLog(runtime.db), event, agent="cairn", max_chars=len(text))
    assert result.admission is Admission.QUEUED
    assert result.session_id is not None
    handle_pending(runtime, result.session_id)
    said = [m.text for m in _outbound(runtime, result.session_id)]
    assert not any("at most" in line for line in said), said
    with runtime.db.session() as s:
        rows = s.exec(select(MemoryRow)).all()
    assert len(rows) >= 26
    assert sum(NEEDLE in row.text for row in rows) == 1
    assert {row.source_message for row in rows} == {rows[0].source_message}  # linked
