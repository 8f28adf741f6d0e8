"""Files attached in the console (``/attach PATH``) are read through the gate into artifact
cards the model can search (issue 33)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from cairn.bot.console import Console
from cairn.bot.pipeline import Pipeline
from cairn.runtime import Runtime
from cairn.workers.dispatch import InProcessDispatcher
from tests.integration.test_long_pastes import service_log

PASSWORD = "Tr0ub4dor-x9Qz-2026"


def big_log(path: Path) -> Path:
    """A 5 MB service log at ``path``; line 31,337 leaks a password."""
    path.write_text("\n".join(service_log(51_000, secret_at=31_336)) + "\n")
    assert path.stat().st_size > 5_000_000
    return path


def stored_anywhere(home: Path, needle: str) -> list[Path]:
    """The files under CAIRN_HOME (database, vector index, spool) that hold ``needle``."""
    raw = needle.encode()
    return [f for f in home.rglob("*") if f.is_file() and raw in f.read_bytes()]


def _run(runtime: Runtime, lines: list[str]) -> list[dict[str, str]]:
    out = io.StringIO()
    console = Console(Pipeline(runtime, InProcessDispatcher()), out=out, as_json=True)
    console.run(lines)
    return [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


def test_an_attached_5mb_log_is_read_without_its_password_and_a_line_of_it_is_answered(
    runtime: Runtime, tmp_path: Path
) -> None:
    log = big_log(tmp_path / "api-3.log")
    outputs = _run(
        runtime,
        [f"/attach {log} the api-3 log from this morning", "what happened to req-041999?"],
    )
    assert [o for o in outputs if o["type"] == "error"] == []
    replies = [o["text"] for o in outputs if o["type"] == "reply"]
    # The question is answered from the file's artifact: the line it asks about, by number.
    assert "line 42000:" in replies[-1]
    assert "req-041999 GET /v1/orders/293993" in replies[-1]
    assert PASSWORD not in json.dumps(outputs)
    assert stored_anywhere(runtime.settings.home, PASSWORD) == []
    assert stored_anywhere(runtime.settings.home, "[secret removed: password]")


def test_binaries_and_files_over_the_limit_are_refused_with_the_reason(
    runtime: Runtime, tmp_path: Path
) -> None:
    archive = tmp_path / "logs.tar.gz"
    archive.write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 40)
    huge = tmp_path / "huge.log"
    with huge.open("wb") as f:
        f.truncate(runtime.settings.attachment_max_bytes + 1)  # sparse: nothing is written
    image = tmp_path / "dashboard.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 2000)
    outputs = _run(runtime, [f"/attach {archive}", f"/attach {huge}", f"/attach {image} p99 is up"])
    errors = [o["text"] for o in outputs if o["type"] == "error"]
    assert len(errors) == 2
    assert "logs.tar.gz" in errors[0]
    assert "not text" in errors[0]
    assert "huge.log" in errors[1]
    assert "CAIRN_ATTACHMENT_MAX_BYTES" in errors[1]
    # An image with words is taken: the words, and a note of the image (not read).
    assert [o["type"] for o in outputs].count("reply") == 1


def test_an_attached_image_is_an_artifact_card_with_its_size_and_a_large_one_is_refused(
    runtime: Runtime, tmp_path: Path
) -> None:
    from sqlmodel import select

    from cairn.db.models import ContextArtifact, EventKind, SessionEvent
    from tests.unit.test_image_headers import png

    shot = tmp_path / "dashboard.png"
    shot.write_bytes(png(1280, 720))
    huge = tmp_path / "huge.png"
    with huge.open("wb") as f:
        f.truncate(runtime.settings.attachment_max_bytes + 1)
    outputs = _run(runtime, [f"/attach {shot} p99 is up", f"/attach {huge}"])
    [error] = [o["text"] for o in outputs if o["type"] == "error"]
    assert (
        "huge.png is 10,000,001 bytes; the limit is 10,000,000 bytes (CAIRN_ATTACHMENT_MAX_BYTES)"
        in error
    )
    size = shot.stat().st_size
    with runtime.db.session() as s:
        [message] = s.exec(select(SessionEvent).where(SessionEvent.kind == EventKind.MESSAGE))
        [artifact] = s.exec(select(ContextArtifact))
    assert message.text.startswith("p99 is up\nattached image dashboard.png:\n[artifact ")
    assert f"image, 1280x720, {size} bytes, not read" in message.text
    assert artifact.kind == "image"
    assert artifact.title == "image dashboard.png"
