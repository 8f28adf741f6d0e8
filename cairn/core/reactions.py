"""Reactions: the emoji's name, and what a reaction does.

Slack sends short names (``+1``), Matrix and terminals send the characters. A ChatEvent
normalises its emoji to the short name when it is built (:func:`emoji_name`), so everything
after the frontend sees names only; the worker reads a reaction's effect from the settings
with :func:`reaction_effect`.
"""

from __future__ import annotations

from cairn.core.settings import Settings

__all__ = ["emoji_character", "emoji_name", "reaction_effect"]

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
    "📣": "mega",
    "📢": "loudspeaker",
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


def emoji_character(emoji: str) -> str:
    """What a person types or clicks to react with ``emoji`` (a short name or the character):
    ``white_check_mark`` gives ``✅``; a name not known here stays a name, as ``:shipit:``
    (Matrix takes any text as a reaction, and :func:`emoji_name` reads it back)."""
    name = emoji_name(emoji)
    for character, known in _BY_CHARACTER.items():
        if known == name:
            return character
    if not name.isascii():  # a character already, one this table does not name
        return name
    return f":{name}:"


def reaction_effect(name: str, settings: Settings) -> str | None:
    """What a reaction with the emoji ``name`` (a short name) does: confirm, retract, useful,
    not_useful, share, or None (ignored). The emoji of each effect are settings
    (CAIRN_*_EMOJI)."""
    for effect, names in (
        ("confirm", settings.confirm_emoji),
        ("retract", settings.retract_emoji),
        ("useful", settings.useful_emoji),
        ("not_useful", settings.not_useful_emoji),
        ("share", settings.share_emoji),
    ):
        if name in names:
            return effect
    return None
