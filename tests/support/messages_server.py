"""A stand-in for the Anthropic Messages API on 127.0.0.1, for tests and local runs.

It speaks ``POST /v1/messages`` the way the real API does (a JSON message, or Server-Sent Events
when the request says ``"stream": true``), checks the API key, records every request, and answers
from a queue of scripted replies, then from an optional default responder. Run it on its own with
``python -m tests.support.messages_server --port N``; it then answers with :func:`echo_responder`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any, Self, cast

from tests.support.loopback import BackgroundServer

__all__ = [
    "DEFAULT_MODEL",
    "MessagesServer",
    "RecordedRequest",
    "Reply",
    "Responder",
    "echo_responder",
    "error_body",
    "main",
    "sse_events",
    "text_message",
    "tool_use_message",
]

JSON = dict[str, Any]

DEFAULT_MODEL = "claude-test"

# The error type the real API sends with each status, used when a test names only the status.
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

# Text and tool input are cut into pieces this long, so a stream has several deltas per block.
_DELTA_CHARS = 8


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer the server gives: a status, a JSON body, extra headers, and timing quirks.

    A 200 reply's ``body`` is a Messages API ``message`` object (see :func:`text_message`); it is
    sent as JSON, or as an SSE stream when the request asked to stream. Any other status sends
    ``body`` as JSON (see :func:`error_body`). ``delay`` holds the answer back that many seconds,
    to provoke client timeouts. On a streamed 200, ``stream_error`` sends ``message_start`` and
    then this ``error`` event instead of the content, as the API does when it fails mid-stream;
    ``stream_cut`` hangs up after that many events, as a dropped connection would, having first
    held the connection silent for ``stream_stall`` seconds, as a stalled one would. With both,
    the ``error`` event comes after the first ``stream_cut`` events instead of the hang-up.
    ``delta_delay`` waits that many seconds before each streamed event after the first, so the
    answer arrives as slowly as a model writes it.
    """

    status: int = 200
    body: JSON = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    stream_error: JSON | None = None
    stream_cut: int | None = None
    stream_stall: float = 0.0
    delta_delay: float = 0.0


