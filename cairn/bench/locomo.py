"""Conversations for the memory benchmarks: reading them, storing them in a scratch store.

``cairn bench recall`` (and its ``--cv``) and the context benchmark read the same files the same
way: every turn is an episodic memory ("Speaker: text", plus the caption of an image it shared)
at its date and time, and the questions of categories 1-4 that name evidence turns are what is
asked. Two formats are read as they are released:

- LoCoMo (``speaker_a``/``speaker_b``, ``session_N_date_time``, turns of ``speaker`` and
  ``text``; categories 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop);
- real messaging-app chats ("realchat": ``name`` of ``speaker_1``/``speaker_2``, turns of
  ``clean_text`` with their own ``date_time``, "29.12.2023, 22:42:04"; categories 1 multi-hop,
  2 temporal, 3 commonsense). Its speakers' names are spelled as typed ("elise", "Elise": one
  person, named as the ``name`` record names them, capitalised, or by the persona they played
  when the annotations give one), a turn may only share an image, and its evidence is written
  by hand (see :func:`evidence_of`).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cairn.core.errors import InvalidInput
from cairn.core.settings import MemorySettings
from cairn.db import Database
from cairn.memory.embed import Embedder
from cairn.memory.index import embedded_index
from cairn.memory.scope import Scope, Source, Visibility
from cairn.memory.store import MemoryStore

__all__ = [
    "CATEGORIES",
    "StoredConversation",
    "default_locomo",
    "default_sets",
    "evidence_of",
    "format_of",
    "questions_of",
    "store_conversation",
]

_DATE = "%I:%M %p on %d %B, %Y"
_REALCHAT_DATE = "%d.%m.%Y, %H:%M:%S"

# The question categories of each format, as its release names them.
CATEGORIES = {
    "locomo": {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"},
    "realchat": {1: "multi-hop", 2: "temporal", 3: "commonsense"},
}


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


def format_of(record: dict[str, Any]) -> str:
    """ "realchat" for a real messaging-app conversation (its ``name`` record names the
    speakers), else "locomo"."""
    return "realchat" if isinstance(record.get("name"), dict) else "locomo"


def _turns(conversation: dict[str, Any]) -> Iterator[tuple[str, str, datetime, str, str]]:
    """(dia_id, text, when, session, speaker) of every turn; only turns, speakers and dates are
    read."""
    if format_of(conversation) == "realchat":
        yield from _realchat_turns(conversation)
        return
    for n in _sessions(conversation):
        start = datetime.strptime(conversation[f"session_{n}_date_time"], _DATE).replace(tzinfo=UTC)
        for i, turn in enumerate(conversation[f"session_{n}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares an image: {turn['blip_caption']}]"
            when = start + timedelta(seconds=30 * i)
            yield turn["dia_id"], text, when, f"session_{n}", turn["speaker"]


def _sessions(conversation: dict[str, Any]) -> list[int]:
    return sorted(
        int(m.group(1))
        for key in conversation
        if (m := re.fullmatch(r"session_(\d+)", key)) and isinstance(conversation[key], list)
    )


def _realchat_turns(conversation: dict[str, Any]) -> Iterator[tuple[str, str, datetime, str, str]]:
    """A real chat's turns, each at its own time; a turn that only shares an image is "[shares
    an image]" (with its caption when it has one), one with neither text nor image is skipped."""
    names = {
        str(n).casefold(): str(n)[:1].upper() + str(n)[1:] for n in conversation["name"].values()
    }
    names |= _personas(conversation)
    for n in _sessions(conversation):
        for turn in conversation[f"session_{n}"]:
            typed = str(turn.get("speaker") or "")
            speaker = names.get(typed.casefold(), typed)
            said = str(turn.get("clean_text") or "").strip()
            image = turn.get("blip_caption") or ""
            if image:
                said = f"{said} [shares an image: {image}]".strip()
            elif turn.get("img_url") or turn.get("img_file"):
                said = f"{said} [shares an image]".strip()
            if not said:
                continue
            when = datetime.strptime(str(turn["date_time"]).strip(), _REALCHAT_DATE)
            when = when.replace(tzinfo=UTC)
            yield turn["dia_id"], f"{speaker}: {said}", when, f"session_{n}", speaker


