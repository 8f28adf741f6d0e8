"""A session's compact state, derived deterministically from its event log: the checkpoint.

The state holds the state graph (tasks, decisions, constraints, notes, each with the turn it was
last touched, from which its tier follows), the checkpoint fields (request, narrative, files,
findings, open and fixed errors, activity), a digest per turn and the units the compiler scores.
:func:`fold` applies one event; folding the same events in the same order always gives the same
state, so a worker on another machine resumes from a saved checkpoint plus the events after it
and gets exactly what an uninterrupted worker has. No model writes any of it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from cairn.db.models import EventKind, EventStatus
from cairn.memory.context.pastes import Card, Rendered, card_text, render_message, render_text
from cairn.memory.context.relevance import BM25, keywords, ordered_keywords

__all__ = [
    "ITEM_KINDS",
    "STATE_TOOLS",
    "EventView",
    "Item",
    "SessionState",
    "Unit",
    "fold",
    "hydrate",
    "tier",
]

STATE_VERSION = 1
ITEM_KINDS = ("constraint", "decision", "task", "note")
STATE_TOOLS = frozenset({"add_constraint", "add_decision", "add_task", "add_note", "update_item"})
_PREFIX = {"constraint": "C", "decision": "D", "task": "T", "note": "N"}

# Bounds that keep a checkpoint (and so resuming and compiling) independent of thread length.
MAX_UNITS = 400
FULL_UNITS = 24  # the newest units keep their full rendered text; older ones a compact form
MAX_NARRATIVE = 12
MAX_FILES = 30
MAX_FINDINGS = 30
MAX_FIXED = 20
MAX_ACTIVITY = 8
_CLIP_REPLY = 1200
_COMPACT_LINES = 8

_MARKER = re.compile(
    r"^\s*(?:[-*•]\s*)?(?P<tag>constraints?|rules?|decisions?|decided|tasks?|todo|action items?|"
    r"notes?|findings?|root cause|fixed|done|resolved)\s*[:\-\u2013]\s*(?P<text>\S.*)$",
    re.I | re.M,
)
_TAG_KIND = {
    "constraint": "constraint",
    "rule": "constraint",
    "decision": "decision",
    "decided": "decision",
    "task": "task",
    "todo": "task",
    "action item": "task",
    "note": "note",
}
_CARD_HEAD = re.compile(r"\[artifact (\w+) · (\w+)")
_RATIONALE = re.compile(r"\s+(?:because|since|as|so that|reason:)\s+", re.I)
_FILE = re.compile(
    r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]+\.(?:py|ts|tsx|js|go|rs|java|rb|yaml|yml|"
    r"toml|json|sql|sh|tf|conf|ini|md|c|h|cpp|cs|kt)\b"
)


@dataclass(frozen=True, slots=True)
class EventView:
    """The fields of a session event the fold reads (so tests and the bench need no rows)."""

    seq: int
    kind: str
    text: str
    user: str = ""
    status: str = EventStatus.DONE
    data: dict[str, Any] = field(default_factory=dict)
    id: int = 0  # the row id, which a reply names as its cause


@dataclass(slots=True)
class Item:
    """A node of the state graph."""

    id: str
    kind: str
    text: str
    rationale: str = ""
    status: str = "open"
    created_turn: int = 0
    touched_turn: int = 0
    source: str = "message"

    def to_json(self) -> dict[str, Any]:
        """The item as state tools return it; the fold reads it back from the tool result."""
        return _fields(self)


def tier(item: Item, turn: int, soft_after: int, hard_after: int) -> str:
    """``active``, ``soft`` or ``hard`` by how many turns the item has been idle."""
    idle = turn - item.touched_turn
    if idle < soft_after:
        return "active"
    return "soft" if idle < hard_after else "hard"


@dataclass(slots=True)
class Unit:
    """One person message of the thread (with the bot's reply), as the compiler may show it."""

    seq: int
    turn: int
    user: str
    text: str
    reply: str = ""
    digest: str = ""
    keywords: list[str] = field(default_factory=list)
    pinned: bool = False
    full: bool = True
    event_id: int = 0

    def render(self) -> str:
        """The unit as a prompt line block."""
        out = f"[turn {self.turn} · {self.user or 'someone'}] {self.text}"
        if self.reply:
            out += f"\n  -> replied: {self.reply}"
        return out


@dataclass(slots=True)
class SessionState:
    """The checkpoint of a session through event ``through_seq``."""

    through_seq: int = 0
    turn: int = 0
    request: str = ""
    narrative: list[str] = field(default_factory=list)
    items: dict[str, Item] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    open_errors: dict[str, list[int]] = field(default_factory=dict)  # sig -> [first, last, n]
    fixed_errors: list[str] = field(default_factory=list)
    activity: dict[str, int] = field(default_factory=dict)
    recent_activity: list[str] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)

    # --- persistence ----------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (stored in ``context_checkpoint.state``)."""
        data: dict[str, Any] = {name: getattr(self, name) for name in self.__slots__}
        data["items"] = {k: _fields(v) for k, v in self.items.items()}
        data["units"] = [_fields(u) for u in self.units]
        data["version"] = STATE_VERSION
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionState:
        """The state a :meth:`to_json` dict describes (an empty state for another version)."""
        if data.get("version") != STATE_VERSION:
            return cls()
        fields = {k: v for k, v in data.items() if k != "version"}
        fields["items"] = {k: Item(**v) for k, v in fields.get("items", {}).items()}
        fields["units"] = [Unit(**u) for u in fields.get("units", [])]
        return cls(**fields)

    def fingerprint(self) -> str:
        """A canonical text of the whole state, to compare two states exactly."""
        return json.dumps(self.to_json(), sort_keys=True)

    def copy(self) -> SessionState:
        """An independent copy."""
        return SessionState.from_json(json.loads(self.fingerprint()))

    # --- state graph ----------------------------------------------------------------------

    def add_item(
        self, kind: str, text: str, *, rationale: str = "", source: str, turn: int
    ) -> Item:
        """Add a node (or touch an identical open one) and return it."""
        text = " ".join(text.split())
        for existing in self.items.values():
            if existing.kind == kind and existing.text.casefold() == text.casefold():
                existing.touched_turn = turn
                if rationale and not existing.rationale:
                    existing.rationale = rationale
                return existing
        n = self.counters.get(kind, 0) + 1
        self.counters[kind] = n
        item = Item(f"{_PREFIX[kind]}{n}", kind, text, rationale, "open", turn, turn, source)
        self.items[item.id] = item
        self._milestone(f"turn {turn}: {kind} {item.id} {_clip(text, 80)}")
        return item

    def put_item(self, item: Item) -> None:
        """Store a node as a tool result described it (ids come from the tool's own run)."""
        self.items[item.id] = item
        prefix_n = item.id[1:]
        if prefix_n.isdigit():
            self.counters[item.kind] = max(self.counters.get(item.kind, 0), int(prefix_n))

    def _milestone(self, line: str) -> None:
        self.narrative.append(line)
        del self.narrative[:-MAX_NARRATIVE]


