"""What an attached image is, read from its header, and whether a model may be shown it.

Only the header is read (PNG's IHDR, GIF's screen descriptor, JPEG's frame marker, WebP's
VP8/VP8L/VP8X chunk), never the pixels: an image is recorded as an artifact card ("image,
1280x720, 48213 bytes, not read"). With CAIRN_MODEL_IMAGES on, an image the Messages API
takes is also an :class:`~cairn.llm.types.ImageBlock`, for the model to see in the turn it
came with (docs/adr/0040).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

from cairn.core.tokens import count_tokens
from cairn.llm.types import IMAGE_TYPES, ImageBlock
from cairn.memory.context.artifacts import address
from cairn.memory.context.distill import Distilled
from cairn.memory.context.pastes import Card

__all__ = ["MODEL_IMAGE_BYTES", "ImageHeader", "image_card", "image_header"]

_PNG = b"\x89PNG\r\n\x1a\n"
_GIFS = (b"GIF87a", b"GIF89a")
# JPEG markers that start a frame (and so carry its size): SOF0-SOF15 but DHT (C4), JPG (C8)
# and DAC (CC), which share the range.
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Markers without a length: TEM, RST0-RST7, SOI.
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD9)})
# The largest image a model is sent: the Messages API takes 5 MB of base64 per image (about
# 3.9 MB of image), at most 8000 pixels on a side.
MODEL_IMAGE_BYTES = 5 * 1024 * 1024
_MODEL_EDGE = 8000
# A frame marker far into a file is not a header any more: give up past this (EXIF
# thumbnails and ICC profiles come first, and stay well under it in practice).
_JPEG_SCAN = 1_000_000


@dataclass(frozen=True, slots=True)
class ImageHeader:
    """An image's format (``png``, ``gif``, ``jpeg``) and size in pixels."""

    format: str
    width: int
    height: int


def image_card(
    name: str, media: str, size: int, data: bytes | None, *, for_model: bool = False
) -> tuple[Card, ImageBlock | None]:
    """The artifact card of an attached image, and the image block a model is shown.

    The card holds its name, type, width x height (from its header) and size, and whether a
    model saw it; its artifact also holds the SHA-256 of its bytes, so two images alike in all
    that are still two artifacts. The block is None unless ``for_model`` (CAIRN_MODEL_IMAGES)
    and the image is PNG, JPEG, GIF or WebP within the Messages API's limits; the card says
    why not otherwise.
    """
    header = image_header(data) if data is not None else None
    if header is not None:
        pixels = f"{header.width}x{header.height}"
    elif data is None:
        pixels = "size in pixels unknown (not fetched)"
    else:
        pixels = "size in pixels unknown (its header is not PNG, JPEG, GIF or WebP)"
    block: ImageBlock | None = None
    why_not = ""
    if for_model:
        seen = _for_model(header, data)
        block, why_not = (seen, "") if isinstance(seen, ImageBlock) else (None, seen)
    seen_by = "shown to the model with its message" if block is not None else "not read"
    summary = f"image, {pixels}, {size} bytes, {seen_by}"
    kind = f"{media or 'image'}" + (f", {header.format}" if header is not None else "")
    if block is not None:
        note = "The model saw it in the turn it came with; later turns show this card only."
    elif for_model:
        note = f"Not shown to the model: {why_not}."
    else:
        note = "I can't see images yet: what it shows is not known to me."
    lines = [f"image {name} ({kind}): {summary}", note]
    if data is not None:
        lines.append(f"sha256 of its bytes: {hashlib.sha256(data).hexdigest()}")
    content = "\n".join(lines)
    card = Card(
        sha256=address(content),
        content=content,
        distilled=Distilled("image", f"image {name}", summary),
        lines=len(lines),
        tokens=count_tokens(content),
    )
    return card, block


def _for_model(header: ImageHeader | None, data: bytes | None) -> ImageBlock | str:
    """The block of an image a model may be shown, or why it may not."""
    if data is None:
        return "it was not fetched"
    if header is None:
        return "only PNG, JPEG, GIF and WebP images are sent"
    media = f"image/{header.format}"
    if media not in IMAGE_TYPES:  # pragma: no cover - image_header reads only these
        return f"{media} is not sent"
    encoded = 4 * ((len(data) + 2) // 3)
    if encoded > MODEL_IMAGE_BYTES:
        return (
            f"it is {len(data):,} bytes, {encoded:,} in base64; the model takes at most "
            f"{MODEL_IMAGE_BYTES:,} bytes of base64 per image"
        )
    if max(header.width, header.height) > _MODEL_EDGE:
        return f"it is {header.width}x{header.height}; the model takes {_MODEL_EDGE} px a side"
    return ImageBlock(media, data, header.width, header.height)


def image_header(data: bytes) -> ImageHeader | None:
    """The format and size of the PNG, GIF, JPEG or WebP image ``data`` starts with, or None
    when its header is none of these, or is cut short or malformed. Never raises."""
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
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp(data)
    return None


def _webp(data: bytes) -> ImageHeader | None:
    """The size in a WebP's first chunk: VP8X (extended), VP8L (lossless) or VP8 (lossy)."""
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return _sized("webp", width, height)
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return _sized("webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return _sized("webp", width & 0x3FFF, height & 0x3FFF)
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
