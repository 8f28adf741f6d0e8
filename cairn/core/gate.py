"""The one gate every text passes before Cairn keeps it or shows it to anyone.

A text becomes what a person sees (:func:`visible`: control characters, Unicode format
characters such as tags, zero-width and bidi controls, and meaningless variation selectors
removed, then NFKC), and its credentials are masked (:mod:`cairn.core.secrets`). What Cairn
stores, logs, exports or posts is the gated text, never the original: the chat edge gates each
message (:func:`gate`, which also says what it removed, for the notice), and the backstops
(:func:`gated` for a column of the schema, a platform post, a log record, a spool record;
:func:`gated_data` for JSON) gate again whatever reaches them, so a path that forgets the
edge still writes nothing it should not. Gating is idempotent: a gated text passes unchanged.

Whether a text reads as an instruction to the assistant is weighed on the gated text
(:attr:`Gated.instruction`), so that nothing hidden from people can steer the model.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from cairn.core.injection import instruction_reason
from cairn.core.secrets import find_answered, find_secrets, find_split, removed

__all__ = ["Gated", "gate", "gated", "gated_data", "rejoin", "visible"]

# Control characters other than tab and newline (carriage returns are turned into newlines).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# What shows nothing beside the format characters (category Cf): the combining grapheme
# joiner, Hangul fillers, Mongolian free variation selectors, variation selectors.
_ALSO_INVISIBLE = frozenset(
    "\u034f\u115f\u1160\u3164\uffa0\u180b\u180c\u180d\u180f"
    + "".join(chr(c) for c in range(0xFE00, 0xFE10))
    + "".join(chr(c) for c in range(0xE0100, 0xE01F0))
)
_ZWNJ, _ZWJ, _VS15, _VS16, _KEYCAP = "\u200c", "\u200d", "\ufe0e", "\ufe0f", "\u20e3"
_BLACK_FLAG, _CANCEL_TAG = "\U0001f3f4", "\U000e007f"
_TAGS = range(0xE0020, 0xE007F)


def _pictograph(char: str) -> bool:
    """Whether ``char`` is an emoji or another symbol a variation selector or joiner can
    modify (symbols, and the supplementary planes' pictographs)."""
    return unicodedata.category(char) in {"So", "Sk", "Sm"} or 0x1F000 <= ord(char) <= 0x1FAFF


# The scripts whose letters a zero-width joiner or non-joiner shapes (so that it changes what
# is seen): Arabic and Persian, Syriac, the Indic scripts and Sinhala, Myanmar, Khmer, Mongolian.
_JOINING_SCRIPTS = (
    (0x0600, 0x08FF),
    (0x0900, 0x0DFF),
    (0x1000, 0x109F),
    (0x1780, 0x18AF),
    (0xA8E0, 0xA8FF),
    (0xFB50, 0xFDFF),
    (0xFE70, 0xFEFF),
)


def _joining(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _JOINING_SCRIPTS) and (
        unicodedata.category(char)[0] in "LM"
    )


def _joins_letters(before: str, after: str) -> bool:
    """Whether a zero-width (non-)joiner between ``before`` and ``after`` shapes the letters
    of a script that uses it (Arabic, Persian, Indic...), where it changes what is seen."""
    return _joining(before) and _joining(after)


def _meaningful(text: str, at: int) -> int:
    """How many characters from ``at`` (an invisible one) carry meaning and stay: a joiner
    inside an emoji sequence or a script that needs it, an emoji variation selector, the tag
    sequence of a subdivision flag. 0 when the character at ``at`` is to be removed."""
    char = text[at]
    before = text[at - 1] if at else ""
    after = text[at + 1] if at + 1 < len(text) else ""
    if char in (_ZWJ, _ZWNJ):
        if before and after and (_pictograph(before) or _pictograph(after)) and char == _ZWJ:
            return 1
        return 1 if before and after and _joins_letters(before, after) else 0
    if char in (_VS15, _VS16):
        # No ASCII character has an emoji form of its own: "=" and "©" differ ("#", "*" and
        # the digits have one only as a keycap, which the keycap mark after them says).
        return (
            1
            if before and ((_pictograph(before) and not before.isascii()) or after == _KEYCAP)
            else 0
        )
    if ord(char) in _TAGS and before == _BLACK_FLAG:
        end = at
        while end < len(text) and ord(text[end]) in _TAGS and end - at < 7:
            end += 1
        if end < len(text) and text[end] == _CANCEL_TAG:
            return end + 1 - at
    return 0


def _invisible(char: str) -> bool:
    return unicodedata.category(char) == "Cf" or char in _ALSO_INVISIBLE


def _without_invisible(text: str) -> tuple[str, int]:
    """``text`` without the invisible characters that carry nothing, and how many went."""
    kept: list[str] = []
    dropped = 0
    at = 0
    while at < len(text):
        char = text[at]
        if not _invisible(char):
            kept.append(char)
            at += 1
            continue
        keep = _meaningful(text, at)
        if keep:
            kept.append(text[at : at + keep])
            at += keep
        else:
            dropped += 1
            at += 1
    return "".join(kept), dropped


def visible(text: str) -> tuple[str, int]:
    """``text`` as a person sees it, and how many characters that took away.

    Carriage returns become newlines; control characters other than tab and newline, Unicode
    format characters (tags, zero-width spaces and joiners, bidi controls, the BOM...) and
    variation selectors go, except where they carry something (an emoji sequence, a flag, the
    joiners of scripts that need them); lone surrogates become U+FFFD; the rest is NFKC.
    Never raises.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    dropped = 0
    if _CONTROL.search(text):
        text, dropped = _CONTROL.subn("", text)
    if text.isascii():
        return text, dropped
    text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if any(_invisible(c) for c in text):
        text, more = _without_invisible(text)
        dropped += more
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
        if any(_invisible(c) for c in text):  # NFKC can uncover some (rare)
            text, more = _without_invisible(text)
            dropped += more
    return text, dropped


@dataclass(frozen=True, slots=True)
class Gated:
    """A text through the gate: what is kept and shown (``text``), the kinds of credential
    masked in it (``secrets``), and how many invisible characters were taken out
    (``hidden``)."""

    text: str
    secrets: tuple[str, ...] = ()
    hidden: int = 0
    _reason: list[str | None] = field(default_factory=list, repr=False, compare=False)

    @property
    def instruction(self) -> str | None:
        """Why the gated text reads as an instruction to the assistant, or None (weighed
        once, on first use)."""
        if not self._reason:
            self._reason.append(instruction_reason(self.text))
        return self._reason[0]


def _masked(text: str, spans: list[tuple[str, int, int]]) -> str:
    parts: list[str] = []
    last = 0
    for kind, start, end in spans:
        parts += [text[last:start], removed(kind)]
        last = end
    parts.append(text[last:])
    return "".join(parts)


# Texts longer than this (an attached log) are gated in pieces of about this size, cut at line
# ends outside a PEM block: the rules' cost grows faster than the length on a large text
# (5 MB of log in one piece: about three times the pieces' time), and a credential is on one
# line, or in a PEM block, or in two adjacent lines, which a cut between pieces rarely parts.
_PIECE_CHARS = 128_000
# The last long texts the gate kept: a backstop that meets one again (the artifact store, after
# the edge) passes it at once instead of reading megabytes twice. A handful, bounded in memory.
_KEPT_LONG: OrderedDict[str, None] = OrderedDict()
_KEPT_LONG_MAX = 4
_KEPT_LOCK = threading.Lock()


def gate(text: str) -> Gated:
    """``text`` made what a person sees, with every credential in it masked. Never raises."""
    if len(text) > _PIECE_CHARS:
        return _gate_long(text)
    result = _gate_piece(text)
    _remember(result.text, result.text)  # what the backstops will be given (see _KEPT)
    return result


def _gate_piece(text: str) -> Gated:
    shown, hidden = visible(text)
    secrets = find_secrets(shown)
    if not secrets:
        return Gated(shown, (), hidden)
    kinds = tuple(dict.fromkeys(s.kind for s in secrets))
    return Gated(_masked(shown, [(s.kind, s.start, s.end) for s in secrets]), kinds, hidden)


def _gate_long(text: str) -> Gated:
    """:func:`gate` of a long text, piece by piece (see ``_PIECE_CHARS``)."""
    with _KEPT_LOCK:
        if text in _KEPT_LONG:  # gating is idempotent: what the gate kept passes as it is
            _KEPT_LONG.move_to_end(text)
            return Gated(text)
    pieces = [_gate_piece(piece) for piece in _pieces(text)]
    kept = "".join(p.text for p in pieces)
    kinds = tuple(dict.fromkeys(kind for p in pieces for kind in p.secrets))
    with _KEPT_LOCK:
        _KEPT_LONG[kept] = None
        while len(_KEPT_LONG) > _KEPT_LONG_MAX:
            _KEPT_LONG.popitem(last=False)
    return Gated(kept, kinds, sum(p.hidden for p in pieces))


def _pieces(text: str) -> list[str]:
    """``text`` cut at line ends into pieces of about ``_PIECE_CHARS``, never inside a PEM
    block (whose lines are one credential); joined, they are ``text``."""
    pieces: list[str] = []
    start = 0
    while len(text) - start > _PIECE_CHARS:
        cut = text.find("\n", start + _PIECE_CHARS)
        if cut < 0:
            break
        opened = text.rfind("-----BEGIN ", start, cut)
        if opened >= 0 and text.find("-----END ", opened, cut) < 0:
            closed = text.find("-----END ", cut)
            cut = text.find("\n", closed + 9) if closed >= 0 else -1
            if cut < 0:
                break
        pieces.append(text[start : cut + 1])
        start = cut + 1
    pieces.append(text[start:])
    return pieces


def rejoin(before: str, text: str) -> tuple[str, str, str] | None:
    """A credential split over two gated messages of one thread (``before``, then ``text``):
    the kind, and both texts with their part masked; or a credential that the message before
    makes readable in ``text`` ("login: qa_lead", then the password). None when there is none."""
    split = find_split(before, text)
    if split is None:
        answered = find_answered(before, text)
        if not answered:
            return None
        spans = [(s.kind, s.start, s.end) for s in answered]
        return answered[0].kind, before, _masked(text, spans)
    kind, start, end, head_start, head_end = split
    return (
        kind,
        _masked(before, [(kind, start, end)]) if end > start else before,
        _masked(text, [(kind, head_start, head_end)]),
    )


# What the gate keeps of texts shorter than this is remembered (text -> kept): the same text
# is gated at the edge, then again by each backstop it reaches (the event log, the outbox, the
# platform, a checkpoint that holds every turn), so most calls repeat. The edge's own call
# (:func:`gate`) always runs the detector and leaves its result here: gating is idempotent, so
# what it kept passes the backstops as it is, without a second run.
_CACHED_CHARS = 4096
_KEPT: dict[str, str] = {}
_KEPT_MAX = 8192
_SCALARS = frozenset({int, float, bool, type(None)})


def _remember(text: str, kept: str) -> None:
    if len(text) > _CACHED_CHARS:
        return
    if len(_KEPT) >= _KEPT_MAX:
        _KEPT.clear()  # crude, and cheap: the next calls fill it again
    _KEPT[text] = kept
    _KEPT[kept] = kept


def gated(text: str) -> str:
    """The gated form of ``text`` (what :func:`gate` keeps), for the backstops. Never raises."""
    kept = _KEPT.get(text)
    if kept is None:
        kept = gate(text).text
        _remember(text, kept)
    return kept


def _passes(text: str) -> bool:
    """Whether the gate leaves ``text`` as it is."""
    if len(text) < 16 and text.isascii() and (text.isidentifier() or text.isdigit()):
        return True  # a name or a number too short to be a token: no rule reads one alone
    if len(text) < 6 and text.isascii() and text.isprintable():
        return True  # too short to hold a credential, nothing hidden in it
    kept = gated(text)
    return kept is text or kept == text


def _all_pass(value: Any) -> bool:
    """Whether the gate leaves every string of the JSON-like ``value`` (keys included) as it
    is: one walk without copying or recursion, the usual case of :func:`gated_data`."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in _SCALARS:
            continue
        if kind is str:
            kept = _KEPT.get(item)
            if kept is None:
                if not _passes(item):
                    return False
                _remember(item, item)
            elif kept != item:
                return False
        elif kind is dict:
            stack.extend(item)
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        elif isinstance(item, str):
            if not _passes(item):
                return False
        elif isinstance(item, dict | list | tuple):
            return False  # a subclass: the copying walk reads it
    return True


def _gated_tree(value: Any) -> Any:
    """``value`` with every string gated, in one pass: a list or dict in which nothing
    changed comes back as the same object, so only the path to a changed string is copied."""
    if isinstance(value, str):
        return value if _passes(value) else gated(value)
    if isinstance(value, dict):
        changed: dict[Any, Any] | None = None
        for at, (key, item) in enumerate(value.items()):
            new_key = key if not isinstance(key, str) or _passes(key) else gated(key)
            new_item = _gated_tree(item)
            if changed is None and (new_key is not key or new_item is not item):
                changed = dict(list(value.items())[:at])
            if changed is not None:
                changed[new_key] = new_item
        return value if changed is None else changed
    if isinstance(value, list | tuple):
        items: list[Any] | None = None
        for at, item in enumerate(value):
            new_item = _gated_tree(item)
            if items is None and new_item is not item:
                items = list(value[:at])
            if items is not None:
                items.append(new_item)
        return value if items is None else items
    return value


def gated_data(value: Any) -> Any:
    """A JSON-like ``value`` with every string in it gated, keys included; other values are
    kept as they are, and a value in which nothing changes comes back as the same object.
    Never raises."""
    return value if _all_pass(value) else _gated_tree(value)
