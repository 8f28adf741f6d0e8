"""Attached images reach a model that reads images (issue 33, docs/adr/0040).

With CAIRN_MODEL_IMAGES on, an image attached in the console (``/attach``) is sent by the real
Anthropic SDK to a stand-in that speaks the Messages API, as an image block in the turn it came
with, and in no later turn; the offline model says it can't read images; an image over the
attachment limit is refused as before, and one the model can't take is only a card.
"""

from __future__ import annotations

import base64
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from sqlmodel import select

from cairn.bot.console import Console
from cairn.bot.pipeline import Pipeline
from cairn.core.settings import get_settings, load_settings
from cairn.core.tokens import image_tokens
from cairn.db.models import Artifact, ArtifactImage, ContextTelemetry
from cairn.runtime import Runtime, build_runtime, reset_runtime
from cairn.workers.dispatch import InProcessDispatcher
from tests.support.messages_server import MessagesServer, Reply, text_message

KEY = "sk-test"


def picture(path: Path, size: tuple[int, int], *, noise: bool = False, kind: str = "PNG") -> bytes:
    """Write a real image made by Pillow at ``path`` (random pixels with ``noise``, which
    compress badly, so the file is large); returns its bytes."""
    if noise:
        image = Image.frombytes("RGB", size, os.urandom(size[0] * size[1] * 3))
    else:
        image = Image.new("RGB", size, (200, 30, 30))
    out = io.BytesIO()
    image.save(out, kind)
    path.write_bytes(out.getvalue())
    return out.getvalue()


@pytest.fixture
def model() -> Iterator[MessagesServer]:
    with MessagesServer(
        api_key=KEY, responder=lambda request: Reply(body=text_message("A red square."))
    ) as server:
        yield server


def _runtime(monkeypatch: pytest.MonkeyPatch, **env: str) -> Runtime:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    rt = build_runtime(load_settings())
    reset_runtime(rt)
    return rt