def _fields(obj: Item | Unit) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}


def _clip(text: str, width: int) -> str:
    # "..." rather than "…": the state is stored through the gate, whose NFKC would rewrite
    # the ellipsis, so every save would copy the whole state to change it (docs/adr/0041).
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def hydrate(state: SessionState, text: str, threshold: float) -> set[str]:
    """Ids of state-graph items the message mentions: a keyword pass (identifiers and item
    ids), then a BM25 pass over the rest with a score threshold."""
    if not state.items:
        return set()
    wanted = keywords(text)
    ids = {m.upper() for m in re.findall(r"\b[CDTN]\d+\b", text)}
    found = {i.id for i in state.items.values() if i.id in ids or wanted & keywords(i.text)}
    rest = [i for i in state.items.values() if i.id not in found]
    if rest:
        scores = BM25([f"{i.text} {i.rationale}" for i in rest]).scores(text)
        found |= {i.id for i, s in zip(rest, scores, strict=True) if s >= threshold}
    return found


@dataclass(frozen=True, slots=True)
class Folded:
    """What folding one event produced besides the new state: cards to store as artifacts."""

    cards: tuple[Card, ...] = ()


def fold(state: SessionState, event: EventView, *, distill_chars: int, hydrate_at: float) -> Folded:
    """Apply ``event`` to ``state`` (in place); returns the cards whose artifacts to store."""
    if event.seq <= state.through_seq:
        return Folded()
    state.through_seq = event.seq
    if event.status == EventStatus.FAILED and event.kind == EventKind.MESSAGE:
        return Folded()
    if event.kind == EventKind.MESSAGE:
        return _fold_message(state, event, distill_chars, hydrate_at)
    if event.kind == EventKind.DECISION:
        # A decision on a held tool call is a turn of its own, but its text is data (what the
        # call gave): no "decision: ..." line in it may change the thread's state.
        return _fold_message(state, event, distill_chars, hydrate_at, markers=False)
    if event.kind == EventKind.REPLY:
        unit = _answered(state, event)
        if unit is not None:
            unit.reply = _clip(event.text, _CLIP_REPLY)
            unit.digest = _digest(unit)
        _bump(state, "replies")
    elif event.kind == EventKind.TOOL_CALL:
        _bump(state, "tool_calls")
        _note_activity(state, f"turn {state.turn}: tool {event.text}")
    elif event.kind == EventKind.TOOL_RESULT:
        return _fold_tool_result(state, event, distill_chars)
    elif event.kind == EventKind.ERROR:
        _note_activity(state, f"turn {state.turn}: error {_clip(event.text, 80)}")
    elif event.kind == EventKind.APPROVAL:
        # A held tool call stays in view: later turns know it has not run (docs/adr/0031).
        args = json.dumps(event.data.get("arguments", {}), ensure_ascii=False)
        _note_activity(state, f"turn {state.turn}: {_clip(event.text + ' ' + args, 160)}")
    return Folded()