def _personas(conversation: dict[str, Any]) -> dict[str, str]:
    """The name each speaker goes by in the conversation, where the annotations give one other
    than the speaker's (people played personas: the others call them by it, and so do the
    questions), by speaker name folded: the name most of their events start with, if it
    starts at least three."""
    found = {}
    for number, side in (("1", "agent_a"), ("2", "agent_b")):
        speaker = str(conversation["name"].get(f"speaker_{number}", ""))
        named = Counter(
            m.group(1)
            for key, events in conversation.items()
            if key.startswith("events_session_") and isinstance(events, dict)
            for event in events.get(side) or []
            if (m := re.match(r"\s*([A-Z][a-z]+)\b", str(event.get("sub-event", ""))))
        )
        if named and speaker:
            persona, count = named.most_common(1)[0]
            if count >= 3 and persona.casefold() != speaker.casefold():
                found[speaker.casefold()] = persona
    return found


# A turn id as people write it: "D12:3", "D12 : 3", "D17;39" (a slip of the finger); a range
# "D12:3-D12:5" or "D12:3-5".
_TURN_ID = re.compile(r"D\s*(\d+)\s*[:;]\s*(\d+)(?:\s*-\s*(?:D\s*(\d+)\s*[:;]\s*)?(\d+))?")


def evidence_of(item: dict[str, Any]) -> set[str]:
    """The turn ids a question's ``evidence`` names, normalised: entries may hold several ids
    separated by ";" or "," or spaces, ranges (every turn of a range in one session; the two
    ends of one across sessions), a trailing "."; an entry that names no turn adds none."""
    found: set[str] = set()
    for entry in item.get("evidence") or []:
        for session, first, other, last in _TURN_ID.findall(str(entry)):
            if not last:
                found.add(f"D{int(session)}:{int(first)}")
            elif other and int(other) != int(session):
                found |= {f"D{int(session)}:{int(first)}", f"D{int(other)}:{int(last)}"}
            else:
                low, high = sorted((int(first), int(last)))
                found |= {f"D{int(session)}:{t}" for t in range(low, high + 1)}
    return found


@dataclass(frozen=True, slots=True)
class StoredConversation:
    """A conversation stored as episodic memories, and its questions of categories 1-4 that
    name evidence among its turns (asked a day after its last turn). Each question's
    ``evidence`` is normalised (:func:`evidence_of`), kept to the turns the conversation has."""

    scope: Scope
    dia_of: dict[int, str]  # memory id -> the turn's dia_id
    created: dict[int, datetime]
    asked_at: datetime
    questions: list[dict[str, Any]]
    format: str = "locomo"  # or "realchat"


def store_conversation(store: MemoryStore, path: Path) -> StoredConversation:
    """Store every turn of the conversation in ``path`` as an episodic memory ("Speaker:
    text", at its date and time, by its speaker as a chat message is by its author) of a tenant
    of its own; flushes the index."""
    record = json.loads(path.read_text())
    conversation = record.get("conversation", record)
    fmt = format_of(conversation)
    scope = Scope(f"{fmt}:{path.stem}", "bench")
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
                platform=fmt,
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
    return StoredConversation(
        scope, dia_of, created, last + timedelta(days=1), questions_of(record), fmt
    )


def questions_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The questions of ``record`` that are asked: of its format's categories, naming evidence
    among its turns; each with its ``evidence`` normalised (:func:`evidence_of`) to those."""
    conversation = record.get("conversation", record)
    known = {dia_id for dia_id, *_ in _turns(conversation)}
    categories = CATEGORIES[format_of(conversation)]
    asked = []
    for item in record.get("qa", []):
        evidence = evidence_of(item) & known
        if item.get("category") in categories and evidence:
            asked.append(item | {"evidence": sorted(evidence)})
    return asked


def default_sets() -> list[Path]:
    """The development sets beside the repository root that are there: ../shared/data/locomo
    and ../shared/data/realchat."""
    data = default_locomo().parent
    return [folder for folder in (data / "locomo", data / "realchat") if folder.is_dir()]


def default_locomo() -> Path:
    """../shared/data/locomo beside the repository root (how CI lays it out)."""
    root = Path(__file__).resolve().parents[2]
    return root.parent / "shared" / "data" / "locomo"


def conversation_files(folders: Sequence[Path]) -> list[tuple[str, Path]]:
    """(set, file) of every conversation file in ``folders``, the set named by its folder.
    Raises InvalidInput when a folder holds none."""
    found = []
    for folder in folders:
        files = sorted(p for p in folder.glob("*.json") if p.is_file())
        if not files:
            raise InvalidInput(f"no conversation files (*.json) in {folder}")
        found += [(folder.name, path) for path in files]
    return found
