"""Text between Slack and Cairn: Markdown out as Slack mrkdwn in message-sized parts, and Slack's
escaped message text back in as plain text."""

from __future__ import annotations

import re

__all__ = ["FENCE", "from_slack", "split_message", "to_mrkdwn"]

FENCE = "```"

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"\[([^\]\n]+)\]\((\S+?)\)")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC_STAR = re.compile(r"(?<![\*\w])\*(?=[^\s*])([^*\n]+?)(?<=\S)\*(?![\*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?!\[[ xX]\])")
_TASK = re.compile(r"^(\s*)[-*+]\s+\[([ xX])\]\s+")
_RULE = re.compile(r"^ {0,3}([-*_])(\s*\1){2,}\s*$")

# Placeholders for pieces already in mrkdwn, so later rules leave them alone.
_HOLD = "\x00{}\x00"
_HELD = re.compile(r"\x00(\d+)\x00")


def _escape(text: str) -> str:
    """Slack's three control characters, escaped as its docs ask."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(markdown: str) -> str:
    """``markdown`` (as models write it) in Slack's mrkdwn.

    Bold, italic, strike-through, links, headings, bullets and rules are translated; code spans
    and fenced blocks are kept verbatim (only escaped); ``&``, ``<`` and ``>`` are escaped so
    that no text can form a Slack mention or link by accident.
    """
    out: list[str] = []
    in_fence = False
    for line in markdown.split("\n"):
        stripped = line.strip()
        if stripped.startswith(FENCE):
            # Slack shows no language tag: a fence line is the fence alone.
            out.append(FENCE if not in_fence or stripped == FENCE else stripped)
            in_fence = not in_fence
            continue
        out.append(_escape(line) if in_fence else _line(line))
    return "\n".join(out)


def _line(line: str) -> str:
    if _RULE.match(line):
        return "──────────"
    heading = _HEADING.match(line)
    if heading:
        return f"*{_inline(heading.group(1), in_bold=True)}*"
    task = _TASK.match(line)
    if task:
        box = "☑" if task.group(2).lower() == "x" else "☐"
        return f"{task.group(1)}{box} {_inline(line[task.end() :])}"
    bullet = _BULLET.match(line)
    if bullet:
        return f"{bullet.group(1)}• {_inline(line[bullet.end() :])}"
    quote = re.match(r"^(\s*>+\s?)", line)
    if quote:
        return "> " + _inline(line[quote.end() :])
    return _inline(line)


def _inline(text: str, *, in_bold: bool = False) -> str:
    held: list[str] = []

    def hold(piece: str) -> str:
        held.append(piece)
        return _HOLD.format(len(held) - 1)

    text = _CODE_SPAN.sub(lambda m: hold(f"`{_escape(m.group(2))}`"), text)
    text = _LINK.sub(
        lambda m: hold(f"<{m.group(2).replace('|', '%7C')}|{_escape(m.group(1))}>"), text
    )
    text = _escape(text)
    text = _ITALIC_STAR.sub(lambda m: hold(f"_{m.group(1)}_"), text)
    text = _BOLD.sub(lambda m: hold(m.group(2) if in_bold else f"*{m.group(2)}*"), text)
    text = _STRIKE.sub(lambda m: hold(f"~{m.group(1)}~"), text)
    while _HELD.search(text):
        text = _HELD.sub(lambda m: held[int(m.group(1))], text)
    return text


def split_message(text: str, limit: int) -> list[str]:
    """``text`` cut into parts of at most ``limit`` characters, at the best boundary available.

    Parts end at a blank line if one is near the end, else at a line break, else at a space,
    else anywhere. A code block cut in two is closed at the end of one part and reopened at
    the start of the next, so every part renders on its own. Joining the parts (dropping the
    added fences and the whitespace at the cuts) gives back the text.
    """
    if limit < 2 * len(FENCE) + 20:
        raise ValueError(f"a message part must allow at least {2 * len(FENCE) + 20} characters")
    text = text.strip()
    parts: list[str] = []
    reopen = False
    while text:
        prefix = FENCE + "\n" if reopen else ""
        room = limit - len(prefix)
        if len(text) <= room:
            parts.append(prefix + text)
            break
        # Leave room for a closing fence in case the cut falls inside a code block.
        cut = _cut(text, room - len(FENCE) - 1)
        part, text = text[:cut].rstrip(), text[cut:].lstrip()
        inside = (prefix + part).count(FENCE) % 2 == 1
        parts.append(prefix + part + ("\n" + FENCE if inside else ""))
        reopen = inside
    return parts


def _cut(text: str, room: int) -> int:
    window = text[:room]
    for boundary in ("\n\n", "\n", " "):
        at = window.rfind(boundary)
        if at >= room // 2:
            return at + len(boundary)
    # A hard cut must not fall inside a fence, which would then count as no fence at all.
    for start in range(room - len(FENCE) + 1, room):
        if start > 0 and text.startswith(FENCE, start):
            return start
    return room


_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
_CHANNEL = re.compile(r"<#([CG][A-Z0-9]+)(?:\|([^>]*))?>")
_SPECIAL = re.compile(r"<!(here|channel|everyone)(?:\|[^>]*)?>")
_SUBTEAM = re.compile(r"<!subteam\^([A-Z0-9]+)(?:\|([^>]*))?>")
_URL = re.compile(r"<((?:https?|mailto|tel):[^|>]+)(?:\|([^>]*))?>")


def from_slack(text: str, *, drop_user: str | None = None) -> str:
    """A Slack message's text as plain text: entities decoded, links and mentions readable.

    ``<@U123>`` stays ``<@U123>`` (people are named by id), except ``drop_user`` (the bot),
    whose mentions are removed; ``<#C1|ops>`` becomes ``#ops``; ``<https://x|label>`` becomes
    ``label (https://x)``.
    """
    if drop_user:
        text = re.sub(rf"<@{re.escape(drop_user)}(?:\|[^>]*)?>[,:]?", " ", text)
    text = _MENTION.sub(lambda m: f"<@{m.group(1)}>", text)
    text = _CHANNEL.sub(lambda m: f"#{m.group(2) or m.group(1)}", text)
    text = _SPECIAL.sub(lambda m: f"@{m.group(1)}", text)
    text = _SUBTEAM.sub(lambda m: f"@{m.group(2) or m.group(1)}".replace("@@", "@"), text)
    text = _URL.sub(
        lambda m: (
            f"{m.group(2)} ({m.group(1)})"
            if m.group(2) and m.group(2) != m.group(1)
            else m.group(1)
        ),
        text,
    )
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return re.sub(r"[ \t]{2,}", " ", text).strip()