def _chat(rt: Runtime, lines: list[str]) -> list[dict[str, Any]]:
    out = io.StringIO()
    Console(Pipeline(rt, InProcessDispatcher()), out=out, as_json=True).run(lines)
    return [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


def images_sent(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The image blocks in the messages of a request to the Messages API."""
    return [
        block
        for message in body["messages"]
        for block in message["content"]
        if block.get("type") == "image"
    ]


@pytest.mark.parametrize("mode", ["engine", "classic"])
def test_an_attached_png_reaches_claude_as_an_image_block_in_its_turn_only(
    clean_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    model: MessagesServer,
    tmp_path: Path,
    mode: str,
) -> None:
    shot = picture(tmp_path / "dashboard.png", (2000, 1000))
    rt = _runtime(
        monkeypatch,
        ANTHROPIC_API_KEY=KEY,
        ANTHROPIC_BASE_URL=model.base_url,
        CAIRN_MODEL_IMAGES="1",
        CAIRN_CONTEXT_MODE=mode,
    )
    try:
        outputs = _chat(
            rt, [f"/attach {tmp_path / 'dashboard.png'} what does p99 show?", "and now?"]
        )
        with rt.db.session() as s:
            telemetry = s.exec(select(ContextTelemetry).order_by(ContextTelemetry.event_seq)).all()
    finally:
        rt.close()
    assert [o["type"] for o in outputs] == ["reply", "reply"]
    first, second = model.bodies
    [image] = images_sent(first)
    assert image["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": base64.b64encode(shot).decode(),
    }
    # In the person's turn, after its text, which carries the card.
    turn = first["messages"][-1]
    assert turn["role"] == "user"
    assert turn["content"][-1]["type"] == "image"
    said = turn["content"][0]["text"]
    assert "what does p99 show?" in said
    assert f"image, 2000x1000, {len(shot)} bytes, shown to the model with its message" in said
    # The next turn shows the card only: the bytes went with their own message.
    assert images_sent(second) == []
    assert "image, 2000x1000" in json.dumps(second["messages"])
    # The budget counts the image as the API scales it: 1568x784 px, about 1,640 tokens.
    assert image_tokens(2000, 1000) == 1640
    assert telemetry[0].bands["request"] >= 1640
    assert telemetry[1].bands["request"] < 1640


def test_the_offline_model_says_it_cannot_read_an_attached_image(
    runtime: Runtime, tmp_path: Path
) -> None:
    shot = picture(tmp_path / "dashboard.png", (640, 480))
    outputs = _chat(runtime, [f"/attach {tmp_path / 'dashboard.png'} what does this show?"])
    [reply] = [o["text"] for o in outputs if o["type"] == "reply"]
    assert reply.startswith("I can't read images")
    assert f"dashboard.png (image, 640x480, {len(shot)} bytes, not read)" in reply
    with runtime.db.session() as s:
        assert s.exec(select(ArtifactImage)).all() == []  # CAIRN_MODEL_IMAGES is off: not kept


def test_with_images_on_the_offline_model_still_says_it_cannot_read_them(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    picture(tmp_path / "dashboard.png", (640, 480))
    rt = _runtime(monkeypatch, CAIRN_MODEL_IMAGES="1")
    try:
        outputs = _chat(rt, [f"/attach {tmp_path / 'dashboard.png'}"])
    finally:
        rt.close()
    [reply] = [o["text"] for o in outputs if o["type"] == "reply"]
    assert reply.startswith("I can't read images")
    assert "dashboard.png (image, 640x480" in reply


def test_images_too_large_or_of_other_types_are_refused_or_only_carded(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, model: MessagesServer, tmp_path: Path
) -> None:
    rt = _runtime(
        monkeypatch,
        ANTHROPIC_API_KEY=KEY,
        ANTHROPIC_BASE_URL=model.base_url,
        CAIRN_MODEL_IMAGES="1",
    )
    huge = tmp_path / "huge.png"
    with huge.open("wb") as f:
        f.truncate(rt.settings.attachment_max_bytes + 1)
    # Within CAIRN_ATTACHMENT_MAX_BYTES, over the 5 MB of base64 the Messages API takes.
    noisy = picture(tmp_path / "noisy.png", (1200, 1200), noise=True)
    assert 4 * len(noisy) / 3 > 5 * 1024 * 1024
    picture(tmp_path / "old.bmp", (40, 30), kind="BMP")
    try:
        outputs = _chat(
            rt,
            [
                f"/attach {huge}",
                f"/attach {tmp_path / 'noisy.png'} the heat map",
                f"/attach {tmp_path / 'old.bmp'} an old chart",
            ],
        )
        with rt.db.session() as s:
            kept = s.exec(select(ArtifactImage)).all()
        noisy_card, bmp_card = card_of(rt, "noisy.png"), card_of(rt, "old.bmp")
    finally:
        rt.close()
    [error] = [o["text"] for o in outputs if o["type"] == "error"]
    assert "huge.png is 10,000,001 bytes; the limit is 10,000,000 bytes" in error
    assert [o["type"] for o in outputs].count("reply") == 2
    assert kept == []
    noisy_turn, bmp_turn = model.bodies
    assert images_sent(noisy_turn) == []
    assert images_sent(bmp_turn) == []
    said = json.dumps(noisy_turn["messages"])
    assert "image, 1200x1200" in said
    assert "not read" in said
    assert f"Not shown to the model: it is {len(noisy):,} bytes" in noisy_card
    assert "only PNG, JPEG, GIF and WebP images are sent" in bmp_card


def card_of(rt: Runtime, name: str) -> str:
    """The full text of the artifact card of the attached image ``name``."""
    with rt.db.session() as s:
        texts = [a.content for a in s.exec(select(Artifact)).all()]
    [content] = [text for text in texts if text.startswith(f"image {name} ")]
    return content