def _answered(state: SessionState, reply: EventView) -> Unit | None:
    """The unit a reply answers: the message it names as its cause, else the newest one.

    People may write while the bot thinks, so the newest message is not always the one asked.
    """
    cause = reply.data.get("cause")
    if isinstance(cause, int) and cause:
        for unit in reversed(state.units[-50:]):
            if unit.event_id == cause:
                return unit
    return state.units[-1] if state.units else None


def _bump(state: SessionState, key: str, n: int = 1) -> None:
    state.activity[key] = state.activity.get(key, 0) + n


def _note_activity(state: SessionState, line: str) -> None:
    state.recent_activity.append(line)
    del state.recent_activity[:-MAX_ACTIVITY]


def _fold_message(
    state: SessionState,
    event: EventView,
    distill_chars: int,
    hydrate_at: float,
    *,
    markers: bool = True,
) -> Folded:
    state.turn += 1
    turn = state.turn
    rendered = render_message(event.text, event.data, distill_chars)
    if event.data.get("addressed", True):
        state.request = _clip(rendered.prose or rendered.text, 300)
    _bump(state, "messages")
    for item_id in hydrate(state, rendered.prose, hydrate_at):
        state.items[item_id].touched_turn = turn
    pinned = _apply_markers(state, rendered.prose, turn) if markers else False
    for card in rendered.cards:
        _apply_card(state, card, turn, event.user)
    _apply_files(state, rendered)
    unit = Unit(
        seq=event.seq,
        turn=turn,
        user=event.user,
        text=rendered.text,
        keywords=_unit_keywords(rendered)[:40],
        pinned=pinned,
        event_id=event.id,
    )
    unit.digest = _digest(unit, rendered.cards)
    state.units.append(unit)
    _compact_units(state)
    if turn == 1:
        state._milestone(f"turn 1: {event.user or 'someone'} opened: {_clip(rendered.prose, 100)}")
    return Folded(rendered.cards)


def _unit_keywords(rendered: Rendered) -> list[str]:
    """Identifiers of what the person wrote, then of the cards' titles (not ids in pastes)."""
    found = ordered_keywords(rendered.prose)
    for card in rendered.cards:
        found += ordered_keywords(card.distilled.title)
    return list(dict.fromkeys(found))


def _apply_markers(state: SessionState, prose: str, turn: int) -> bool:
    """Lines like "constraint: ...", "decision: ... because ...", "fixed: ..." update the state."""
    pinned = False
    for match in _MARKER.finditer(prose):
        tag = match.group("tag").casefold().rstrip("s")
        text = match.group("text").strip()
        if tag in _TAG_KIND:
            kind = _TAG_KIND[tag]
            rationale = ""
            if kind == "decision":
                parts = _RATIONALE.split(text, maxsplit=1)
                if len(parts) == 2:
                    text, rationale = parts[0].strip(), parts[1].strip()
            state.add_item(kind, text, rationale=rationale, source="message", turn=turn)
            pinned = True
        elif tag in {"finding", "root cause"}:
            state.findings.append(f"turn {turn}: {_clip(text, 200)}")
            del state.findings[:-MAX_FINDINGS]
            state._milestone(f"turn {turn}: finding {_clip(text, 80)}")
            pinned = True
        else:  # fixed / done / resolved
            _resolve(state, text, turn)
    return pinned


def _resolve(state: SessionState, text: str, turn: int) -> None:
    """Mark open errors and tasks that ``text`` names as fixed / done."""
    wanted = keywords(text) | {w.casefold() for w in re.findall(r"[\w.:/-]{6,}", text)}
    for sig in list(state.open_errors):
        if any(w in sig.casefold() for w in wanted):
            _fix(state, sig, turn)
    for item in state.items.values():
        if item.kind == "task" and item.status == "open" and wanted & keywords(item.text):
            item.status, item.touched_turn = "done", turn


