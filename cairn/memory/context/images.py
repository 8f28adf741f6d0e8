"""What an attached image is, read from its header: its format and its width and height.

Only the header is read (PNG's IHDR, GIF's screen descriptor, JPEG's frame marker), never the
pixels: an image is recorded as an artifact card ("image, 1280x720, 48213 bytes, not read"),
and nothing in Cairn reads what it shows yet (docs/adr/0040).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

from cairn.core.tokens import count_tokens
from cairn.memory.context.artifacts import address
from cairn.memory.context.distill import Distilled
from cairn.memory.context.pastes import Card

__all__ = ["ImageHeader", "image_card", "image_header"]

_PNG = b"\x89PNG\r\n\x1a\n"
_GIFS = (b"GIF87a", b"GIF89a")
# JPEG markers that start a frame (and so carry its size): SOF0-SOF15 but DHT (C4), JPG (C8)
# and DAC (CC), which share the range.
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Markers without a length: TEM, RST0-RST7, SOI.
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD9)})
# A frame marker far into a file is not a header any more: give up past this (EXIF
# thumbnails and ICC profiles come first, and stay well under it in practice).
_JPEG_SCAN = 1_000_000


@dataclass(frozen=True, slots=True)
class ImageHeader:
    """An image's format (``png``, ``gif``, ``jpeg``) and size in pixels."""

    format: str
    width: int
    height: int


def image_card(name: str, media: str, size: int, data: bytes | None) -> Card:
    """The artifact card of an attached image: its name, type, width x height (from its
    header) and size, and that it was not read; its artifact also holds the SHA-256 of its
    bytes, so two images alike in all that are still two artifacts."""
    header = image_header(data) if data is not None else None
    if header is not None:
        pixels = f"{header.width}x{header.height}"
    elif data is None:
        pixels = "size in pixels unknown (not fetched)"
    else:
        pixels = "size in pixels unknown (its header is not PNG, JPEG or GIF)"
    summary = f"image, {pixels}, {size} bytes, not read"
    kind = f"{media or 'image'}" + (f", {header.format}" if header is not None else "")
    lines = [
        f"image {name} ({kind}): {summary}",
        "I can't see images yet: what it shows is not known to me.",
    ]
    if data is not None:
        lines.append(f"sha256 of its bytes: {hashlib.sha256(data).hexdigest()}")
    content = "\n".join(lines)
    return Card(
        sha256=address(content),
        content=content,
        distilled=Distilled("image", f"image {name}", summary),
        lines=len(lines),
        tokens=count_tokens(content),
    )


def image_header(data: bytes) -> ImageHeader | None:
    """The format and size of the PNG, GIF or JPEG image ``data`` starts with, or None when
    its header is none of these, or is cut short or malformed. Never raises."""
    if data.startswith(_PNG):
        # The first chunk is IHDR: length (4), type (4), width (4), height (4), big-endian.
        if len(data) < 24 or data[12:16] != b"IHDR":
            return None
        width, height = struct.unpack(">II", data[16:24])
        return _sized("png", width, height)
    if data[:6] in _GIFS:
        if len(data) < 10:
            return None
        width, height = struct.unpack("<HH", data[6:10])
        return _sized("gif", width, height)
    if data.startswith(b"\xff\xd8"):
        return _jpeg(data)
    return None


def _jpeg(data: bytes) -> ImageHeader | None:
    at = 2
    end = min(len(data), _JPEG_SCAN)
    while at + 4 <= end:
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte before a marker
            at += 1
            continue
        if marker in _STANDALONE:
            at += 2
            continue
        if marker in {0xD9, 0xDA}:  # the end, or the scan, before any frame
            return None
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        if length < 2:
            return None
        if marker in _SOF:
            # length (2), precision (1), height (2), width (2)
            if at + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return _sized("jpeg", width, height)
        at += 2 + length
    return None


def _sized(kind: str, width: int, height: int) -> ImageHeader | None:
    return ImageHeader(kind, width, height) if width and height else None
