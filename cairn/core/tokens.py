"""The one token estimator every budget in Cairn uses.

Real tokenisers differ by model and are not available offline, so Cairn estimates: about four
characters of Latin text per token, one token per CJK ideograph or kana, and one per emoji or
other symbol outside the Basic Multilingual Plane. The estimate errs on the high side so that a
budget computed with it is not overrun by the real count.
"""

from __future__ import annotations

import math
import re

__all__ = ["count_tokens", "image_tokens"]

# The longest side an image keeps: the Messages API scales a larger one down to it.
_IMAGE_EDGE = 1568
# Pixels per token of an image, as Anthropic estimates its cost (width * height / 750).
_PIXELS_PER_TOKEN = 750

# Runs of word characters, runs of whitespace, and single other characters.
_PIECES = re.compile(r"[^\W\d_]+|\d+|\s+|.", re.UNICODE | re.DOTALL)


def _is_wide(ch: str) -> bool:
    code = ord(ch)
    return (
        0x2E80 <= code <= 0x9FFF  # CJK radicals, kana, ideographs
        or 0xAC00 <= code <= 0xD7AF  # Hangul syllables
        or 0xF900 <= code <= 0xFAFF
        or code >= 0x10000  # emoji and other astral symbols
    )


def count_tokens(text: str) -> int:
    """Estimated tokens of ``text`` (0 for the empty string); deterministic and Unicode-aware."""
    if not text:
        return 0
    total = 0.0
    for piece in _PIECES.findall(text):
        first = piece[0]
        if first.isspace():
            total += 0.25 * math.ceil(len(piece) / 4) if "\n" not in piece else piece.count("\n")
        elif first.isdigit():
            total += math.ceil(len(piece) / 3)
        elif first.isalpha():
            wide = sum(1 for ch in piece if _is_wide(ch))
            narrow = len(piece) - wide
            total += wide + (math.ceil(narrow / 4) if narrow else 0)
        else:
            total += 1
    return max(1, math.ceil(total))


def image_tokens(width: int, height: int) -> int:
    """Estimated tokens of an image of ``width`` x ``height`` pixels shown to a model: about
    one per 750 pixels, after the image is scaled down to 1568 pixels on its long side (as the
    Messages API does to a larger one); at least 1."""
    long_side = max(width, height, 1)
    scale = min(1.0, _IMAGE_EDGE / long_side)
    pixels = round(width * scale) * round(height * scale)
    return max(1, math.ceil(pixels / _PIXELS_PER_TOKEN))
