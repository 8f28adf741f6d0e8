"""Emoji names: Slack sends short names (``+1``), Matrix and terminals send the characters."""

from __future__ import annotations

__all__ = ["emoji_name"]

_BY_CHARACTER = {
    "👍": "+1",
    "👎": "-1",
    "✅": "white_check_mark",
    "✔": "heavy_check_mark",
    "❌": "x",
    "🗑": "wastebasket",
    "🚫": "no_entry_sign",
    "❤": "heart",
    "🎉": "tada",
}


def emoji_name(emoji: str) -> str:
    """The short name of ``emoji`` (``:+1:``, ``+1`` and ``👍`` all give ``+1``).

    Slack's skin-tone suffixes (``+1::skin-tone-2``) and variation selectors are dropped.
    """
    text = emoji.strip().replace("\ufe0f", "")
    if text in _BY_CHARACTER:
        return _BY_CHARACTER[text]
    text = text.strip(":")
    return text.split("::", 1)[0]
