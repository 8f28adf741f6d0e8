"""Files shared in Slack (uploads and snippets) are fetched with the bot token, read through the
gate into artifact cards, and a line of them can be asked about; with CAIRN_MODEL_IMAGES on, a
shared image reaches the model as an image block (issue 33)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from cairn.db.models import EventKind, SessionEvent
from tests.integration.test_console_attachments import PASSWORD, big_log, stored_anywhere
from tests.support.messages_server import MessagesServer, Reply, text_message
from tests.support.slack_api import BOT_TOKEN, BOT_USER
from tests.support.slack_harness import Harness, running_slack

CHANNEL = "C0CHAN"
TS = "1700000100.000100"


def shared(text: str, files: list[dict], *, ts: str = TS, thread_ts: str | None = None) -> dict:
    """A file_share message mentioning the bot, as the Events API sends it."""
    event = {
        "type": "message",
        "subtype": "file_share",
        "user": "UANN",
        "text": f"<@{BOT_USER}> {text}",
        "ts": ts,
        "channel": CHANNEL,
        "channel_type": "channel",
        "event_ts": ts,
        "files": files,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


@pytest.fixture
def http(monkeypatch: pytest.MonkeyPatch):
    with running_slack(monkeypatch, CAIRN_SLACK_STREAM_MODE="off") as harness:
        yield harness


def test_a_shared_5mb_log_is_read_without_its_password_and_a_line_of_it_is_answered(
    http: Harness, tmp_path: Path
) -> None:
    content = big_log(tmp_path / "api-3.log").read_bytes()
    upload = http.api.add_file("F0LOG", "api-3.log", content)
    # A long paste Slack made a snippet, which the event leaves for files.info to describe.
    snippet = http.api.add_file(
        "F0SNIP", "snippet.txt", b"deploy failed: db_password=Tr0ub4dor-x9Qz-2026\n", mode="snippet"
    )
    http.deliver(
        shared(
            "the api-3 log from this morning",
            [upload, {"id": snippet["id"], "file_access": "check_file_info"}],
        )
    )
    http.settle(timeout=120)
    thread = {"type": "app_mention", "user": "UANN", "channel": CHANNEL, "thread_ts": TS}
    ts = "1700000200.000100"
    http.deliver({**thread, "text": f"<@{BOT_USER}> what happened to req-041999?", "ts": ts})
    http.settle(timeout=60)

    assert {token for _, token in http.api.downloads} == {BOT_TOKEN}
    assert {file_id for file_id, _ in http.api.downloads} == {"F0LOG", "F0SNIP"}
    assert len(http.api.calls("files.info")) == 1
    posts = http.api.posts(CHANNEL)
    [answer] = [p["text"] for p in posts if "In artifact" in p["text"]]
    # The person is told a credential was taken out of what they shared.
    assert any("I removed what looks like a secret (password)" in p["text"] for p in posts)
    assert "line 42000:" in answer
    assert "req-041999 GET /v1/orders/293993" in answer
    assert PASSWORD not in json.dumps(posts)
    assert stored_anywhere(http.pipeline.rt.settings.home, PASSWORD) == []
    with http.pipeline.rt.db.session() as s:
        first = s.query(SessionEvent).filter(SessionEvent.kind == EventKind.MESSAGE).first()
    assert first is not None
    assert "attached file api-3.log (5.0 MB)" in first.text
    assert "attached file snippet.txt" in first.text


def test_a_file_over_the_limit_is_refused_in_the_thread_and_never_downloaded(
    http: Harness,
) -> None:
    big = http.api.add_file("F0BIG", "core.dump", b"x" * 10, size=50_000_000)
    http.deliver(shared("", [big]))
    http.settle()
    [post] = http.api.posts(CHANNEL)
    assert "core.dump" in post["text"]
    assert "CAIRN_ATTACHMENT_MAX_BYTES" in post["text"]
    assert http.api.downloads == []


def test_a_shared_image_is_fetched_and_recorded_as_a_card_with_its_size_not_read(
    http: Harness,
) -> None:
    from tests.unit.test_image_headers import png

    data = png(800, 600)
    shot = http.api.add_file("F0PNG", "p99.png", data, mimetype="image/png")
    http.deliver(shared("p99 since the deploy", [shot]))
    http.settle(timeout=60)
    assert {file_id for file_id, _ in http.api.downloads} == {"F0PNG"}
    with http.pipeline.rt.db.session() as s:
        first = s.query(SessionEvent).filter(SessionEvent.kind == EventKind.MESSAGE).first()
    assert first is not None
    assert "attached image p99.png:" in first.text
    assert f"image, 800x600, {len(data)} bytes, not read" in first.text


def test_with_images_on_a_shared_jpeg_reaches_claude_as_an_image_block(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests.integration.test_image_attachments import picture

    data = picture(tmp_path / "p99.jpg", (800, 600), kind="JPEG")
    with (
        MessagesServer(
            api_key="sk-test",
            responder=lambda request: Reply(body=text_message("p99 doubled at 10:42.")),
        ) as model,
        running_slack(
            monkeypatch,
            CAIRN_SLACK_STREAM_MODE="off",
            ANTHROPIC_API_KEY="sk-test",
            ANTHROPIC_BASE_URL=model.base_url,
            CAIRN_MODEL_IMAGES="1",
        ) as http,
    ):
        shot = http.api.add_file("F0JPG", "p99.jpg", data, mimetype="image/jpeg")
        http.deliver(shared("what does p99 do here?", [shot]))
        http.settle(timeout=60)
        posts = http.api.posts(CHANNEL)
    assert any(p["text"] == "p99 doubled at 10:42." for p in posts)
    [body] = model.bodies
    turn = body["messages"][-1]
    assert "what does p99 do here?" in turn["content"][0]["text"]
    assert turn["content"][-1] == {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/jpeg",
            "data": base64.b64encode(data).decode(),
        },
        "cache_control": {"type": "ephemeral"},
    }