Responder = Callable[[JSON], "Reply | JSON"]
"""Turns a request body into a Reply, or into a message object to send with status 200."""


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request as the server saw it; ``headers`` has lower-cased names."""

    method: str
    path: str
    headers: dict[str, str]
    body: JSON
    received_at: float
    """``time.monotonic()`` when the request arrived."""


def text_message(
    text: str,
    *,
    model: str | None = None,
    stop_reason: str = "end_turn",
    usage: Mapping[str, int] | None = None,
) -> JSON:
    """A Messages API ``message`` holding one text block.

    Without ``model`` the server fills in the model the request named.
    """
    return _message([{"type": "text", "text": text}], model, stop_reason, usage)


def tool_use_message(
    name: str,
    tool_input: Mapping[str, Any],
    *,
    text: str = "",
    tool_id: str | None = None,
    model: str | None = None,
    usage: Mapping[str, int] | None = None,
) -> JSON:
    """A ``message`` asking for tool ``name`` with ``tool_input``, after optional ``text``.

    Its ``stop_reason`` is ``tool_use``; the block's id is ``tool_id`` or a fresh ``toolu_…``.
    """
    content: list[JSON] = [{"type": "text", "text": text}] if text else []
    content.append(
        {
            "type": "tool_use",
            "id": tool_id or f"toolu_{uuid.uuid4().hex[:24]}",
            "name": name,
            "input": dict(tool_input),
        }
    )
    return _message(content, model, "tool_use", usage)


def error_body(error_type: str, message: str) -> JSON:
    """The JSON body the API sends with an error status."""
    return {"type": "error", "error": {"type": error_type, "message": message}}


def _message(
    content: list[JSON], model: str | None, stop_reason: str, usage: Mapping[str, int] | None
) -> JSON:
    message: JSON = {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            **(usage or {}),
        },
    }
    if model is not None:
        message["model"] = model
    return message


def sse_events(message: JSON) -> Iterator[tuple[str, JSON]]:
    """The ``(event, data)`` pairs the API streams for ``message``, in order.

    Input and cache token counts arrive in ``message_start``; ``message_delta`` carries the stop
    reason and the final output token count, as the real API does.
    """
    usage = dict(message.get("usage") or {})
    started = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": min(1, int(usage.get("output_tokens", 0)))},
    }
    yield "message_start", {"type": "message_start", "message": started}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(message.get("content") or []):
        yield from _block_events(index, block)
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": message.get("stop_reason"),
                "stop_sequence": message.get("stop_sequence"),
            },
            "usage": {"output_tokens": int(usage.get("output_tokens", 0))},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _block_events(index: int, block: JSON) -> Iterator[tuple[str, JSON]]:
    def start(content_block: JSON) -> tuple[str, JSON]:
        return "content_block_start", {
            "type": "content_block_start",
            "index": index,
            "content_block": content_block,
        }

    def delta(payload: JSON) -> tuple[str, JSON]:
        return "content_block_delta", {
            "type": "content_block_delta",
            "index": index,
            "delta": payload,
        }

    if block.get("type") == "text":
        yield start({"type": "text", "text": ""})
        for piece in _pieces(str(block.get("text", ""))):
            yield delta({"type": "text_delta", "text": piece})
    elif block.get("type") == "tool_use":
        yield start({**block, "input": {}})
        # The API opens every tool input with an empty fragment before the JSON arrives.
        yield delta({"type": "input_json_delta", "partial_json": ""})
        for piece in _pieces(json.dumps(block.get("input") or {})):
            yield delta({"type": "input_json_delta", "partial_json": piece})
    else:
        yield start(block)
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def _pieces(text: str) -> list[str]:
    return [text[i : i + _DELTA_CHARS] for i in range(0, len(text), _DELTA_CHARS)]


class MessagesServer(BackgroundServer):
    """A threaded Messages API server on loopback; use it as a context manager.

    ``api_key`` is the only key accepted (sent as ``x-api-key`` or ``Authorization: Bearer``);
    ``None`` accepts any non-empty key. Each request takes the oldest scripted reply; when none
    is left it goes to ``responder``, and without one the server answers 400 naming the problem.
    """

    default_models: tuple[str, ...] = ("claude-sonnet-4-6",)

    def __init__(
        self,
        api_key: str | None = "test-key",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        responder: Responder | None = None,
    ) -> None:
        self.api_key = api_key
        self.responder = responder
        # Model ids GET /v1/models/{id} knows.
        self.models: set[str] = set(self.default_models)
        self._address = (host, port)
        self._lock = threading.Lock()
        self._replies: deque[Reply] = deque()
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()

    # Lifecycle

    def start(self) -> Self:
        """Bind (a free port when ``port`` is 0) and serve in a background thread."""
        if self._httpd is not None:
            raise RuntimeError("MessagesServer is already running")
        self._stopping.clear()
        httpd = _HTTPServer(self._address, self._handler_class())
        httpd.owner = self
        self._serve(httpd, type(self).__name__)
        return self

    def stop(self) -> None:
        """Stop serving and release the port; delayed replies still pending are abandoned."""
        if self._httpd is not None:
            self._stopping.set()
        self._shutdown()

    @property
    def port(self) -> int:
        """The port the server listens on."""
        if self._httpd is None:
            raise RuntimeError("MessagesServer is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """What to pass as the SDK's ``base_url`` (or ANTHROPIC_BASE_URL)."""
        return f"http://{self._address[0]}:{self.port}"

    # Scripting

    def push(self, reply: Reply) -> None:
        """Queue ``reply`` as the answer to a future request, after those already queued."""
        with self._lock:
            self._replies.append(reply)

    def push_text(
        self, text: str, *, usage: Mapping[str, int] | None = None, stop_reason: str = "end_turn"
    ) -> None:
        """Queue a text answer."""
        self.push(Reply(body=text_message(text, usage=usage, stop_reason=stop_reason)))

    def push_tool_use(
        self,
        name: str,
        tool_input: Mapping[str, Any],
        *,
        text: str = "",
        tool_id: str | None = None,
        usage: Mapping[str, int] | None = None,
    ) -> str:
        """Queue an answer asking for tool ``name``; returns the ``tool_use`` block's id."""
        body = tool_use_message(name, tool_input, text=text, tool_id=tool_id, usage=usage)
        self.push(Reply(body=body))
        return str(body["content"][-1]["id"])

    def push_error(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        """Queue an error answer in the API's JSON shape, with a ``retry-after`` header if given.

        ``error_type`` defaults to the one the API sends with ``status`` (e.g. 529 ->
        ``overloaded_error``).
        """
        kind = error_type or _ERROR_TYPES.get(status, "api_error")
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        self.push(Reply(status, error_body(kind, message or kind.replace("_", " ")), headers))

    def push_stream_error(
        self, error_type: str = "overloaded_error", message: str = "Overloaded"
    ) -> None:
        """Queue a streamed answer that fails after ``message_start`` with an ``error`` event."""
        self.push(Reply(body=text_message(""), stream_error=error_body(error_type, message)))

    # Inspection

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, oldest first (rejected ones included)."""
        with self._lock:
            return list(self._requests)

    @property
    def bodies(self) -> list[JSON]:
        """The JSON bodies of :attr:`requests`."""
        return [r.body for r in self.requests]

    @property
    def pending(self) -> int:
        """How many scripted replies have not been used yet."""
        with self._lock:
            return len(self._replies)

    # What a server for another wire format changes

    _unscripted = "MessagesServer has no scripted reply left and no responder"

    def _handler_class(self) -> type[_Handler]:
        return _Handler

    def _error_body(self, error_type: str, message: str) -> JSON:
        return error_body(error_type, message)

    # Called from the handler threads

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _accepts(self, headers: Mapping[str, str]) -> str | None:
        """None when the key is right, else the reason it is not."""
        presented = headers.get("x-api-key")
        if not presented:
            scheme, _, token = headers.get("authorization", "").partition(" ")
            presented = token.strip() if scheme.lower() == "bearer" else ""
        if not presented:
            return "x-api-key header is required"
        if self.api_key is not None and presented != self.api_key:
            return "invalid x-api-key"
        return None

    def _answer(self, body: JSON) -> Reply:
        with self._lock:
            scripted = self._replies.popleft() if self._replies else None
        if scripted is not None:
            reply = scripted
        elif self.responder is not None:
            answered = self.responder(body)
            reply = answered if isinstance(answered, Reply) else Reply(body=answered)
        else:
            return Reply(400, self._error_body("invalid_request_error", self._unscripted))
        if reply.status == 200 and "model" not in reply.body:
            reply = replace(reply, body={**reply.body, "model": body.get("model", DEFAULT_MODEL)})
        return reply


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: MessagesServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout tests) breaks the pipe; that is expected, not news.
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "MessagesServer/1"

    @property
    def owner(self) -> MessagesServer:
        return cast(_HTTPServer, self.server).owner

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.owner._record(
            RecordedRequest("POST", self.path, headers, body or {}, time.monotonic())
        )
        try:
            self._respond(headers, body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_GET(self) -> None:
        # GET /v1/models/{id}: what a health check uses to test the key and the model name.
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.owner._record(RecordedRequest("GET", self.path, headers, {}, time.monotonic()))
        path = self.path.split("?", 1)[0]
        if not path.startswith("/v1/models/"):
            self._send_json(404, error_body("not_found_error", f"Not found: {self.path}"))
            return
        refusal = self.owner._accepts(headers)
        if refusal is not None:
            self._send_json(401, error_body("authentication_error", refusal))
            return
        model = path.removeprefix("/v1/models/")
        if model not in self.owner.models:
            self._send_json(404, error_body("not_found_error", f"model: {model}"))
            return
        self._send_json(
            200,
            {
                "type": "model",
                "id": model,
                "display_name": model,
                "created_at": "2026-01-01T00:00:00Z",
            },
        )

    def _creates(self, path: str) -> bool:
        """Whether ``path`` (without its query) is where answers are asked for."""
        return path == "/v1/messages"

    def _error(self, status: int, error_type: str, message: str) -> None:
        self._send_json(status, self.owner._error_body(error_type, message))

    def _respond(self, headers: dict[str, str], body: JSON | None) -> None:
        if not self._creates(self.path.split("?")[0]):
            self._error(404, "not_found_error", f"Not found: {self.path}")
            return
        refusal = self.owner._accepts(headers)
        if refusal is not None:
            self._error(401, "authentication_error", refusal)
            return
        if not isinstance(body, dict):
            self._error(400, "invalid_request_error", "body is not a JSON object")
            return
        reply = self.owner._answer(body)
        if reply.delay and self.owner._stopping.wait(reply.delay):
            self.close_connection = True
            return
        if reply.status == 200 and body.get("stream"):
            self._send_sse(reply, self._sse_lines(reply, body))
        else:
            self._send_json(reply.status, reply.body, reply.headers)

    def _send_json(self, status: int, body: JSON, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _sse_lines(self, reply: Reply, request: JSON) -> list[str]:
        """The stream for ``reply``, one SSE event a string, cut or broken as ``reply`` says."""
        events = list(sse_events(reply.body))
        if reply.stream_cut is not None:
            events = events[: reply.stream_cut]
        if reply.stream_error is not None:
            events = [*events[: reply.stream_cut or 1], ("error", reply.stream_error)]
        return [f"event: {event}\ndata: {json.dumps(data)}\n\n" for event, data in events]

    def _send_sse(self, reply: Reply, lines: list[str]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        # Without a length the end of the stream is the end of the connection.
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        for number, line in enumerate(lines):
            if number and reply.delta_delay and self.owner._stopping.wait(reply.delta_delay):
                return
            self.wfile.write(line.encode())
            self.wfile.flush()
        if reply.stream_stall:
            self.owner._stopping.wait(reply.stream_stall)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests read requests from MessagesServer.requests, not from stderr


def echo_responder(request: JSON) -> Reply | JSON:
    """A tiny, predictable model for local runs and end-to-end tests.

    - the last user turn holds tool results: answers ``Done: <result>`` (``; ``-joined);
    - it starts with "remember" and a tool whose name contains "remember" is offered: asks for
      that tool with ``{"text": <the rest of the message>}``;
    - otherwise: answers ``echo: <the text of the last user turn>``.
    """
    messages = request.get("messages") or [{}]
    content = messages[-1].get("content") or []
    blocks: list[JSON] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else content
    )
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if results:
        return text_message("Done: " + "; ".join(_result_text(b) for b in results))
    text = " ".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text").strip()
    tool = next(
        (t["name"] for t in request.get("tools") or [] if "remember" in str(t.get("name"))), None
    )
    if tool is not None and text.lower().startswith("remember"):
        note = text[len("remember") :].lstrip(" :,-").strip()
        return tool_use_message(tool, {"text": note}, text="I'll remember that.")
    return text_message(f"echo: {text}", usage={"output_tokens": max(1, len(text) // 4)})


def _result_text(block: JSON) -> str:
    content = block.get("content", "")
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content)
    return str(content)


def main(argv: list[str] | None = None) -> int:
    """Serve :func:`echo_responder` until interrupted; prints ``listening on <url>`` first."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.messages_server",
        description="A local stand-in for the Anthropic Messages API.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--api-key", default="test-key", help="the only key accepted")
    parser.add_argument("--any-key", action="store_true", help="accept any non-empty key")
    args = parser.parse_args(argv)

    done = threading.Event()

    def finish(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, finish)
    api_key = None if args.any_key else args.api_key
    with MessagesServer(api_key, host=args.host, port=args.port, responder=echo_responder) as srv:
        print(f"listening on {srv.base_url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            done.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
