"""Logging set-up: readable lines on a terminal, JSON lines elsewhere, secrets never written.

Every record carries the thread and event it concerns (set with :func:`bind`), so one grep
follows a message from the frontend through the queue to the reply.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TextIO

from cairn.core.gate import gate
from cairn.core.redact import mask_urls

__all__ = ["RedactingFilter", "Throttle", "bind", "configure_logging"]

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "cairn_log", default=None
)


def _fields() -> dict[str, Any]:
    return _context.get() or {}


@contextmanager
def bind(**fields: Any) -> Iterator[None]:
    """Add ``fields`` (thread, event, session...) to every record logged inside the block."""
    token = _context.set({**_fields(), **fields})
    try:
        yield
    finally:
        _context.reset(token)


class RedactingFilter(logging.Filter):
    """Masks known secret values, the credentials in URLs, and passes every record's message,
    exception and stack through the gate (:func:`cairn.core.gate.gate`: every credential it
    finds masked, invisible characters gone), whatever code logged them. Identifiers (Matrix
    room, event, device and session ids, Slack ids, UUIDs, git hashes) stay readable."""

    def __init__(self, secrets: Sequence[str] = ()) -> None:
        super().__init__()
        self._secrets = [s for s in secrets if len(s) >= 6]

    def redact(self, text: str) -> str:
        """``text`` with the configured secrets and URL passwords replaced by ``***``, and
        other credentials by ``[secret removed: <kind>]``."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return gate(mask_urls(text)).text

    def filter(self, record: logging.LogRecord) -> bool:
        message = self.redact(record.getMessage())
        record.msg, record.args = message, None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = self.redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        record.cairn_fields = _fields()
        return True


class _JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **getattr(record, "cairn_fields", {}),
        }
        if record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False, default=str)


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = getattr(record, "cairn_fields", {})
        if fields:
            line += " " + " ".join(f"{k}={v}" for k, v in fields.items())
        return line


def configure_logging(
    level: str,
    *,
    secrets: Sequence[str] = (),
    stream: TextIO | None = None,
    as_json: bool | None = None,
) -> None:
    """Send Cairn's logs to ``stream`` (stderr): JSON when it is not a terminal."""
    stream = stream or sys.stderr
    if as_json is None:
        as_json = not stream.isatty()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter(secrets))
    handler.setFormatter(
        _JSONFormatter()
        if as_json
        else _TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_cairn", False):
            root.removeHandler(old)
    handler._cairn = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)


class Throttle:
    """Lets a repeated warning through at most once per ``seconds`` and counts the rest, so a
    lasting fault (an index down for an hour) is reported without a line per message."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._next = 0.0
        self._held = 0
        self._lock = threading.Lock()

    def allow(self) -> int | None:
        """None to hold this one back; else how many were held back since the last let through."""
        now = time.monotonic()
        with self._lock:
            if now < self._next:
                self._held += 1
                return None
            held, self._held, self._next = self._held, 0, now + self._seconds
            return held
