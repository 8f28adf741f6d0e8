"""LoCoMo conversations for the memory benchmarks: reading them, storing them in a scratch store.

``cairn bench recall`` (and its ``--cv``) and the context benchmark read the same files the same
way: every turn is an episodic memory ("Speaker: text", plus the caption of an image it shared)
at its session's date and time, and the questions of categories 1-4 that name evidence turns
are what is asked.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cairn.core.settings import MemorySettings
from cairn.db import Database
from cairn.memory.embed import Embedder
from cairn.memory.index import embedded_index
from cairn.memory.scope import Scope, Source, Visibility
from cairn.memory.store import MemoryStore

__all__ = ["StoredConversation", "default_locomo", "store_conversation"]

_DATE = "%I:%M %p on %d %B, %Y"


@contextmanager
def _scratch_store(
    embedder: Embedder | None, weights: MemorySettings | None = None
) -> Iterator[MemoryStore]:
    with tempfile.TemporaryDirectory(prefix="cairn-bench-") as tmp:
        db = Database(f"sqlite:///{tmp}/bench.db")
        db.migrate()
        dim = embedder.dim if embedder is not None else None
        index = embedded_index(Path(tmp) / "qdrant", dim)
        store = MemoryStore(db, index, embedder=embedder, weights=weights)
        try:
            yield store
        finally:
            index.close()
            db.dispose()


def _turns(conversation: dict[str, Any]) -> Iterator[tuple[str, str, datetime, str, str]]:
    """(dia_id, text, when, session, speaker) of every turn; only turns, speakers and dates are
    read."""
    sessions = sorted(
        int(m.group(1))
        for key in conversation
        if (m := re.fullmatch(r"session_(\d+)", key)) and isinstance(conversation[key], list)
    )
    for n in sessions:
        start = datetime.strptime(conversation[f"session_{n}_date_time"], _DATE).replace(tzinfo=UTC)
        for i, turn in enumerate(conversation[f"session_{n}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares an image: {turn['blip_caption']}]"
            when = start + timedelta(seconds=30 * i)
            yield turn["dia_id"], text, when, f"session_{n}", turn["speaker"]


def _evidence(item: dict[str, Any]) -> set[str]:
    found: set[str] = set()
    for entry in item.get("evidence") or []:
        found.update(re.findall(r"D\d+:\d+", str(entry)))
    return found


@dataclass(frozen=True, slots=True)
class StoredConversation:
    """A LoCoMo conversation stored as episodic memories, and its questions of categories 1-4
    that name evidence (asked a day after its last session)."""

    scope: Scope
    dia_of: dict[int, str]  # memory id -> the turn's dia_id
    created: dict[int, datetime]
    asked_at: datetime
    questions: list[dict[str, Any]]


def store_conversation(store: MemoryStore, path: Path) -> StoredConversation:
    """Store every turn of the conversation in ``path`` as an episodic memory ("Speaker:
    text", at its session's date and time, by its speaker as a chat message is by its author)
    of a tenant of its own; flushes the index."""
    record = json.loads(path.read_text())
    conversation = record.get("conversation", record)
    scope = Scope(f"locomo:{path.stem}", "bench")
    dia_of: dict[int, str] = {}
    created: dict[int, datetime] = {}
    last = datetime.min.replace(tzinfo=UTC)
    for dia_id, text, when, session, speaker in _turns(conversation):
        written = store.remember(
            text,
            scope,
            kind="episode",
            visibility=Visibility.TEAM,
            source=Source(
                platform="locomo",
                thread=f"{path.stem}/{session}",
                message=dia_id,
                author=speaker,
            ),
            created_at=when,
            flush=False,
        )
        for memory in written.parts or (written.memory,):  # a long turn is kept in parts
            dia_of[memory.id] = dia_id
            created[memory.id] = when
        last = max(last, when)
    store.flush_outbox()
    store.optimize_index()
    questions = [
        q for q in record.get("qa", []) if q.get("category") in (1, 2, 3, 4) and _evidence(q)
    ]
    return StoredConversation(scope, dia_of, created, last + timedelta(days=1), questions)


def default_locomo() -> Path:
    """../shared/data/locomo beside the repository root (how CI lays it out)."""
    root = Path(__file__).resolve().parents[2]
    return root.parent / "shared" / "data" / "locomo"
