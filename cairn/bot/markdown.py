"""Markdown as Cairn's models write it, read once by markdown-it for every chat platform.

``parse`` gives the token stream that each platform's renderer walks (Slack mrkdwn, Matrix
HTML): CommonMark without raw HTML (the text comes from a model and from people) plus the
extensions chat readers expect (tables, strike-through, task-list boxes). ``split_markdown``
cuts a long answer into message-sized parts on block boundaries, so that every part renders on
its own: a code block cut in two is closed at the end of one part and reopened in the next.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

__all__ = ["FENCE", "MIN_PART", "OPTIONS", "TASK_DONE", "TASK_OPEN", "parse", "split_markdown"]

FENCE = "```"
# The smallest part a platform may ask for: a reopened and a closed fence and some text.
MIN_PART = 2 * len(FENCE) + 20
TASK_DONE, TASK_OPEN = "☑", "☐"

_TASK = re.compile(r"\[([ xX])\] ")


def _task_boxes(state: StateCore) -> None:
    """``- [x] done`` as ``☑ done``; the item's token says ``meta["task"]`` for renderers that
    show the box instead of the bullet."""
    tokens = state.tokens
    for at, token in enumerate(tokens[:-2]):
        if token.type != "list_item_open" or tokens[at + 1].type != "paragraph_open":
            continue
        inline = tokens[at + 2]
        first = inline.children[0] if inline.children else None
        match = _TASK.match(first.content) if first is not None and first.type == "text" else None
        if first is None or match is None:
            continue
        box = TASK_OPEN if match.group(1) == " " else TASK_DONE
        first.content = box + " " + first.content[match.end() :]
        token.meta["task"] = box


_CHAT = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(["table", "strikethrough"])
_CHAT.core.ruler.push("task_boxes", _task_boxes)
# What a markdown-it renderer of ``parse``'s tokens needs to know (line breaks, HTML off).
OPTIONS = _CHAT.options

# Only the block structure, for cutting: no inline parsing, which is most of the work.
_BLOCKS = MarkdownIt("commonmark", {"html": False}).enable("table").disable(["inline", "text_join"])


def parse(markdown: str) -> list[Token]:
    """The markdown-it tokens of ``markdown`` as chat platforms read it."""
    return _CHAT.parse(markdown)


@dataclass(frozen=True)
class _Fence:
    """A fenced code block: where its code runs, and how to close and reopen it."""

    start: int  # where the opening line starts
    body_start: int  # first character after the opening line
    body_end: int  # start of the closing line (the end of the text when there is none)
    end: int  # first character after the closing line
    opening: str  # the opening line, language and indentation included
    closing: str  # a line that closes it: its indentation (or quote marks) and its markup

    def holds(self, at: int) -> bool:
        """Whether a cut at ``at`` falls inside the code (not next to either fence line)."""
        return self.body_start < at < self.body_end

    def cuts_off(self, at: int) -> bool:
        """Whether a cut at ``at`` would part a fence line from its code."""
        return self.start < at <= self.body_start or self.body_end <= at < self.end


class _Layout:
    """Where ``text`` may be cut: block ends, line starts, spaces, and its fenced code."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        # markdown-it reads a lone CR as a line break; str.find does not.
        tokens = _BLOCKS.parse(text.replace("\r", " "))
        self.block_ends = sorted(
            {
                self._line_start(t.map[1])
                for t in tokens
                if t.level == 0 and t.map and t.nesting >= 0
            }
        )
        self.fences = [self._fence(t) for t in tokens if t.type == "fence" and t.map]
        self.spaces = [m.end() for m in re.finditer(r"[ \t]+", text)]

    def _line_start(self, line: int) -> int:
        return self.line_starts[line] if line < len(self.line_starts) else len(self.text)

    def _fence(self, token: Token) -> _Fence:
        assert token.map is not None
        first, after = token.map
        opening = self.text[self._line_start(first) : self._line_start(first + 1)].rstrip("\n")
        lead = opening[: opening.find(token.markup)] if token.markup in opening else ""
        last = self.text[self._line_start(after - 1) : self._line_start(after)].strip(" \t\n>")
        closed = (
            after - 1 > first and len(last) >= len(token.markup) and set(last) == {token.markup[0]}
        )
        return _Fence(
            start=self._line_start(first),
            body_start=self._line_start(first + 1),
            body_end=self._line_start(after - 1) if closed else len(self.text),
            end=self._line_start(after) if closed else len(self.text),
            opening=opening,
            closing=lead + token.markup,
        )

    def fence_at(self, at: int) -> _Fence | None:
        """The fenced code a cut at ``at`` would fall inside, if any."""
        return next((f for f in self.fences if f.holds(at)), None)


