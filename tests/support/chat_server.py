"""A stand-in for an OpenAI-compatible Chat Completions API on 127.0.0.1, for tests and local runs.

It is :class:`~tests.support.messages_server.MessagesServer` (scripted replies, then a responder;
recorded requests; delays, cut and broken streams) speaking the other wire format:
``POST /v1/chat/completions`` (also Azure's ``/openai/deployments/{name}/chat/completions``)
answered with a ``chat.completion`` or, when the request says ``"stream": true``, with
``chat.completion.chunk`` Server-Sent Events ending in ``data: [DONE]``; ``GET /v1/models``;
errors as ``{"error": {...}}``. The key comes as ``Authorization: Bearer`` or Azure's
``api-key``. Messages out of OpenAI's tool-call order (:func:`misplaced_tool_messages`) are
refused with a 400, as OpenAI refuses them. :func:`echo_responder` is a tiny model for
end-to-end runs; :class:`PrefixCache` wraps a responder to report usage as OpenAI's automatic
prompt cache would.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from cairn.core.tokens import count_tokens
from tests.support.messages_server import (
    MessagesServer,
    RecordedRequest,
    Reply,
    Responder,
    _Handler,
    text_message,
)

__all__ = [
    "STAND_INS",
    "ChatServer",
    "PrefixCache",
    "Reply",
    "chat_error",
    "chunks",
    "completion",
    "echo_responder",
    "misplaced_tool_messages",
    "model_env",
    "tool_call",
]

JSON = dict[str, Any]

DEFAULT_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}

# Text and tool arguments are cut into pieces this long, so a stream has several deltas.
_DELTA_CHARS = 8


def tool_call(name: str, arguments: Mapping[str, Any] | str, *, call_id: str | None = None) -> JSON:
    """A ``tool_calls`` entry; ``arguments`` as a string are sent as written (broken JSON too)."""
    written = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return {
        "id": call_id or f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": name, "arguments": written},
    }


def completion(
    text: str | None = None,
    *,
    calls: Sequence[JSON] = (),
    finish_reason: str | None = None,
    usage: Mapping[str, Any] | None = DEFAULT_USAGE,
    model: str | None = None,
) -> JSON:
    """A ``chat.completion`` with ``text`` and tool ``calls`` (see :func:`tool_call`).

    ``finish_reason`` defaults to ``tool_calls`` with calls, else ``stop``. ``usage=None`` leaves
    usage out, as some servers do. Without ``model`` the server fills in the one asked for.
    """
    message: JSON = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = list(calls)
    body: JSON = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if calls else "stop"),
                "logprobs": None,
            }
        ],
    }
    if usage is not None:
        body["usage"] = dict(usage)
    if model is not None:
        body["model"] = model
    return body


def chat_error(error_type: str, message: str) -> JSON:
    """The JSON body an OpenAI-compatible server sends with an error status."""
    return {"error": {"message": message, "type": error_type, "param": None, "code": None}}


def chunks(body: JSON, *, include_usage: bool) -> Iterator[JSON]:
    """The ``chat.completion.chunk`` objects a server streams for ``body``, in order.

    The role comes first, then the text in pieces, then each tool call (its id and name, then
    its arguments in pieces), then the finish reason; with ``include_usage`` (the request's
    ``stream_options``) a last chunk with no choices carries the usage.
    """
    head: JSON = {k: body[k] for k in ("id", "created", "model") if k in body}
    choice = body["choices"][0]
    message = choice["message"]

    def chunk(delta: JSON, finish: str | None = None) -> JSON:
        return {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(message.get("content") or ""):
        yield chunk({"content": piece})
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        opening = {"name": function["name"], "arguments": ""}
        yield chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                     "function": opening}]})  # fmt: skip
        for piece in _pieces(function["arguments"]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, choice["finish_reason"])
    if include_usage and "usage" in body:
        yield {**head, "object": "chat.completion.chunk", "choices": [], "usage": body["usage"]}


def _pieces(text: str) -> list[str]:
    return [text[i : i + _DELTA_CHARS] for i in range(0, len(text), _DELTA_CHARS)]


class ChatServer(MessagesServer):
    """A threaded Chat Completions server on loopback; use it as a context manager.

    Scripted as :class:`MessagesServer` is: :meth:`push` a :class:`Reply` whose body is a
    :func:`completion`, or use the ``push_*`` helpers here. :attr:`models` is what
    ``GET /v1/models`` lists. A streamed :class:`Reply`'s ``stream_cut`` counts chunks;
    ``stream_error`` is sent as a ``data: {"error": ...}`` chunk after them.
    """

    _unscripted = "ChatServer has no scripted reply left and no responder"

    default_models = ("gpt-test",)

    @property
    def base_url(self) -> str:
        """What to pass as OPENAI_BASE_URL (the SDK's ``base_url``)."""
        return f"{super().base_url}/v1"

    @property
    def endpoint(self) -> str:
        """What to pass as AZURE_OPENAI_ENDPOINT."""
        return super().base_url

    def push_text(
        self,
        text: str,
        *,
        usage: Mapping[str, Any] | None = DEFAULT_USAGE,
        stop_reason: str = "stop",
    ) -> None:
        """Queue a text answer (``usage=None``: the server reports none)."""
        self.push(Reply(body=completion(text, usage=usage, finish_reason=stop_reason)))

    def push_calls(self, *calls: JSON, text: str | None = None) -> list[str]:
        """Queue an answer asking for ``calls`` (see :func:`tool_call`); returns their ids."""
        self.push(Reply(body=completion(text, calls=calls)))
        return [str(call["id"]) for call in calls]

    def push_tool_use(
        self,
        name: str,
        tool_input: Mapping[str, Any],
        *,
        text: str = "",
        tool_id: str | None = None,
        usage: Mapping[str, Any] | None = DEFAULT_USAGE,
    ) -> str:
        """Queue an answer asking for tool ``name`` with ``tool_input``; returns the call's id.

        :meth:`MessagesServer.push_tool_use` with the same arguments, so one script drives
        either stand-in (``text``, if any, comes before the call, as the ``content``).
        """
        call = tool_call(name, tool_input, call_id=tool_id)
        self.push(Reply(body=completion(text or None, calls=[call], usage=usage)))
        return str(call["id"])

    def push_error(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        """Queue an error answer, with a ``retry-after`` header if given."""
        kind = error_type or ("rate_limit_exceeded" if status == 429 else "server_error")
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        self.push(Reply(status, chat_error(kind, message or kind.replace("_", " ")), headers))

    @property
    def chat_bodies(self) -> list[JSON]:
        """The bodies of the chat completion requests (not of ``GET /v1/models``)."""
        return [r.body for r in self.requests if r.method == "POST"]

    def _handler_class(self) -> type[_Handler]:
        return _ChatHandler

    def _error_body(self, error_type: str, message: str) -> JSON:
        return chat_error(error_type, message)

    def _accepts(self, headers: Mapping[str, str]) -> str | None:
        azure = headers.get("api-key")
        if azure is None:
            return super()._accepts(headers)
        return None if self.api_key is None or azure == self.api_key else "invalid api-key"

    def _answer(self, body: JSON) -> Reply:
        # Refused before any scripted reply is used: such a request never reaches the model.
        broken = misplaced_tool_messages(body.get("messages") or [])
        if broken is not None:
            return Reply(400, chat_error("invalid_request_error", broken))
        return super()._answer(body)


def misplaced_tool_messages(messages: Sequence[JSON]) -> str | None:
    """What OpenAI's API says, and answers 400 to, when ``messages`` break its tool-call order;
    None when they keep it: an assistant message's ``tool_calls`` must be followed at once by one
    ``tool`` message for each call id, and a ``tool`` message must answer such a call."""
    waiting: list[str] = []
    for message in messages:
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in waiting:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a"
                    " preceeding message with 'tool_calls'."
                )
            waiting.remove(message["tool_call_id"])
            continue
        if waiting:
            break
        if message.get("role") == "assistant":
            waiting = [str(call.get("id")) for call in message.get("tool_calls") or []]
    if waiting:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages responding"
            " to each 'tool_call_id'. The following tool_call_ids did not have response"
            f" messages: {', '.join(waiting)}"
        )
    return None


