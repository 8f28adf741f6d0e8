"""Pasted text in a message: split off the long structured parts and render them as cards.

A person pastes a log with ``/paste`` in the console (or a code block in Slack); the message
then arrives as one long text. What the person wrote around the paste stays verbatim; each
paste longer than the threshold is distilled and shown as a card naming its artifact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cairn.core.tokens import count_tokens
from cairn.memory.context.artifacts import SHORT, ArtifactStore, address
from cairn.memory.context.distill import Distilled, distill

__all__ = [
    "Card",
    "Rendered",
    "card_record",
    "card_text",
    "make_card",
    "render_message",
    "render_text",
    "store_cards",
    "stored_card",
]

_FENCE = re.compile(r"```[^\n]*\n(.*?)(?:\n```|\Z)", re.S)
# Prose longer than this many lines is treated as pasted material even without a fence.
_PASTE_LINES = 8
_PROSE_HEAD = 400


@dataclass(frozen=True, slots=True)
class Card:
    """A distilled paste: the artifact's address, its size, and what the distiller kept."""

    sha256: str
    content: str
    distilled: Distilled
    lines: int
    tokens: int

    @property
    def short(self) -> str:
        """The id shown on the card."""
        return self.sha256[:SHORT]

    @property
    def stored(self) -> bool:
        """Whether the artifact was stored when the message was taken in (its content is
        not carried here then: see :func:`stored_card`)."""
        return not self.content


@dataclass(frozen=True, slots=True)
class Rendered:
    """A message as the prompt shows it: prose verbatim, pastes as cards."""

    text: str
    prose: str
    cards: tuple[Card, ...]


def card_text(card: Card, *, body_lines: int | None = None) -> str:
    """The card of an artifact; ``body_lines`` limits the distilled body (None: all of it)."""
    d = card.distilled
    head = (
        f"[artifact {card.short} · {d.kind} · {card.lines} lines, {card.tokens} tokens · "
        f'full text: retrieve_artifact("{card.short}")]'
    )
    body = d.body.splitlines()
    if body_lines is not None and len(body) > body_lines:
        body = [*body[:body_lines], f"  ... ({len(body) - body_lines} more card lines)"]
    return "\n".join([head, d.title, *body])


def card_record(card: Card) -> dict[str, Any]:
    """What a message's log row keeps of a card made when it was taken in (JSON)."""
    d = card.distilled
    return {
        "sha256": card.sha256,
        "kind": d.kind,
        "title": d.title,
        "body": d.body,
        "errors": list(d.errors),
        "passed": list(d.passed[:200]),
        "files": list(d.files),
        "lines": card.lines,
        "tokens": card.tokens,
    }


def stored_card(record: dict[str, Any]) -> Card:
    """The card :func:`card_record` kept, without its content (stored in the artifact store)."""
    distilled = Distilled(
        str(record.get("kind", "log")),
        str(record.get("title", "")),
        str(record.get("body", "")),
        errors=tuple(map(str, record.get("errors", ()))),
        passed=tuple(map(str, record.get("passed", ()))),
        files=tuple(map(str, record.get("files", ()))),
    )
    lines, tokens = int(record.get("lines", 0)), int(record.get("tokens", 0))
    return Card(str(record.get("sha256", "")), "", distilled, lines, tokens)


def render_message(text: str, data: dict[str, Any] | None, threshold: int) -> Rendered:
    """A logged message as the prompt shows it: :func:`render_text`, except that the cards of
    pastes and files made artifacts when the message was taken in (``data["artifacts"]``, its
    text's last ``data["attached_chars"]`` characters) are shown as they are."""
    attached = int((data or {}).get("attached_chars") or 0)
    records = (data or {}).get("artifacts") or []
    if not attached or not isinstance(records, list):
        return render_text(text, threshold)
    prose = render_text(text[: len(text) - attached].strip(), threshold)
    cards = tuple(stored_card(r) for r in records if isinstance(r, dict))
    shown = "\n".join(part for part in (prose.text, text[len(text) - attached :].strip()) if part)
    return Rendered(shown, prose.prose, prose.cards + cards)


def store_cards(store: ArtifactStore, session_id: int, tenant: str, cards: Sequence[Card]) -> None:
    """Store the artifacts of ``cards`` for the session (those stored already are skipped)."""
    for card in cards:
        if card.stored:
            continue  # stored when its message was taken in
        store.put(
            session_id,
            tenant,
            card.content,
            kind=card.distilled.kind,
            title=card.distilled.title,
            tokens=card.tokens,
        )


def make_card(content: str) -> Card:
    """The distilled card of ``content`` (its full text stays in ``Card.content``)."""
    return _card(content)


def _card(content: str) -> Card:
    return Card(
        sha256=address(content),
        content=content,
        distilled=distill(content),
        lines=content.count("\n") + 1,
        tokens=count_tokens(content),
    )


@lru_cache(maxsize=64)
def render_text(text: str, threshold: int) -> Rendered:
    """Split ``text`` into prose and pastes longer than ``threshold`` characters, as cards."""
    if len(text) <= threshold:
        return Rendered(text, text, ())
    cards: list[Card] = []
    pieces: list[str] = []
    prose: list[str] = []
    last = 0
    for match in _FENCE.finditer(text):
        before = text[last : match.start()].strip()
        if before:
            pieces.append(before)
            prose.append(before)
        inner = match.group(1)
        if len(inner) > threshold // 2:
            card = _card(inner)
            cards.append(card)
            pieces.append(card_text(card))
        else:
            pieces.append(match.group(0))
        last = match.end()
    rest = text[last:].strip()
    if rest:
        if cards or len(rest) <= threshold:
            pieces.append(rest)
            prose.append(rest)
        else:
            head, paste = _split_head(rest)
            if head:
                pieces.append(head)
                prose.append(head)
            if paste.count("\n") + 1 >= _PASTE_LINES or len(paste) > threshold * 4:
                card = _card(paste)
                cards.append(card)
                pieces.append(card_text(card))
            else:
                pieces.append(paste)
                prose.append(paste)
    return Rendered("\n".join(pieces), "\n".join(prose), tuple(cards))


def _split_head(text: str) -> tuple[str, str]:
    """A short first line that introduces the paste ("here's the log from api-3:") stays prose."""
    first, _, remainder = text.partition("\n")
    if remainder and len(first) <= _PROSE_HEAD and not first[:1].isspace():
        words = first.split()
        looks_prose = len(words) >= 3 and sum(w.isalpha() for w in words) >= len(words) / 2
        if looks_prose or first.rstrip().endswith(":"):
            return first.strip(), remainder
    return "", text
