"""The real Slack frontend (Bolt app, slack_sdk, pipeline, in-process workers) wired to the local
Slack stand-ins, for integration and end-to-end tests."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import func
from sqlmodel import select

from cairn.bot.pipeline import Pipeline
from cairn.bot.slack import SlackFrontend
from cairn.core.settings import load_settings
from cairn.db.models import EventStatus, OutboundMessage, OutboundStatus, SessionEvent
from tests.support.slack_api import (
    APP_TOKEN,
    BOT_TOKEN,
    CLIENT_ID,
    CLIENT_SECRET,
    SlackAPI,
    SocketModeServer,
    event_payload,
    signed_headers,
)

__all__ = ["SIGNING_SECRET", "Harness", "running_slack"]

SIGNING_SECRET = "test-signing-secret"


@dataclass
class Harness:
    """A running Slack frontend and the stand-ins it talks to."""

    api: SlackAPI
    socket: SocketModeServer | None
    frontend: SlackFrontend
    pipeline: Pipeline

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.frontend.http_port}"

    def post(
        self,
        payload: dict[str, Any],
        *,
        secret: str = SIGNING_SECRET,
        timestamp: int | None = None,
        retry_num: int | None = None,
    ) -> tuple[int, float]:
        """POST a signed Events API request; returns (status, seconds until the answer)."""
        body = json.dumps(payload).encode()
        headers = signed_headers(secret, body, timestamp=timestamp)
        if retry_num is not None:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        return self.post_raw(body, headers)

    def click(self, payload: dict[str, Any], *, secret: str = SIGNING_SECRET) -> tuple[int, float]:
        """POST an interactivity payload as Slack does: a form with ``payload=<json>``,
        signed; returns (status, seconds until the answer)."""
        body = urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()
        headers = signed_headers(secret, body)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        return self.post_raw(body, headers)

    def post_raw(self, body: bytes, headers: dict[str, str]) -> tuple[int, float]:
        """POST ``body`` to /slack/events as is; returns (status, seconds until the answer)."""
        status, took, _ = self.exchange(body, headers)
        return status, took

    def exchange(self, body: bytes, headers: dict[str, str]) -> tuple[int, float, bytes]:
        """POST ``body`` to /slack/events; returns (status, seconds, response body)."""
        request = urllib.request.Request(  # noqa: S310 - a loopback http:// URL
            self.base + "/slack/events", data=body, headers=headers, method="POST"
        )
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
                return response.status, time.monotonic() - started, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, time.monotonic() - started, exc.read()

    def deliver(self, event: dict[str, Any], **payload_args: Any) -> None:
        """Deliver ``event`` over whichever transport runs (acknowledged within 3 s)."""
        payload = event_payload(event, **payload_args)
        if self.socket is not None:
            envelope = self.socket.send(payload)
            assert self.socket.ack_delay(envelope) < 3.0
        else:
            status, took = self.post(payload)
            assert status == 200
            assert took < 3.0

    def health(self) -> tuple[int, dict[str, Any]]:
        try:
            with urllib.request.urlopen(self.base + "/healthz", timeout=5) as response:  # noqa: S310
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def settle(self, timeout: float = 20.0) -> None:
        """Wait until every event is taken in, handled, and everything it said is posted."""
        deadline = time.monotonic() + timeout
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            if self._quiet():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 0.3:
                    return
            else:
                quiet_since = None
            time.sleep(0.02)
        raise AssertionError("the Slack frontend did not settle")

    def _quiet(self) -> bool:
        if not self.frontend.inbound.idle() or self.frontend.delivery.busy():
            return False
        with self.pipeline.rt.db.session() as s:
            pending = s.exec(
                select(func.count())
                .select_from(SessionEvent)
                .where(SessionEvent.status == EventStatus.PENDING)
            ).one()
            unsent = s.exec(
                select(func.count())
                .select_from(OutboundMessage)
                .where(OutboundMessage.status == OutboundStatus.PENDING)
            ).one()
        return pending == 0 and unsent == 0


@contextlib.contextmanager
def running_slack(
    monkeypatch: pytest.MonkeyPatch,
    *,
    socket_mode: bool = False,
    oauth: bool = False,
    team: str = "T0001",
    **env: str,
) -> Iterator[Harness]:
    """The Slack frontend of ``cairn run`` on the stand-ins, over Socket Mode or HTTP."""
    with contextlib.ExitStack() as stack:
        api = stack.enter_context(SlackAPI(team=team))
        socket = stack.enter_context(SocketModeServer()) if socket_mode else None
        api.socket = socket
        if oauth:
            monkeypatch.setenv("SLACK_CLIENT_ID", CLIENT_ID)
            monkeypatch.setenv("SLACK_CLIENT_SECRET", CLIENT_SECRET)
        else:
            monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
        monkeypatch.setenv("SLACK_API_URL", api.base_url)
        monkeypatch.setenv("CAIRN_HTTP_HOST", "127.0.0.1")
        monkeypatch.setenv("CAIRN_HTTP_PORT", "0")
        if socket_mode:
            monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
        else:
            monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING_SECRET)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        settings = load_settings()
        pipeline = Pipeline.open(settings)
        stack.callback(pipeline.close)
        frontend = SlackFrontend(pipeline, settings)
        stop = threading.Event()
        thread = threading.Thread(target=frontend.run, args=(stop,), daemon=True)
        thread.start()
        stack.callback(thread.join, 20)
        stack.callback(stop.set)
        assert frontend.ready.wait(15), "the Slack frontend did not start"
        if socket is not None:
            api.wait_for(socket.connected, what="the Socket Mode connection")
        yield Harness(api, socket, frontend, pipeline)
