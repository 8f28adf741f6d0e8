"""An event the Slack frontend can't put on disk is not acknowledged, so Slack sends it again.

The real Bolt app over HTTP and Socket Mode, the Web API stand-in, in-process workers; the
spool's segment is pointed at /dev/full for a moment, as a full disk would be.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest

from cairn.bot.spool import Spool
from tests.integration.test_slack_frontend import CHANNEL, mention
from tests.support.slack_api import event_payload
from tests.support.slack_harness import Harness, running_slack


@contextlib.contextmanager
def disk_full(spool: Spool) -> Iterator[None]:
    """Every write to ``spool``'s segment fails with ENOSPC until the block ends."""
    full = os.open("/dev/full", os.O_WRONLY)
    saved = os.dup(spool._fd)
    os.dup2(full, spool._fd)
    try:
        yield
    finally:
        os.dup2(saved, spool._fd)
        os.close(saved)
        os.close(full)


def _remembered(slack: Harness) -> list[str]:
    return [
        str(p["text"])
        for p in slack.api.posts(CHANNEL)
        if str(p.get("text", "")).startswith("remembered:")
    ]


def test_over_http_a_full_disk_answers_503_and_slacks_retry_is_taken_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with running_slack(monkeypatch) as slack:
        payload = event_payload(mention("remember the spool test fact"), event_id="EvSPOOL1")
        with disk_full(slack.frontend.spool):
            status, _ = slack.post(payload)
        assert status == 503  # not acknowledged: Slack will send it again
        assert "not acknowledging Slack event EvSPOOL1" in caplog.text
        status, _ = slack.post(payload, retry_num=1)
        assert status == 200
        slack.settle()
        assert _remembered(slack) == ["remembered: the spool test fact"]
        status, _ = slack.post(payload, retry_num=2)  # a late retry of an event now taken
        assert status == 200
        slack.settle()
        assert _remembered(slack) == ["remembered: the spool test fact"]


def test_over_socket_mode_a_full_disk_leaves_the_envelope_unacknowledged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with running_slack(monkeypatch, socket_mode=True) as slack:
        assert slack.socket is not None
        payload = event_payload(mention("remember the socket spool fact"), event_id="EvSPOOL2")
        with disk_full(slack.frontend.spool):
            envelope = slack.socket.send(payload)
            with pytest.raises(AssertionError, match="not acknowledged"):
                slack.socket.ack_delay(envelope, timeout=2)
        retry = slack.socket.send(payload, retry_attempt=1)
        assert slack.socket.ack_delay(retry) < 3.0
        slack.settle()
        assert _remembered(slack) == ["remembered: the socket spool fact"]
