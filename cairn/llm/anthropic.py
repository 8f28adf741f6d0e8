"""The Anthropic adapter of the LLM protocol, over the official SDK's Messages API.

It translates Cairn's requests and answers, marks the stable prefix for prompt caching, and turns
every SDK failure into LLMError / LLMAuthError. Retrying a request (429, 529, 5xx, timeouts,
dropped connections) is left to the SDK, which backs off and honours ``retry-after``; a stream
written into a :class:`~cairn.llm.types.TextSink` that breaks off once it has begun, which the SDK
no longer retries, is retried here with the same count and backoff.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, assert_never, cast

import anthropic
import httpx2
from anthropic import omit
from anthropic.lib.streaming import MessageStream
from anthropic.types import (
    CacheControlEphemeralParam,
    ContentBlockParam,
    MessageParam,
    MetadataParam,
    TextBlockParam,
    ToolParam,
)
from anthropic.types import Message as APIMessage

from cairn.core.errors import ConfigError, LLMAuthError, LLMError
from cairn.core.redact import mask_url
from cairn.llm.retries import (
    LONGEST_RETRY_AFTER,
    after_retries,
    backoff,
    refuse_long_retry_after,
    retry_after,
    retryable,
    timed_out,
)
from cairn.llm.types import (
    Block,
    ImageBlock,
    LLMRequest,
    LLMResponse,
    Message,
    TextBlock,
    TextSink,
    ToolResultBlock,
    ToolSpec,
    ToolUseBlock,
    Usage,
)

if TYPE_CHECKING:
    from cairn.core.settings import Settings

__all__ = ["DEFAULT_BASE_URL", "LONGEST_RETRY_AFTER", "AnthropicLLM", "prompt_body"]

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.anthropic.com"

_CACHED: CacheControlEphemeralParam = {"type": "ephemeral"}

_CUT_OFF = (
    "the answer from Anthropic was cut off before it was complete (no stop reason); try again"
)

# Error events the API sends mid-stream for what would be a retried status before it
# (500 api_error, 529 overloaded_error, 429 rate_limit_error, 504 timeout_error).
_TRANSIENT_STREAM_ERRORS = frozenset(
    {"api_error", "overloaded_error", "rate_limit_error", "timeout_error"}
)


class AnthropicLLM:
    """Claude through the Messages API; implements :class:`~cairn.llm.types.LLM`."""

    name = "anthropic"

    def __init__(
        self,
        api_key: str,
        model: str,
        *,
        base_url: str | None = None,
        max_retries: int = 4,
        timeout: float = 120.0,
        stream: bool = False,
    ) -> None:
        """Prepare a client; nothing is sent until :meth:`complete`.

        ``base_url`` defaults to the public API (the SDK's own environment lookup is bypassed, so
        :class:`~cairn.core.settings.Settings` stays the one source of configuration). ``timeout``
        is per attempt; ``max_retries`` counts the attempts after the first. With ``stream`` the
        answer is read as Server-Sent Events and assembled before it is returned.

        Raises ConfigError when ``api_key`` is empty.
        """
        if not api_key.strip():
            raise ConfigError("ANTHROPIC_API_KEY is empty; set it to an Anthropic API key")
        self.model = model
        self.base_url = base_url or DEFAULT_BASE_URL
        self._shown_url = mask_url(self.base_url)  # what messages name: no credentials
        self.stream = stream
        self.timeout = timeout
        self._api_key = api_key
        self._client = anthropic.Anthropic(
            api_key=api_key,
            base_url=self.base_url,
            max_retries=max_retries,
            timeout=timeout,
            middleware=[_refuse_long_retry_after],
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> AnthropicLLM:
        """The adapter ``settings`` describe (key, base URL, model, retries, timeout, streaming).

        Raises ConfigError when ANTHROPIC_API_KEY is not set.
        """
        if settings.llm.anthropic_api_key is None:
            raise ConfigError(
                "ANTHROPIC_API_KEY is not set; set it to use Anthropic, or set CAIRN_LLM=offline"
            )
        return cls(
            settings.llm.anthropic_api_key.get_secret_value(),
            settings.llm.model,
            base_url=settings.llm.anthropic_base_url,
            max_retries=settings.llm.max_retries,
            timeout=settings.llm.timeout,
            stream=settings.llm.stream,
        )

    def __repr__(self) -> str:
        return f"AnthropicLLM(model={self.model!r}, base_url={self._shown_url!r})"

    @property
    def max_retries(self) -> int:
        """How many times a failed attempt is retried before the call gives up."""
        return self._client.max_retries

    def complete(self, request: LLMRequest, *, sink: TextSink | None = None) -> LLMResponse:
        """Send ``request`` and return the model's answer (text and ``tool_use`` blocks).

        Rate limits, overload, server errors, timeouts and dropped connections are retried with
        backoff, honouring ``retry-after`` up to :data:`LONGEST_RETRY_AFTER`.
        With ``sink`` (and streaming on, CAIRN_LLM_STREAM, the default) each text delta goes to
        ``sink`` as it arrives; with streaming off, the whole text goes in one piece at the end.
        A stream that breaks off mid-answer (a transient error event, a dropped or
        stalled connection, an end without a stop reason) is retried up to :attr:`max_retries`
        times with the SDK's backoff, each retry announced by ``sink.restart()``.
        Raises LLMAuthError when the key is rejected (401) or lacks permission (403), and
        LLMError, naming the status and the provider's message, for any other failure.
        """
        model = request.model or self.model
        try:
            message = self._send(request, model, sink)
        except anthropic.AuthenticationError as exc:
            # `from None`: the SDK error carries the request, whose headers hold the key.
            raise LLMAuthError(
                f"Anthropic rejected the API key ({self._describe(exc)}). Check ANTHROPIC_API_KEY:"
                f" it must be a current key for {self._shown_url}."
            ) from None
        except anthropic.PermissionDeniedError as exc:
            raise LLMAuthError(
                f"Anthropic refused this API key access ({self._describe(exc)}). Check that"
                f" ANTHROPIC_API_KEY's workspace may use model {model!r} (CAIRN_MODEL or the"
                " agent's model in cairn.toml)."
            ) from None
        except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
            raise LLMError(self._explain(exc, model)) from exc
        if message.stop_reason is None:
            raise LLMError(_CUT_OFF)
        response = _response(message)
        log.debug(
            "anthropic %s: stop=%s in=%d out=%d cache_read=%d cache_write=%d",
            response.model,
            response.stop_reason,
            response.usage.input_tokens,
            response.usage.output_tokens,
            response.usage.cache_read_input_tokens,
            response.usage.cache_creation_input_tokens,
        )
        return response

    def _send(self, request: LLMRequest, model: str, sink: TextSink | None) -> APIMessage:
        body = prompt_body(request)
        metadata = _metadata(request.metadata)
        params: dict[str, Any] = {
            "model": model,
            "max_tokens": request.max_tokens,
            "system": body["system"] or omit,
            "messages": body["messages"],
            "tools": body["tools"] or omit,
            "metadata": metadata or omit,
        }
        if self.stream and sink is not None:
            return self._stream_into(sink, params)
        if self.stream:
            with self._client.messages.stream(**params) as stream:
                return stream.get_final_message()
        created: APIMessage = self._client.messages.create(**params)
        if sink is not None:  # CAIRN_LLM_STREAM=false: the whole text in one piece
            text = "\n".join(b.text for b in created.content if b.type == "text")
            if text:
                sink.delta(text)
        return created

    def _stream_into(self, sink: TextSink, params: dict[str, Any]) -> APIMessage:
        """Stream the answer into ``sink``, retrying a stream that breaks off mid-answer.

        The SDK retries opening the stream; once the answer has begun it no longer does, so a
        failure then is retried here. Raises LLMError when the last attempt is cut short too,
        and the SDK's or httpx's error for a failure that is not retried.
        """
        retry = 0
        while True:
            last = retry >= self.max_retries
            begun = False
            try:
                with self._client.messages.stream(**params) as stream:
                    begun = True
                    message = _write(stream, sink)
            except anthropic.APIStatusError as exc:
                # Status 200: an error event in the stream; any other status came before it.
                if exc.status_code != 200 or exc.type not in _TRANSIENT_STREAM_ERRORS or last:
                    raise
                broke = f"error event {exc.type}"
            except httpx2.HTTPError as exc:
                if not begun or last:
                    raise
                broke = type(exc).__name__
            else:
                if message is not None and message.stop_reason is not None:
                    return message
                if last:
                    raise LLMError(_CUT_OFF)
                broke = "end without a stop reason"
            wait = backoff(retry)
            log.info("anthropic stream broke off mid-answer (%s); retrying in %.2fs", broke, wait)
            sink.restart()
            time.sleep(wait)
            retry += 1

    def _explain(self, exc: anthropic.AnthropicError | httpx2.HTTPError, model: str) -> str:
        """A message for a failed call that a person can act on."""
        retries = after_retries(self.max_retries)
        if isinstance(exc, anthropic.APITimeoutError):
            return timed_out("Anthropic", self.timeout, retries)
        if isinstance(exc, httpx2.TimeoutException):
            # Raised while reading a stream, where the SDK no longer retries.
            return timed_out("Anthropic", self.timeout)
        if isinstance(exc, anthropic.APIConnectionError):
            return (
                f"could not reach the Anthropic API at {self._shown_url} ({retries}):"
                f" {self._redact(str(exc))} Check the network and ANTHROPIC_BASE_URL."
            )
        if isinstance(exc, httpx2.HTTPError):
            name = type(exc).__name__
            return f"the connection to Anthropic broke off mid-answer ({name}); try again"
        if not isinstance(exc, anthropic.APIStatusError):
            return f"the Anthropic API call failed: {self._redact(str(exc))}"
        if exc.status_code == 200:
            return f"the Anthropic stream broke off with {self._describe(exc)}; try again"
        wait = retry_after(exc.response.headers)
        if wait is not None and wait > LONGEST_RETRY_AFTER:
            return (
                f"Anthropic answered {self._describe(exc)} and asked to wait {wait:g}s before"
                f" retrying, longer than Cairn waits ({LONGEST_RETRY_AFTER:g}s); try again later"
            )
        if exc.status_code == 404:
            return (
                f"Anthropic answered {self._describe(exc)}; check the model name ({model!r}, from"
                " CAIRN_MODEL or the agent's model in cairn.toml)"
            )
        if retryable(exc.status_code):
            return f"Anthropic answered {self._describe(exc)} ({retries}); try again later"
        return f"Anthropic answered {self._describe(exc)}"

    def _describe(self, exc: anthropic.APIStatusError) -> str:
        """``<status> <error type>: <provider message>``, the key blanked out if echoed."""
        kind = exc.type or "error"
        said = exc.api_message or exc.response.reason_phrase or "no message"
        status = f"{exc.status_code} " if exc.status_code != 200 else ""
        return self._redact(f"{status}{kind}: {said}")

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***")


def _write(stream: MessageStream[Any], sink: TextSink) -> APIMessage | None:
    """Send ``stream``'s text to ``sink`` as it arrives and return the whole message.

    Text blocks after the first are preceded by a newline, as :attr:`LLMResponse.text` joins
    them. None when the stream ended before its ``message_start``.
    """
    started = False
    text_blocks = 0
    for event in stream:
        if event.type == "message_start":
            started = True
        elif event.type == "content_block_start" and event.content_block.type == "text":
            if text_blocks:
                sink.delta("\n")
            text_blocks += 1
        elif event.type == "content_block_delta" and event.delta.type == "text_delta":
            sink.delta(event.delta.text)
    return stream.get_final_message() if started else None


def prompt_body(request: LLMRequest) -> dict[str, Any]:
    """The prompt part of the Messages API request for ``request``: ``tools``, ``system`` and
    ``messages`` (the order in which the API reads them as one prefix), with the cache
    breakpoints (``cache_control``) where this adapter puts them. What is sent, and what
    ``cairn bench context`` prices.
    """
    # The third breakpoint, at the end of the messages: the next request that starts with the
    # same messages (the next round of a tool loop, or the next turn of an append-only
    # transcript) reads them from the cache; the API looks for it up to 20 blocks before the
    # next request's breakpoint, so a transcript that grew by a turn still hits.
    last = len(request.messages) - 1
    messages = [_message(m, cached=i == last) for i, m in enumerate(request.messages)]
    return {"tools": _tools(request.tools), "system": _system(request), "messages": messages}


def _system(request: LLMRequest) -> list[TextBlockParam]:
    """The system prompt as blocks: the stable prefix, cached, then the per-turn context."""
    blocks: list[TextBlockParam] = []
    if request.system:
        blocks.append({"type": "text", "text": request.system, "cache_control": _CACHED})
    if request.context:
        blocks.append({"type": "text", "text": request.context})
    return blocks


def _tools(tools: tuple[ToolSpec, ...]) -> list[ToolParam]:
    """Tool definitions; the last carries the cache breakpoint, so all of them are cached."""
    params: list[ToolParam] = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in tools
    ]
    if params:
        params[-1]["cache_control"] = _CACHED
    return params


def _metadata(metadata: Mapping[str, str]) -> MetadataParam:
    # The API accepts only `user_id` and rejects other keys; the rest is Cairn's own bookkeeping.
    return {"user_id": metadata["user_id"]} if "user_id" in metadata else {}


def _message(message: Message, *, cached: bool = False) -> MessageParam:
    content = [_block(b) for b in message.content]
    if cached and content:
        content[-1]["cache_control"] = _CACHED  # type: ignore[typeddict-unknown-key]
    if message.role == "user":
        return {"role": "user", "content": content}
    return {"role": "assistant", "content": content}


_ImageType = Literal["image/jpeg", "image/png", "image/gif", "image/webp"]


def _block(block: Block) -> ContentBlockParam:
    match block:
        case TextBlock():
            return {"type": "text", "text": block.text}
        case ImageBlock():
            media = cast(_ImageType, block.media_type)  # one of IMAGE_TYPES, checked on intake
            return {
                "type": "image",
                "source": {"type": "base64", "media_type": media, "data": block.base64},
            }
        case ToolUseBlock():
            return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
        case ToolResultBlock():
            return {
                "type": "tool_result",
                "tool_use_id": block.tool_use_id,
                "content": block.content,
                "is_error": block.is_error,
            }
        case _:
            assert_never(block)


def _response(message: APIMessage) -> LLMResponse:
    blocks: list[Block] = []
    for block in message.content:
        if block.type == "text":
            blocks.append(TextBlock(block.text))
        elif block.type == "tool_use":
            blocks.append(ToolUseBlock(block.id, block.name, dict(block.input)))
        # Thinking and server-side tool blocks are the provider's business; Cairn keeps
        # the text and the tool calls it has to run.
    usage = message.usage
    return LLMResponse(
        content=tuple(blocks),
        stop_reason=message.stop_reason or "end_turn",
        model=message.model,
        usage=Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_input_tokens=usage.cache_read_input_tokens or 0,
            cache_creation_input_tokens=usage.cache_creation_input_tokens or 0,
        ),
    )


def _refuse_long_retry_after(
    request: anthropic.APIRequest, call_next: anthropic.CallNext
) -> anthropic.APIResponse[Any]:
    """SDK middleware: a response asking for a wait past LONGEST_RETRY_AFTER is not retried.

    The SDK would otherwise sleep as long as the server says (it caps only at ~50 days).
    ``x-should-retry: false`` is the SDK's own switch for "do not retry this response".
    """
    response = call_next(request)
    refuse_long_retry_after(response.headers)
    return response
