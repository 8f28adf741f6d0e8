"""Taking in what is too long to be a message: long pastes and attached files become cards.

A message over CAIRN_MAX_MESSAGE_CHARS whose long part is a log or other structured text, and
every text file attached to a message, pass the gate (credentials masked before anything
keeps them), then the distillers: the message the session logs carries the card, and the whole
text goes to the artifact store, where the model can search and read it. What can't be made a
card is refused with the reason: a long text that reads as prose, a file too large, a binary
or an archive. An image within the size limit is recorded as a card with its width, height
and size, read from its header; with CAIRN_MODEL_IMAGES on, one the model can be shown is also
an image block, its bytes kept for the turn it came with.
"""

from __future__ import annotations

import codecs
import mimetypes
from collections.abc import Sequence
from dataclasses import dataclass

from cairn.core.errors import InvalidInput
from cairn.core.gate import gate
from cairn.llm.types import ImageBlock
from cairn.memory.context.images import image_card
from cairn.memory.context.pastes import Card, card_text, make_card, render_text
from cairn.sessions.events import ATTACHED_CHARS, Attachment

__all__ = ["Intake", "human_size", "structured", "take_in"]

# A line that reads as a sentence: this many words or more, nearly all of them words.
_SENTENCE_WORDS = 8
# A text is structured when at most this share of its lines read as sentences.
_PROSE_SHARE = 0.3
# Fewer lines than this are not a log, whatever they hold.
_MIN_LINES = 8
# How much of a file is looked at to tell text from a binary.
_SNIFF_BYTES = 8192
_ARCHIVES = (".zip", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".tar", ".jar", ".zst")


@dataclass(frozen=True, slots=True)
class Intake:
    """A message as it is logged: ``text`` ends with ``attached`` characters of cards and
    notes on files; ``cards`` are the artifacts to store; ``images`` the images a model is
    shown, by the address of their card's artifact; ``secrets`` the kinds of credential the
    gate masked; ``hidden`` the invisible characters it took out."""

    text: str
    cards: tuple[Card, ...]
    attached: int
    secrets: tuple[str, ...] = ()
    hidden: int = 0
    images: tuple[tuple[str, ImageBlock], ...] = ()


def human_size(size: int) -> str:
    """``size`` bytes in words: 812 bytes, 4.2 KB, 5.0 MB."""
    if size < 1000:
        return f"{size} bytes"
    if size < 1_000_000:
        return f"{size / 1000:.1f} KB"
    return f"{size / 1_000_000:.1f} MB"


