"""Whether a Matrix message mentions the bot, and the message's text without that mention.

Current clients say whom they mention in ``m.mentions.user_ids``; when that key is present it
is the whole truth (the Matrix spec asks not to guess from the text then). Older clients only
write the bot's user id or display name into the body, or a ``matrix.to`` link ("pill") into
the formatted body, so those are looked for when ``m.mentions`` is absent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

__all__ = ["is_mentioned", "mentioned_users", "strip_mention", "strip_reply_fallback"]

_PILL = re.compile(r"""href=["']https://matrix\.to/#/([^"'?]+)""", re.IGNORECASE)


def mentioned_users(content: Mapping[str, Any]) -> tuple[str, ...]:
    """The user ids in ``m.mentions.user_ids`` and in the formatted body's pills."""
    found: list[str] = []
    mentions = content.get("m.mentions")
    if isinstance(mentions, Mapping):
        ids = mentions.get("user_ids")
        if isinstance(ids, list):
            found.extend(str(i) for i in ids if isinstance(i, str))
    formatted = content.get("formatted_body")
    if isinstance(formatted, str):
        found.extend(unquote(m) for m in _PILL.findall(formatted) if unquote(m).startswith("@"))
    return tuple(dict.fromkeys(found))


def is_mentioned(content: Mapping[str, Any], user_id: str, names: Iterable[str] = ()) -> bool:
    """Whether the message ``content`` mentions ``user_id`` (display ``names`` for old clients)."""
    mentions = content.get("m.mentions")
    if isinstance(mentions, Mapping):
        ids = mentions.get("user_ids")
        return isinstance(ids, list) and user_id in ids
    if user_id in mentioned_users(content):
        return True
    body = content.get("body")
    if not isinstance(body, str):
        return False
    return any(_name_pattern(name).search(body) for name in (user_id, *names) if name)


def strip_mention(text: str, user_id: str, names: Iterable[str] = ()) -> str:
    """``text`` without a leading mention of the bot ("Cairn: ...", "@cairn:server, ...")."""
    candidates = sorted({n.lstrip("@") for n in (user_id, *names) if n.strip("@")}, key=len)
    for name in reversed(candidates):  # longest first: "cairn:example.org" before "cairn"
        pattern = re.compile(r"^\s*@?" + re.escape(name) + r"(?![\w-])\s*[:,]?\s*", re.I)
        stripped, count = pattern.subn("", text, count=1)
        if count:
            return stripped
    return text


def strip_reply_fallback(text: str) -> str:
    """``text`` without the quoted ``> <@user> ...`` lines older clients put before a reply."""
    lines = text.split("\n")
    if not lines or not lines[0].startswith("> "):
        return text
    at = 0
    while at < len(lines) and lines[at].startswith(">"):
        at += 1
    return "\n".join(lines[at:]).lstrip("\n")


def _name_pattern(name: str) -> re.Pattern[str]:
    """``name`` as a whole word, ignoring case."""
    return re.compile(r"(?<![\w@])" + re.escape(name) + r"(?![\w-])", re.IGNORECASE)
