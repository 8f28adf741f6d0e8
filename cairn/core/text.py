"""Plain text as Cairn keeps it: cleaned of control characters, safe to write as UTF-8."""

from __future__ import annotations

import re
import unicodedata

__all__ = ["LONE_SURROGATE", "clean_text", "printable"]

# What an undecodable byte read with surrogateescape, or a broken escape, leaves in a str.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, so that writing it as UTF-8
    cannot fail (what an undecodable byte or a broken escape left in it)."""
    return LONE_SURROGATE.sub("\ufffd", text)


def clean_text(text: str) -> str:
    """Text with control characters (but tab and newline) removed, NFC-normalised, trimmed."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    kept = (ch for ch in text if ch in "\n\t" or unicodedata.category(ch) != "Cc")
    return "".join(kept).strip()