def structured(text: str) -> bool:
    """Whether ``text`` is mostly a log, a trace, a diff, code, a table or a config rather
    than prose: enough lines, and few of them read as sentences."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < _MIN_LINES:
        return False
    sentences = sum(1 for line in lines if _sentence(line))
    return sentences <= len(lines) * _PROSE_SHARE


def _sentence(line: str) -> bool:
    words = line.split()
    if len(words) < _SENTENCE_WORDS:
        return False
    plain = sum(1 for w in words if w.strip(".,;:!?()\"'").isalpha())
    return plain >= len(words) * 0.8


def take_in(
    text: str,
    attachments: Sequence[Attachment],
    *,
    max_chars: int,
    max_bytes: int,
    distill_chars: int,
    images: bool = False,
) -> Intake:
    """The message ``text`` with its long pastes and ``attachments`` made artifact cards.

    ``text`` is gated here; its pastes become cards only when it is longer than ``max_chars``.
    With ``images`` (CAIRN_MODEL_IMAGES), an attached image a model can be shown is kept as an
    image block too (see :func:`cairn.memory.context.images.image_card`).
    Raises InvalidInput, with a reason a person can act on, when the text is too long and
    can't be distilled, or when nothing in the message can be read (an empty text and only
    files refused).
    """
    gated = gate(text)
    prose = gated.text.strip()
    secrets = list(gated.secrets)
    hidden = gated.hidden
    cards: list[Card] = []
    if len(prose) > max_chars:
        prose, cards = _distilled(prose, max_chars, distill_chars)
    blocks: list[str] = [card_text(card)[:ATTACHED_CHARS] for card in cards]
    refusals: list[str] = []
    kept: list[tuple[str, ImageBlock]] = []
    for attachment in attachments:
        read = _read(attachment, max_bytes, images)
        if isinstance(read, tuple) and isinstance(read[0], Card):  # an image
            card, image = read
            cards.append(card)
            if image is not None:
                kept.append((card.sha256, image))
            head = f"attached image {attachment.name}:\n"
            blocks.append(head + card_text(card)[: ATTACHED_CHARS - len(head)])
            continue
        if isinstance(read, str):
            (refusals if read.startswith("[not read") else blocks).append(read)
            continue
        file_gated = gate(read[1])
        secrets += file_gated.secrets
        hidden += file_gated.hidden
        card = make_card(file_gated.text)
        cards.append(card)
        head = f"attached file {attachment.name} ({human_size(read[0])}):\n"
        blocks.append(head + card_text(card)[: ATTACHED_CHARS - len(head)])
    if not prose and not cards and refusals:
        raise InvalidInput(" ".join(r.strip("[]") for r in refusals))
    attached = "\n".join(blocks + refusals)
    whole = "\n".join(part for part in (prose, attached) if part)
    return Intake(
        whole,
        tuple(cards),
        len(whole) - len(prose) if attached else 0,
        tuple(dict.fromkeys(secrets)),
        hidden,
        tuple(kept),
    )


def _distilled(text: str, max_chars: int, distill_chars: int) -> tuple[str, list[Card]]:
    """The prose of a long message and the cards of its pastes; InvalidInput when the long
    part is not structured text, or what is left is still too long."""
    rendered = render_text(text, distill_chars)
    cards = [card for card in rendered.cards if structured(card.content)]
    if len(cards) < len(rendered.cards) or not cards or len(rendered.prose) > max_chars:
        raise InvalidInput(
            f"the message is {len(text)} characters long; the limit is {max_chars} "
            "(CAIRN_MAX_MESSAGE_CHARS), and it does not read as a log or other structured "
            "text that I could keep as an artifact. Split it, or attach it as a file."
        )
    return rendered.prose, cards


def _read(
    attachment: Attachment, max_bytes: int, images: bool
) -> tuple[Card, ImageBlock | None] | str | tuple[int, str]:
    """The size and text of a text file; the card of an image and its block (None when a
    model is not shown it); or the line the message carries instead (why it was not read)."""
    name, size = attachment.name, attachment.size or len(attachment.data or b"")
    media = attachment.media_type or mimetypes.guess_type(name)[0] or ""
    if attachment.refused:
        return f"[not read: {name}: {attachment.refused}]"
    if size > max_bytes or len(attachment.data or b"") > max_bytes:
        shown, limit = human_size(size), human_size(max_bytes)
        if shown == limit:  # "10.0 MB; the limit is 10.0 MB" would puzzle anyone
            shown, limit = f"{size:,} bytes", f"{max_bytes:,} bytes"
        return f"[not read: {name} is {shown}; the limit is {limit} (CAIRN_ATTACHMENT_MAX_BYTES)]"
    data = attachment.data
    if media.startswith("image/"):
        return image_card(name, media, max(size, len(data or b"")), data, for_model=images)
    if data is None:
        return f"[not read: {name}: it could not be downloaded]"
    text = _decoded(data)
    if text is None or name.lower().endswith(_ARCHIVES):
        why = "binaries and archives are not read"
        return f"[not read: {name} ({human_size(size)}) is not text; {why}]"
    if not text.strip():
        return f"[not read: {name} is empty]"
    return len(data), text


def _decoded(data: bytes) -> str | None:
    """The text of a file in UTF-8 (or UTF-16 with its byte order mark), or None for a
    binary: a NUL byte in its first part, or bytes that are not text."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    if b"\0" in data[:_SNIFF_BYTES]:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