def split_markdown(
    text: str,
    limit: int,
    *,
    measure: Callable[[str], int] = len,
    keep_language: bool = True,
) -> list[str]:
    """``text`` in parts of at most ``limit`` (as ``measure`` counts) each, in order.

    A part ends after a whole block (paragraph, list, code block, table, ...) if one ends in
    the second half of the room, else at a line break, else at a space; failing those at the
    last break of any kind, and only inside a word when a word alone overflows the part. A code
    block cut in two is closed at the end of one part and reopened (with its language unless
    ``keep_language`` is false) at the start of the next. Joining the parts, without the added
    fence lines and the whitespace at the cuts, gives back the text. ``measure`` must count
    each character as at least one unit (characters and UTF-8 bytes do).

    Raises ValueError if ``limit`` is below ``MIN_PART``.
    """
    if limit < MIN_PART:
        raise ValueError(f"a message part must allow at least {MIN_PART} characters")
    text = text.strip()
    if measure(text) <= limit:
        return [text] if text else []
    layout = _Layout(text)
    parts: list[str] = []
    start, reopen = 0, ""
    while start < len(text):
        rest = text[start:].rstrip()
        if measure(reopen + rest) <= limit:
            parts.append(reopen + rest)
            break
        cut, fence = _cut(layout, start, reopen, limit, measure)
        close = ""
        if fence is not None:
            close = "\n" + fence.closing
            parts.append(reopen + text[start:cut].rstrip() + close)
            opening = fence.opening if keep_language else fence.closing
            reopen = _repair(opening, close, limit, measure)
            start = cut  # inside code, the next line keeps its indentation
        else:
            parts.append(reopen + text[start:cut].rstrip())
            reopen = ""
            start = _next_start(text, cut)
    return [part for part in parts if part.strip()]


def _repair(opening: str, close: str, limit: int, measure: Callable[[str], int]) -> str:
    """The line that reopens a cut code block, or its bare fence when that line would take
    more than half a part."""
    if measure(opening + close) <= limit // 2:
        return opening + "\n"
    bare = close.strip()
    return bare + "\n" if measure(bare + close) <= limit // 2 else ""


def _cut(
    layout: _Layout, start: int, reopen: str, limit: int, measure: Callable[[str], int]
) -> tuple[int, _Fence | None]:
    """Where the part starting at ``start`` ends, and the code block it leaves open, if any."""
    text = layout.text
    room = limit - measure(reopen)
    reserve = max((measure("\n" + f.closing) for f in layout.fences), default=0)
    widest = _fit(text, start, room, measure)
    # A cut inside code costs a closing fence line; outside, the whole room is usable.
    narrow = _fit(text, start, room - reserve, measure) if layout.fences else widest
    half = start + (widest - start) // 2

    def usable(at: int) -> bool:
        if any(f.cuts_off(at) for f in layout.fences):
            return False
        return at <= (narrow if layout.fence_at(at) is not None else widest)

    kinds = (layout.block_ends, layout.line_starts, layout.spaces)
    for points in kinds:
        at = _last(points, half, widest, usable)
        if at is not None:
            return at, layout.fence_at(at)
    # Nothing in the second half: the last break of any kind, however early.
    breaks = [at for points in kinds if (at := _last(points, start, widest, usable)) is not None]
    if breaks:
        return max(breaks), layout.fence_at(max(breaks))
    # A word longer than a part: cut it where it fills the part, but not inside a run of
    # backticks, which would turn a fence or a code span into text.
    at = narrow
    while start < at < len(text) and text[at - 1] == text[at] == "`":
        at -= 1
    at = at if at > start else max(narrow, start + 1)
    return at, layout.fence_at(at)


def _last(points: list[int], floor: int, ceiling: int, usable: Callable[[int], bool]) -> int | None:
    """The last of the sorted ``points`` in (floor, ceiling] that is ``usable``."""
    at = bisect.bisect_right(points, ceiling) - 1
    while at >= 0 and points[at] > floor:
        if usable(points[at]):
            return points[at]
        at -= 1
    return None


def _fit(text: str, start: int, room: int, measure: Callable[[str], int]) -> int:
    """The furthest end such that ``text[start:end]`` measures at most ``room``."""
    low, high = start, min(len(text), start + max(room, 0))
    while low < high:
        middle = (low + high + 1) // 2
        if measure(text[start:middle]) <= room:
            low = middle
        else:
            high = middle - 1
    return low


def _next_start(text: str, cut: int) -> int:
    """Where the next part starts after a cut outside code: past the whitespace at the cut,
    but keeping the indentation of its first line (an indented line may be code or a list)."""
    at = cut
    while at < len(text) and text[at].isspace():
        at += 1
    line = text.rfind("\n", cut, at)
    return line + 1 if line >= 0 else at