def _fix(state: SessionState, sig: str, turn: int) -> None:
    state.open_errors.pop(sig, None)
    state.fixed_errors.append(f"{_clip(sig, 160)} (fixed turn {turn})")
    del state.fixed_errors[:-MAX_FIXED]


def _apply_card(state: SessionState, card: Card, turn: int, user: str) -> bool:
    d = card.distilled
    _bump(state, "artifacts")
    _note_activity(state, f"turn {turn}: {user or 'someone'} pasted {d.kind} ({card.short})")
    for sig in d.errors:
        first, _, n = state.open_errors.get(sig, [turn, turn, 0])
        state.open_errors[sig] = [first, turn, n + 1]
    if d.kind == "tests":
        failing = set(d.errors)
        for sig in list(state.open_errors):
            if sig.startswith("FAILED ") and sig not in failing and sig[7:] in d.passed:
                _fix(state, sig, turn)
        if not d.errors and "no failures" in d.body:
            for sig in [s for s in state.open_errors if s.startswith("FAILED ")]:
                _fix(state, sig, turn)
    for path in d.files:
        _remember_file(state, path)
    if d.errors:
        state._milestone(f"turn {turn}: {d.kind} with {len(d.errors)} error(s) ({card.short})")
    return bool(d.errors)


def _remember_file(state: SessionState, path: str) -> None:
    if path in state.files:
        state.files.remove(path)
    state.files.append(path)
    del state.files[:-MAX_FILES]


def _apply_files(state: SessionState, rendered: Rendered) -> None:
    for path in _FILE.findall(rendered.prose):
        _remember_file(state, path)


def _fold_tool_result(state: SessionState, event: EventView, distill_chars: int) -> Folded:
    tool = str(event.data.get("tool", ""))
    if event.data.get("is_error"):
        return Folded()
    if tool == "retrieve_artifact":
        _bump(state, "retrieved")
        return Folded()
    if tool in STATE_TOOLS:
        try:
            item = json.loads(event.text).get("item")
        except (json.JSONDecodeError, AttributeError):
            return Folded()
        if isinstance(item, dict) and item.get("kind") in ITEM_KINDS:
            before = item.get("id") in state.items
            state.put_item(Item(**{k: item[k] for k in Item.__slots__ if k in item}))
            if not before:
                state._milestone(
                    f"turn {state.turn}: {item['kind']} {item['id']} {_clip(item['text'], 80)}"
                )
            if state.units:
                state.units[-1].pinned = True
        return Folded()
    if len(event.text) > distill_chars and state.units:
        rendered = render_text(event.text, distill_chars)
        cards = list(rendered.cards)
        for card in cards:
            _apply_card(state, card, state.turn, f"tool {tool}")
            state.units[-1].text += "\n" + card_text(card, body_lines=6)
        return Folded(tuple(cards))
    return Folded()


def _digest(unit: Unit, cards: tuple[Card, ...] = ()) -> str:
    """One deterministic line for a turn: who asked what, what was pasted, what was said."""
    first = unit.text.split("\n[artifact", 1)[0]
    line = f"#{unit.turn} {unit.user or 'someone'}: {_clip(first, 140)}"
    pasted = [f"{c.distilled.kind} {c.short}" for c in cards]
    if not pasted:
        pasted = [f"{kind} {short}" for short, kind in _CARD_HEAD.findall(unit.text)]
    if pasted:
        line += f" [pasted {', '.join(pasted)}]"
    if unit.reply:
        line += f" -> {_clip(unit.reply, 90)}"
    return line


def _compact_units(state: SessionState) -> None:
    """Older units keep a compact form; the oldest unpinned go once there are too many."""
    for unit in state.units[:-FULL_UNITS]:
        if unit.full:
            unit.text = _compact_text(unit.text)
            unit.full = False
    while len(state.units) > MAX_UNITS:
        drop = next((i for i, u in enumerate(state.units) if not u.pinned), 0)
        state.units.pop(drop)


def _compact_text(text: str) -> str:
    """Prose clipped, each card reduced to its header, title and first body lines, long
    verbatim text to its head and tail."""
    out: list[str] = []
    card_lines = -1
    for line in text.splitlines():
        if line.startswith("[artifact "):
            card_lines = 0
            out.append(line)
            continue
        if card_lines >= 0:
            card_lines += 1
            if card_lines <= 5:
                out.append(line)
            continue
        out.append(_clip(line, 400))
    if len(out) > _COMPACT_LINES:
        # A short paste left verbatim (under the distil threshold): its first lines say what
        # it is, its last ones how it ended (a traceback's exception, a summary).
        hidden = len(out) - _COMPACT_LINES
        out = [*out[:4], f"  ... ({hidden} lines)", *out[-(_COMPACT_LINES - 4) :]]
    return "\n".join(out)
