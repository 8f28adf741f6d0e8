"""A message over CAIRN_MAX_MESSAGE_CHARS that is mostly a log becomes an artifact card, not an
error; only what can't be distilled (prose) is refused (issue 33)."""

from __future__ import annotations

import io
import json

from sqlmodel import col, select

from cairn.bot.console import Console
from cairn.bot.pipeline import Pipeline
from cairn.db.models import Artifact, EventKind, SessionEvent
from cairn.runtime import Runtime
from cairn.workers.dispatch import InProcessDispatcher


def service_log(lines: int, *, secret_at: int | None = None) -> list[str]:
    """A service log of ``lines`` lines (about 100 characters each); line ``secret_at`` leaks a
    database password."""
    out = []
    for n in range(lines):
        level = "ERROR" if n % 97 == 13 else "INFO"
        out.append(
            f"2026-12-05T10:{n // 60 % 60:02d}:{n % 60:02d}.{n % 1000:03d}Z {level} api-3 "
            f"request req-{n:06d} GET /v1/orders/{n * 7} status={500 if level == 'ERROR' else 200} "
            f"took={n % 400}ms"
        )
    if secret_at is not None:
        out[secret_at] = (
            "2026-12-05T10:00:00.000Z DEBUG api-3 connecting with db_password=Tr0ub4dor-x9Qz-2026"
        )
    return out


def _console(runtime: Runtime) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    console = Console(Pipeline(runtime, InProcessDispatcher()), out=out, as_json=True)
    return console, out


def _outputs(out: io.StringIO) -> list[dict[str, str]]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


def _paste(console: Console, lines: list[str]) -> None:
    console.run(["/paste", *lines, "/end"])


def test_a_pasted_log_over_the_limit_becomes_an_artifact_card_instead_of_an_error(
    runtime: Runtime,
) -> None:
    log = ["here is the api-3 log from this morning:", *service_log(500, secret_at=200)]
    assert len("\n".join(log)) > 47_000 > runtime.settings.max_message_chars
    console, out = _console(runtime)
    _paste(console, log)

    outputs = _outputs(out)
    assert [o for o in outputs if o["type"] == "error"] == []
    assert [o["type"] for o in outputs][:1] == ["reply"]
    with runtime.db.session() as s:
        [message] = s.exec(select(SessionEvent).where(SessionEvent.kind == EventKind.MESSAGE))
        stored = s.exec(select(Artifact).order_by(col(Artifact.created_at))).all()
    # The log carries the card (what the person wrote, then the card); the store, the paste.
    assert message.text.startswith("here is the api-3 log from this morning:\n[artifact ")
    assert "log: 500 lines" in message.text
    assert len(message.text) < runtime.settings.max_message_chars
    [artifact] = stored
    assert "req-000499" in artifact.content
    assert len(artifact.content) > 46_000
    # Through the same gate as a message: the password is nowhere.
    assert "Tr0ub4dor" not in artifact.content + message.text
    assert "[secret removed: password]" in artifact.content


def test_a_long_text_that_is_prose_is_still_refused_with_the_reason(runtime: Runtime) -> None:
    sentence = (
        "The quarterly review went well and everyone agreed that the new process for "
        "handling customer feedback should continue into the next quarter without changes."
    )
    essay = [sentence] * 300
    console, out = _console(runtime)
    _paste(console, essay)

    [error] = [o for o in _outputs(out) if o["type"] == "error"]
    assert "CAIRN_MAX_MESSAGE_CHARS" in error["text"]
    assert "does not read as a log" in error["text"]
    with runtime.db.session() as s:
        assert s.exec(select(SessionEvent)).first() is None
        assert s.exec(select(Artifact)).first() is None
