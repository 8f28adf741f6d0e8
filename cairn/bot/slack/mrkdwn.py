"""Text between Slack and Cairn: Markdown out as Slack mrkdwn in message-sized parts, and Slack's
escaped message text back in as plain text."""

from __future__ import annotations

import re

from markdown_it.tree import SyntaxTreeNode

from cairn.bot.markdown import parse, split_markdown

__all__ = ["escape", "from_slack", "split_message", "to_mrkdwn"]

_RULE = "──────────"
_MARKS = {"strong": "*", "em": "_", "s": "~"}


def escape(text: str) -> str:
    """Slack's three control characters, escaped as its docs ask."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(markdown: str) -> str:
    """``markdown`` (as models write it) in Slack's mrkdwn.

    Bold, italic, strike-through, links, headings, lists, task boxes, quotes and rules are
    translated; code spans and code blocks are kept verbatim (only escaped; Slack shows no
    language); a table becomes a code block with aligned columns, since Slack has no tables.
    ``&``, ``<`` and ``>`` are escaped so that no text can form a Slack mention or link by
    accident. Blocks are separated as in the source (a blank line or a line break).
    """
    lines = markdown.split("\n")
    return _Mrkdwn(lines).blocks(SyntaxTreeNode(parse(markdown)).children)


def split_message(text: str, limit: int) -> list[str]:
    """``text`` (mrkdwn) cut into parts of at most ``limit`` characters, on block boundaries
    where it can (see ``split_markdown``); a cut code block is reopened with a bare fence, as
    Slack reads anything after a fence as code.

    Raises ValueError if ``limit`` leaves no room for the fences.
    """
    return split_markdown(text, limit, keep_language=False)


class _Mrkdwn:
    """The walk over one message's syntax tree; ``lines`` is its source, for the spacing."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def blocks(self, nodes: list[SyntaxTreeNode]) -> str:
        out: list[str] = []
        for node in nodes:
            if out:
                out.append("\n\n" if self._blank_before(node) else "\n")
            out.append(self.block(node))
        return "".join(out)

    def _blank_before(self, node: SyntaxTreeNode) -> bool:
        line = node.map[0] - 1 if node.map else -1
        return 0 <= line < len(self.lines) and not self.lines[line].strip(" \t>")

    def block(self, node: SyntaxTreeNode) -> str:
        kind = node.type
        if kind in ("paragraph", "heading"):
            text = self.inline(node.children[0].children, bold=kind == "heading")
            return f"*{text}*" if kind == "heading" and text else text
        if kind in ("fence", "code_block"):
            return _code(node.content)
        if kind == "hr":
            return _RULE
        if kind == "blockquote":
            return "\n".join(
                f"> {line}".rstrip() for line in self.blocks(node.children).split("\n")
            )
        if kind in ("bullet_list", "ordered_list"):
            return "\n".join(self._item(node, at, item) for at, item in enumerate(node.children))
        if kind == "table":
            return _table(node)
        return escape(node.content)

    def _item(self, listing: SyntaxTreeNode, at: int, item: SyntaxTreeNode) -> str:
        spacing = "\n" if at and self._blank_before(item) else ""
        if listing.type == "ordered_list":
            number = int(str(listing.attrs.get("start", 1))) + at
            marker = f"{number}{item.markup} "
        else:
            marker = "" if item.meta.get("task") else "• "
        body = self.blocks(item.children).split("\n")
        indent = " " * len(marker)
        rest = [indent + line if line else line for line in body[1:]]
        return spacing + "\n".join([marker + body[0], *rest])

    def inline(self, nodes: list[SyntaxTreeNode], *, bold: bool = False) -> str:
        return "".join(self._span(node, bold) for node in nodes)

    def _span(self, node: SyntaxTreeNode, bold: bool) -> str:
        kind = node.type
        if kind == "text":
            return escape(node.content)
        if kind in ("softbreak", "hardbreak"):
            return "\n"
        if kind == "code_inline":
            return f"`{escape(node.content)}`"
        if kind in _MARKS:
            inner = self.inline(node.children, bold=bold or kind == "strong")
            if _inside_word(node):
                # Slack formats only whole words: keep what the model wrote.
                return f"{node.markup}{inner}{node.markup}"
            if kind == "strong" and bold:
                return inner
            return f"{_MARKS[kind]}{inner}{_MARKS[kind]}"
        if kind == "link" and node.markup == "autolink":
            # Shown as written: Slack links a bare address itself, and ``|`` must stay text.
            return escape(f"<{_plain(node.children)}>")
        if kind in ("link", "image"):
            target = str(node.attrs.get("href") or node.attrs.get("src") or "")
            label = escape(_plain(node.children))
            target = target.replace("|", "%7C")
            return f"<{target}|{label}>" if label and label != target else f"<{target}>"
        return escape(node.content) + self.inline(node.children, bold=bold)


def _inside_word(node: SyntaxTreeNode) -> bool:
    """Whether an emphasis touches a letter or digit on either side (``2*3*4``)."""
    before, after = node.previous_sibling, node.next_sibling
    return bool(
        (before is not None and before.type == "text" and before.content[-1:].isalnum())
        or (after is not None and after.type == "text" and after.content[:1].isalnum())
    )


def _plain(nodes: list[SyntaxTreeNode]) -> str:
    """The text of inline ``nodes`` without their formatting."""
    out: list[str] = []
    for node in nodes:
        if node.type in ("softbreak", "hardbreak"):
            out.append(" ")
        else:
            out.append(node.content if node.type in ("text", "code_inline") else "")
            out.append(_plain(node.children))
    return "".join(out)


def _code(content: str) -> str:
    return f"```\n{escape(content.rstrip(chr(10)))}\n```"


def _table(table: SyntaxTreeNode) -> str:
    """A table as aligned columns in a code block: Slack shows no tables, but keeps spaces in
    code."""
    rows = [
        [
            (_plain(cell.children[0].children if cell.children else []), cell.attrs)
            for cell in row.children
        ]
        for section in table.children
        for row in section.children
    ]
    widths = [max(len(row[c][0]) for row in rows if c < len(row)) for c in range(len(rows[0]))]

    def line(row: list[tuple[str, dict[str, str | int | float]]]) -> str:
        cells = [
            text.rjust(width) if "right" in str(attrs.get("style", "")) else text.ljust(width)
            for (text, attrs), width in zip(row, widths, strict=False)
        ]
        return " | ".join(cells).rstrip()

    rule = "-+-".join("-" * width for width in widths)
    return _code("\n".join([line(rows[0]), rule, *(line(row) for row in rows[1:])]))


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