class _ChatHandler(_Handler):
    server_version = "ChatServer/1"

    @property
    def owner(self) -> ChatServer:
        return super().owner  # type: ignore[return-value]

    def _creates(self, path: str) -> bool:
        return path == "/v1/chat/completions" or (
            path.startswith("/openai/deployments/") and path.endswith("/chat/completions")
        )

    def do_GET(self) -> None:
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.owner._record(RecordedRequest("GET", self.path, headers, {}, time.monotonic()))
        if self.path.split("?")[0] not in {"/v1/models", "/openai/models"}:
            self._error(404, "not_found", f"Not found: {self.path}")
            return
        refusal = self.owner._accepts(headers)
        if refusal is not None:
            self._error(401, "invalid_api_key", refusal)
            return
        listed = [
            {"id": m, "object": "model", "created": 0, "owned_by": "tests"}
            for m in sorted(self.owner.models)
        ]
        self._send_json(200, {"object": "list", "data": listed})

    def _sse_lines(self, reply: Reply, request: JSON) -> list[str]:
        options = request.get("stream_options") or {}
        events = list(chunks(reply.body, include_usage=bool(options.get("include_usage"))))
        if reply.stream_cut is not None:
            events = events[: reply.stream_cut]
        if reply.stream_error is not None:
            events = [*events[: reply.stream_cut or 1], reply.stream_error]
        lines = [f"data: {json.dumps(event)}\n\n" for event in events]
        whole = reply.stream_cut is None and reply.stream_error is None
        return [*lines, "data: [DONE]\n\n"] if whole else lines


