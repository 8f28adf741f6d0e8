"""An attached image's format and size in pixels are read from its header (PNG, GIF, JPEG,
WebP), and anything else, cut short or malformed, is None, never an error; with
CAIRN_MODEL_IMAGES on, one the Messages API takes is an image block (issue 33)."""

from __future__ import annotations

import io
import struct
import zlib

import pytest

from cairn.llm.types import ImageBlock
from cairn.memory.context.images import MODEL_IMAGE_BYTES, ImageHeader, image_card, image_header


def png(width: int, height: int) -> bytes:
    """A real PNG of ``width`` x ``height`` grey pixels, written by hand."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body)
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    rows = b"".join(b"\0" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def test_a_png_gif_and_jpeg_header_give_their_size_in_pixels() -> None:
    assert image_header(png(640, 48)) == ImageHeader("png", 640, 48)
    gif = b"GIF89a" + struct.pack("<HH", 320, 200) + b"\xf7\0\0" + b"\0" * 20
    assert image_header(gif) == ImageHeader("gif", 320, 200)
    # A JPEG whose frame comes after an APP1 (EXIF) segment and a fill byte.
    app1 = b"\xff\xe1" + struct.pack(">H", 2 + 300) + b"Exif\0\0" + b"\xff" * 294
    sof2 = b"\xff\xc2" + struct.pack(">HBHHB", 11, 8, 1080, 1920, 1) + b"\x01\x11\x00"
    jpeg = b"\xff\xd8" + app1 + b"\xff" + sof2 + b"\xff\xda\0\x08" + b"\0" * 10 + b"\xff\xd9"
    assert image_header(jpeg) == ImageHeader("jpeg", 1920, 1080)


@pytest.mark.parametrize("kind", ["PNG", "GIF", "JPEG"])
@pytest.mark.parametrize("progressive", [False, True])
def test_images_written_by_pillow_are_read_the_same(kind: str, progressive: bool) -> None:
    image_module = pytest.importorskip("PIL.Image")
    buffer = io.BytesIO()
    options = {"progressive": True, "exif": b"Exif\0\0" + b"\0" * 64} if progressive else {}
    image_module.new("RGB", (333, 77), "teal").save(
        buffer, kind, **(options if kind == "JPEG" else {})
    )
    assert image_header(buffer.getvalue()) == ImageHeader(kind.lower(), 333, 77)


@pytest.mark.parametrize(
    "options",
    [{"lossless": True}, {"quality": 80}, {"quality": 80, "exif": b"Exif\0\0" + b"\0" * 8}],
)
def test_webp_written_by_pillow_is_read_lossless_lossy_and_extended(
    options: dict[str, object],
) -> None:
    image_module = pytest.importorskip("PIL.Image")
    buffer = io.BytesIO()
    image_module.new("RGB", (333, 77), "teal").save(buffer, "WEBP", **options)
    assert image_header(buffer.getvalue()) == ImageHeader("webp", 333, 77)


def test_an_image_the_api_takes_is_a_block_of_its_own_type_and_a_card_that_says_so() -> None:
    data = png(3, 2)
    # The type its header shows is sent, not the one its name or the platform claimed.
    card, block = image_card("shot.jpg", "image/jpeg", len(data), data, for_model=True)
    assert block == ImageBlock("image/png", data, 3, 2)
    assert (
        card.distilled.body == f"image, 3x2, {len(data)} bytes, shown to the model with its message"
    )
    card, block = image_card("x.bmp", "image/bmp", 10, b"BM" + b"\0" * 8, for_model=True)
    assert block is None
    assert "Not shown to the model: only PNG, JPEG, GIF and WebP images are sent." in card.content
    assert card.distilled.body.endswith("not read")


def test_an_image_over_5mb_of_base64_or_8000_px_a_side_is_not_a_block() -> None:
    fits = MODEL_IMAGE_BYTES // 4 * 3  # exactly 5 MB once in base64
    head = png(100, 100)[:33]
    _, block = image_card("a.png", "image/png", fits, head + b"\0" * (fits - 33), for_model=True)
    assert block is not None
    card, block = image_card(
        "b.png", "image/png", fits + 1, head + b"\0" * (fits - 32), for_model=True
    )
    assert block is None
    assert "the model takes at most 5,242,880 bytes of base64 per image" in card.content
    card, block = image_card("c.png", "image/png", 100, png(8001, 1)[:33], for_model=True)
    assert block is None
    assert "it is 8001x1; the model takes 8000 px a side" in card.content


def test_anything_else_cut_short_or_malformed_is_none() -> None:
    whole = png(5, 4)
    for cut in range(len(whole[:24])):
        assert image_header(whole[:cut]) is None
    assert image_header(b"\x89PNG\r\n\x1a\n" + b"\0" * 2000) is None  # no IHDR
    assert image_header(b"\xff\xd8\xff\xda" + b"\0" * 100) is None  # a scan before a frame
    assert image_header(b"\xff\xd8\xff\xe0\x00\x01") is None  # a length under 2
    assert image_header(b"\xff\xd8" + b"\xff" * 5000) is None  # only fill bytes
    assert image_header(b"GIF89a\0\0\0\0") is None  # zero pixels
    assert image_header(b"%PDF-1.7") is None


def test_an_image_card_says_image_its_size_in_pixels_bytes_and_not_read() -> None:
    data = png(3, 2)
    card, block = image_card("dashboard.png", "image/png", len(data), data)
    assert block is None  # CAIRN_MODEL_IMAGES is off
    assert card.distilled.kind == "image"
    assert card.distilled.body == f"image, 3x2, {len(data)} bytes, not read"
    # Two different images alike in name, type and size are two artifacts.
    other, _ = image_card("dashboard.png", "image/png", len(data), png(3, 2)[:-1] + b"\1")
    assert other.sha256 != card.sha256
    unknown, _ = image_card("x.png", "image/png", 10, b"\x89PNG\r\n\x1a\n\0\0")
    assert "size in pixels unknown" in unknown.distilled.body
