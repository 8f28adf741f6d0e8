"""Logs: JSON off a terminal, ids of the thread and event on every line, secrets never."""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator

import pytest

from cairn.core.logs import Throttle, bind, configure_logging


@pytest.fixture(autouse=True)
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _capture(**kwargs: object) -> io.StringIO:
    stream = io.StringIO()
    configure_logging("INFO", stream=stream, **kwargs)  # type: ignore[arg-type]
    return stream


def test_logs_are_json_lines_with_the_bound_ids_when_not_on_a_terminal() -> None:
    stream = _capture()
    with bind(thread="T1", event=42):
        logging.getLogger("cairn.test").info("handled %s", "message")
    entry = json.loads(stream.getvalue().splitlines()[-1])
    assert entry["message"] == "handled message"
    assert (entry["thread"], entry["event"], entry["level"]) == ("T1", 42, "info")


def test_configured_secrets_and_token_shapes_are_masked() -> None:
    stream = _capture(secrets=["hunter2-very-secret"])
    log = logging.getLogger("cairn.test")
    log.warning("key is hunter2-very-secret")
    log.warning("token xoxb-1234-abcd and xapp-1-A0 leaked")
    log.warning("db postgresql://cairn:pa55word@db/cairn")
    text = stream.getvalue()
    for secret in ("hunter2-very-secret", "xoxb-1234-abcd", "xapp-1-A0", "pa55word"):
        assert secret not in text
    assert text.count("***") >= 2
    assert text.count("[secret removed: Slack token]") == 2


def test_every_credential_shape_the_detector_knows_is_masked_in_logs() -> None:
    stream = _capture()
    log = logging.getLogger("cairn.test")
    log.warning("retrying with AKIAQ3EXAMPLE7NTZ4RK and sk-ant-api03-Zq8vK2mX9pLw4RtY")
    log.warning("user said: the admin password is Tr0ub4dor")
    text = stream.getvalue()
    for secret in ("AKIAQ3EXAMPLE7NTZ4RK", "sk-ant-api03-Zq8vK2mX9pLw4RtY", "Tr0ub4dor"):
        assert secret not in text
    assert "[secret removed: password]" in text


def test_secrets_in_exceptions_are_masked_too() -> None:
    stream = _capture(secrets=["sk-test-secret-key"])
    try:
        raise RuntimeError("auth failed for sk-test-secret-key")
    except RuntimeError:
        logging.getLogger("cairn.test").exception("call failed")
    text = stream.getvalue()
    assert "sk-test-secret-key" not in text
    assert "auth failed for ***" in text


def test_a_terminal_gets_readable_lines() -> None:
    stream = _capture(as_json=False)
    with bind(thread="T9"):
        logging.getLogger("cairn.test").info("hello")
    line = stream.getvalue().splitlines()[-1]
    assert "INFO cairn.test: hello thread=T9" in line


def test_a_throttle_lets_one_warning_through_per_interval_and_counts_the_rest() -> None:
    throttle = Throttle(0.2)
    assert throttle.allow() == 0  # the first one goes through, nothing held before it
    assert [throttle.allow() for _ in range(3)] == [None, None, None]
    time.sleep(0.25)
    assert throttle.allow() == 3  # through again, saying how many were held back
    assert throttle.allow() is None
