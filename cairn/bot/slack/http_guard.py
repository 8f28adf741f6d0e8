"""The guard in front of Bolt's HTTP handler: a request Slack could not have sent stops there.

Bolt's WSGI adapter reads a request's body before it checks the signature, and lets a
timestamp that is not a number, or a body it cannot read, escape as a 500 with a traceback.
The guard checks the signature first (401), then, for a signed request only, that the body is
what Slack sends (400): UTF-8, a JSON object or a form, its ``event`` an object with a type,
its block actions objects with an ``action_id``, and nothing Bolt's own reading trips on. Each
refusal is one line in the log. Bolt gets only signed requests it can read, and still checks
their signatures itself.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from slack_bolt.request import BoltRequest

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = ["MAX_AGE_SECONDS", "Refusal", "RequestGuard", "SlackRequest", "refusal"]

log = logging.getLogger(__name__)

# Slack's advice: a request signed longer ago than this may be a replay (Bolt uses the same).
MAX_AGE_SECONDS = 300
_TIMESTAMP_DIGITS = 12
# How a JSON body that is not an object is named in the log.
_JSON_KINDS: dict[type, str] = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}
# What reading a wrong-typed field raises inside Bolt (``"id" in 5``, ``"x".get``, ...).
_READING_ERRORS = (ValueError, TypeError, AttributeError, KeyError, IndexError)


@dataclass(frozen=True, slots=True)
class SlackRequest:
    """What the guard reads of a POST: its body, and the headers that sign and type it."""

    body: bytes
    timestamp: str
    signature: str
    content_type: str
    query: str = ""

    @classmethod
    def of(cls, environ: WSGIEnvironment) -> SlackRequest:
        """Read the request's body (once: put it back with :meth:`restore`) and headers."""
        try:
            length = max(int(environ.get("CONTENT_LENGTH") or 0), 0)
        except ValueError:
            length = 0  # waitress refuses such a header before the request gets here
        stream = environ.get("wsgi.input")
        return cls(
            body=stream.read(length) if stream is not None and length else b"",
            timestamp=str(environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP") or ""),
            signature=str(environ.get("HTTP_X_SLACK_SIGNATURE") or ""),
            content_type=str(environ.get("CONTENT_TYPE") or "").split(";")[0].strip(),
            query=str(environ.get("QUERY_STRING") or ""),
        )

    def restore(self, environ: WSGIEnvironment) -> None:
        """Put the body back into ``environ`` for the next reader (Bolt)."""
        environ["wsgi.input"] = io.BytesIO(self.body)
        environ["CONTENT_LENGTH"] = str(len(self.body))

    @property
    def is_json(self) -> bool:
        """Whether Bolt reads the body as JSON (else as a form): its own rule."""
        return self.content_type == "application/json" or self.body.startswith(b"{")

    @property
    def is_ssl_check(self) -> bool:
        """Whether this is Slack's certificate check (``ssl_check=1``), which it does not sign."""
        if self.is_json:
            return False
        form = dict(parse_qsl(self.body.decode("utf-8", errors="replace")))
        return form.get("ssl_check") == "1"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is refused: 401 (Slack did not sign it) or 400 (signed, but unreadable)."""

    status: int
    reason: str


class RequestGuard:
    """A WSGI app for ``POST /slack/events`` that answers what :func:`refusal` refuses, and
    hands every other request, its body intact, to ``handler`` (Bolt's)."""

    def __init__(
        self,
        handler: WSGIApplication,
        signing_secret: str,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.handler = handler
        self.secret = signing_secret.encode()
        self.clock = clock

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """Answer the request; never raises for anything a client sends."""
        if environ.get("REQUEST_METHOD") != "POST":
            return self.handler(environ, start_response)
        request = SlackRequest.of(environ)
        if request.is_ssl_check:
            # Unsigned, and it asks for a 200 and nothing else: Bolt need not see it.
            return _answer(start_response, HTTPStatus.OK, b"")
        refused = refusal(request, secret=self.secret, now=self.clock())
        if refused is not None:
            log.warning(
                "refused a Slack request from %s: %d, %s",
                environ.get("REMOTE_ADDR") or "?",
                refused.status,
                refused.reason,
            )
            error = "invalid request" if refused.status == 401 else "malformed request"
            answer = json.dumps({"error": error}).encode()
            return _answer(start_response, HTTPStatus(refused.status), answer, json_body=True)
        request.restore(environ)
        return self.handler(environ, start_response)


def refusal(request: SlackRequest, *, secret: bytes, now: float) -> Refusal | None:
    """Why Slack could not have sent ``request``, or None when Bolt may have it.

    The signature is checked before anything in the body is read: whoever lacks the secret
    learns nothing but 401.
    """
    return _unsigned(request, secret, now) or _unreadable(request)


def _unsigned(request: SlackRequest, secret: bytes, now: float) -> Refusal | None:
    timestamp, signature = request.timestamp, request.signature
    if not (timestamp and signature):
        return Refusal(401, "not signed")
    # Unix seconds; the length cap keeps int() clear of its limit on digits (ValueError).
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= _TIMESTAMP_DIGITS):
        return Refusal(401, "its timestamp is not a number of seconds")
    age = now - int(timestamp)
    if abs(age) > MAX_AGE_SECONDS:
        return Refusal(401, f"its timestamp is {age:.0f}s off")
    # Over the bytes, not text as slack_sdk's verifier does: a body that is not UTF-8 is
    # still signed (or not) by Slack, and only then is it worth a 400.
    base = b"v0:" + timestamp.encode() + b":" + request.body
    expected = "v0=" + hmac.new(secret, base, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), signature.encode()):
        return Refusal(401, "bad signature")
    return None


def _unreadable(request: SlackRequest) -> Refusal | None:
    try:
        text = request.body.decode("utf-8")
    except UnicodeDecodeError:
        return Refusal(400, "its body is not UTF-8")
    try:
        payload = _payload(text, json_body=request.is_json)
    except ValueError as exc:
        return Refusal(400, f"its JSON does not parse ({exc})")
    wrong = _misshapen(payload)
    if wrong is not None:
        return Refusal(400, wrong)
    try:
        # What Bolt's handler does first: it must not raise there, where nothing catches it.
        BoltRequest(body=text, query=request.query, headers={"content-type": request.content_type})
    except _READING_ERRORS as exc:
        return Refusal(400, f"Bolt cannot read it ({type(exc).__name__})")
    return None


def _payload(text: str, *, json_body: bool) -> object:
    """The body as Slack sends it: JSON (Events API), a form's ``payload`` JSON
    (interactivity), or the form itself (slash commands). Raises ValueError for bad JSON."""
    if json_body:
        return json.loads(text)
    form = dict(parse_qsl(text, keep_blank_values=True))
    return json.loads(form["payload"]) if "payload" in form else form


def _misshapen(payload: object) -> str | None:
    """What in ``payload`` is not as Slack sends it and Bolt's routing reads it, if anything."""
    if not isinstance(payload, dict):
        return f"its payload is a JSON {_JSON_KINDS.get(type(payload), 'value')}, not an object"
    if not isinstance(payload.get("type"), str) and "command" not in payload:
        return "its payload has no type and is not a slash command"
    if "event" in payload:
        event = payload["event"]
        if not isinstance(event, dict):
            return "its event is not an object"
        if not isinstance(event.get("type"), str):
            return "its event has no type"
    if payload.get("type") == "block_actions":
        actions = payload.get("actions")
        if not (
            isinstance(actions, list)
            and actions
            and all(isinstance(a, dict) and isinstance(a.get("action_id"), str) for a in actions)
        ):
            return "its actions are not a list of actions with an action_id"
        # Objects in interactivity payloads (the team is null for an org-wide install).
        if not isinstance(payload.get("user"), dict):
            return "its user is not an object"
        if not isinstance(payload.get("team"), dict | None):
            return "its team is not an object"
    return None


def _answer(
    start_response: StartResponse, status: HTTPStatus, body: bytes, *, json_body: bool = False
) -> list[bytes]:
    start_response(
        f"{status.value} {status.phrase}",
        [
            ("Content-Type", "application/json" if json_body else "text/plain"),
            ("Content-Length", str(len(body))),
        ],
    )
    return [body]