def echo_responder(request: JSON) -> Reply | JSON:
    """A tiny, predictable model for local runs and end-to-end tests.

    - the last messages are tool results: answers ``Done: <result>`` (``; ``-joined);
    - the user's text starts with "remember" and a tool whose name contains "remember" is
      offered: asks for that tool with ``{"text": <the rest of the message>}``;
    - otherwise: answers ``echo: <the text of the last user message>``.
    """
    messages = request.get("messages") or [{}]
    results: list[str] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        results.insert(0, str(message.get("content", "")))
    if results:
        return completion("Done: " + "; ".join(results))
    text = str(messages[-1].get("content") or "").strip()
    said = text.split(": ", 1)[-1]  # Cairn's messages arrive as "author: text"
    tool = next(
        (
            t["function"]["name"]
            for t in request.get("tools") or []
            if "remember" in str(t.get("function", {}).get("name"))
        ),
        None,
    )
    if tool is not None and said.lower().startswith("remember"):
        note = said[len("remember") :].lstrip(" :,-").strip()
        return completion("I'll remember that.", calls=[tool_call(tool, {"text": note})])
    return completion(f"echo: {text}")


class PrefixCache:
    """A responder whose answers report usage as OpenAI's automatic prompt cache does.

    The prompt is the request's tools, then its messages, in order, as text (a message's text
    content as it is, any other message as JSON). Its tokens are counted as Cairn counts them
    (:func:`cairn.core.tokens.count_tokens`); ``cached_tokens`` is the longest prefix, to the
    character, shared with an earlier prompt of :attr:`minimum` tokens or more, counted and
    rounded down to the minimum plus whole steps of 128 tokens (0 under the minimum). Prompts
    are remembered for ever: a test's requests are minutes apart at most.
    """

    minimum = 1024
    step = 128

    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self._seen: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, request: JSON) -> Reply | JSON:
        answer = self.responder(request)
        prompt = prompt_text(request)
        tokens = count_tokens(prompt)
        with self._lock:
            shared = max((_shared_chars(prompt, seen) for seen in self._seen), default=0)
            if tokens >= self.minimum:
                self._seen.append(prompt)
        matched = count_tokens(prompt[:shared]) if shared else 0
        cached = 0
        if matched >= self.minimum:
            cached = self.minimum + (matched - self.minimum) // self.step * self.step
        usage = {
            "prompt_tokens": tokens,
            "completion_tokens": 5,
            "total_tokens": tokens + 5,
            "prompt_tokens_details": {"cached_tokens": min(cached, tokens)},
        }
        if isinstance(answer, Reply):
            return replace(answer, body={**answer.body, "usage": usage})
        return {**answer, "usage": usage}


def prompt_text(request: JSON) -> str:
    """The prompt of a chat completion request as one text, in the order the model reads it."""
    parts = [json.dumps(tool, sort_keys=True) for tool in request.get("tools") or []]
    for message in request.get("messages") or []:
        content = message.get("content")
        plain = isinstance(content, str) and set(message) == {"role", "content"}
        parts.append(content if plain else json.dumps(message, sort_keys=True))
    return "\n".join(parts)


def _shared_chars(a: str, b: str) -> int:
    """How many characters ``a`` and ``b`` share from their start."""
    low, high = 0, min(len(a), len(b))
    while low < high:  # the longest n with a[:n] == b[:n], by halving
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


STAND_INS: dict[str, tuple[type[MessagesServer], Callable[[str], JSON]]] = {
    "anthropic": (MessagesServer, text_message),
    "openai": (ChatServer, completion),
}
"""Each provider's stand-in and how it writes a plain text answer, for the end-to-end suites
that run over both adapters."""


def model_env(provider: str, server: MessagesServer) -> dict[str, str]:
    """The settings that point Cairn at ``server``, the stand-in of ``provider`` (key "k")."""
    if provider == "openai":
        return {
            "CAIRN_LLM": "openai",
            "OPENAI_API_KEY": "k",
            "OPENAI_BASE_URL": server.base_url,
            "CAIRN_MODEL": "gpt-test",
        }
    return {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": server.base_url}
