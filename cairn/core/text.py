"""Plain text as Cairn keeps it: cleaned of control characters, safe to write as UTF-8."""

from __future__ import annotations

import re
import unicodedata

__all__ = ["LONE_SURROGATE", "clean_text", "pieces", "printable"]

# Where a long text may be cut, best first: after a paragraph, after a sentence's end (or an
# ellipsis, or a line break), after a clause, at any space.
_CUTS = (
    re.compile(r"\n\s*\n"),
    re.compile(r"(?<=[.!?\u2026\u3002\uff01\uff1f])[\"')\]]*\s+|\n"),
    re.compile(r"(?<=[;:,])\s+"),
    re.compile(r"\s+"),
)

# What an undecodable byte read with surrogateescape, or a broken escape, leaves in a str.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# The control characters: Unicode's category Cc, exactly these code points.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_CONTROL_BUT_TAB_AND_NEWLINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, so that writing it as UTF-8
    cannot fail (what an undecodable byte or a broken escape left in it)."""
    return LONE_SURROGATE.sub("\ufffd", text)


def clean_text(text: str) -> str:
    """Text with control characters (but tab and newline) removed, NFC-normalised, trimmed."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    return _CONTROL_BUT_TAB_AND_NEWLINE.sub("", text).strip()


def pieces(text: str, limit: int) -> list[str]:
    """``text`` cut into pieces of at most ``limit`` characters, each as long as it can be,
    cut at a paragraph or a sentence's end where there is one in its second half, else after a
    clause, else at a space, else (a run of ``limit`` characters without one) mid-word. The
    pieces, stripped, joined by single spaces, say what ``text`` said; a text within ``limit``
    is one piece. Raises ValueError when ``limit`` is under 1."""
    if limit < 1:
        raise ValueError("a piece holds at least one character")
    rest = text.strip()
    found: list[str] = []
    while len(rest) > limit:
        window = rest[: limit + 1]  # a cut right after the limit's last character counts
        # The best kind of cut that leaves a piece of at least half the limit; a lone word
        # longer than the limit is cut where the limit falls.
        ends = [
            max((m.start() for m in cut.finditer(window) if 0 < m.start() <= limit), default=0)
            for cut in _CUTS
        ]
        end = next((e for e in ends if e >= limit // 2), ends[-1] or limit)
        found.append(rest[:end].strip())
        rest = rest[end:].strip()
    if rest:
        found.append(rest)
    return found
