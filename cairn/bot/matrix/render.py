"""How a bot message looks in Matrix: Markdown as HTML with a plain body, in a thread, in parts.

A message is sent as ``m.room.message`` content whose ``body`` is the Markdown text itself (what
clients without HTML show) and, when the Markdown has any formatting, an
``org.matrix.custom.html`` ``formatted_body``. Replies belong to an ``m.thread`` on the message
that started the session, with the reply fallback (``is_falling_back`` and ``m.in_reply_to``)
so that clients without threads show them as replies. Long texts are split into parts that each
stay well inside Matrix's 64 KiB event limit, never inside a code block's fence.
"""

from __future__ import annotations

import html
from typing import Any

from markdown_it import MarkdownIt

__all__ = ["MAX_PART_BYTES", "message_content", "split_text", "to_html"]

# The body of one part, in UTF-8 bytes. The HTML is at most a few times that, and an event
# (content, ids, signatures) must stay under 65536 bytes.
MAX_PART_BYTES = 12_000

_FENCE = "```"

# CommonMark without raw HTML (the text comes from a model and from people), plus the two
# GitHub extensions people expect in chat.
_MARKDOWN = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)


def to_html(text: str) -> str | None:
    """The HTML of the Markdown ``text``, or None when it has no formatting at all."""
    rendered = str(_MARKDOWN.render(text)).strip()
    plain = "<p>" + html.escape(text.strip(), quote=False).replace("\n", "<br />\n") + "</p>"
    if rendered == plain:
        return None
    return rendered


def split_text(text: str, max_bytes: int = MAX_PART_BYTES) -> list[str]:
    """``text`` in parts of at most ``max_bytes`` UTF-8 bytes each, in order.

    Parts end at a paragraph break where possible, else at a line break, else at a space, else
    anywhere (never inside a character). A code block cut in two is closed at the end of its
    first part and reopened, with its language, at the start of the next.
    """
    text = text.strip()
    if not text:
        return []
    parts: list[str] = []
    reopen = ""
    while text:
        budget = max_bytes - len(reopen.encode())
        # Room for closing a fence that this part might leave open.
        head = _cut(text, budget - len(_FENCE) - 1)
        if len(head) == len(text) and len((reopen + head).encode()) <= max_bytes:
            parts.append(reopen + head)
            break
        rest = text[len(head) :].lstrip("\n")
        part = reopen + head.rstrip()
        fence = _open_fence(part)
        if fence is not None:
            part += "\n" + _FENCE
            reopen = fence + "\n"
        else:
            reopen = ""
        parts.append(part)
        text = rest.lstrip(" ") if not reopen else rest
    return [p for p in parts if p.strip()]


def _cut(text: str, max_bytes: int) -> str:
    """The longest head of ``text`` within ``max_bytes`` that ends at a natural break."""
    max_bytes = max(max_bytes, 4)
    if len(text.encode()) <= max_bytes:
        return text
    head = text.encode()[:max_bytes].decode(errors="ignore")
    for separator in ("\n\n", "\n", " "):
        at = head.rfind(separator)
        if at > len(head) // 2:
            return head[: at + len(separator)]
    return head


def _open_fence(text: str) -> str | None:
    """The opening line of a code fence left open at the end of ``text``, if any."""
    opened: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(_FENCE):
            opened = None if opened is not None else stripped
    return opened


def message_content(
    text: str,
    *,
    notice: bool = False,
    thread_root: str | None = None,
    in_reply_to: str | None = None,
    mentions: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The ``m.room.message`` content for one part of a bot message.

    ``thread_root`` puts it in that thread, with ``in_reply_to`` (default: the root) as the
    reply fallback; ``mentions`` fills ``m.mentions.user_ids`` (people to notify).
    """
    content: dict[str, Any] = {"msgtype": "m.notice" if notice else "m.text", "body": text}
    formatted = to_html(text)
    if formatted is not None:
        content["format"] = "org.matrix.custom.html"
        content["formatted_body"] = formatted
    if thread_root:
        content["m.relates_to"] = {
            "rel_type": "m.thread",
            "event_id": thread_root,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": in_reply_to or thread_root},
        }
    content["m.mentions"] = {"user_ids": sorted(set(mentions))}
    return content
