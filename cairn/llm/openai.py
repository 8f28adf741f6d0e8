"""The OpenAI-compatible adapter of the LLM protocol, over the official SDK's Chat Completions.

One wire format reaches OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp's server, LM Studio and
gateways (docs/adr/0036). This module translates Cairn's Messages-shaped requests to chat
messages and back, and turns every SDK failure into LLMError / LLMAuthError. Retrying a request
(429, 5xx, timeouts, dropped connections) is left to the SDK, as in the Anthropic adapter; a
stream that breaks off once it has begun is retried here. It tolerates what weak models do:
tool arguments that are not a JSON object come back as a ``malformed`` call for the agent loop
to answer with an error, and a model that cannot call tools is sent none.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import TYPE_CHECKING, Any, assert_never

import httpx2
import openai
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from cairn.core.errors import ConfigError, LLMAuthError, LLMError
from cairn.core.redact import mask_url
from cairn.llm.retries import (
    LONGEST_RETRY_AFTER,
    after_retries,
    backoff,
    refuse_long_retry_after,
    retry_after,
    timed_out,
)
from cairn.llm.retries import retryable as _retryable
from cairn.llm.tool_findings import TRUSTED_FOR, ToolFindings, finding_key
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

__all__ = [
    "NO_TOOLS_NOTE",
    "AzureTarget",
    "OpenAILLM",
    "chat_messages",
    "chat_tools",
    "read_arguments",
]

log = logging.getLogger(__name__)

JSON = dict[str, Any]

NO_TOOLS_NOTE = (
    "You cannot call tools in this deployment. Answer from the conversation and from the"
    " recalled memories above; if they do not hold the answer, say so plainly."
)
"""Added to the system prompt of a model that is sent no tools."""

_CUT_OFF = "the answer was cut off before it was complete (no finish reason); try again"

# What servers say when a model cannot take tools (Ollama: "... does not support tools";
# vLLM without a tool parser: '"auto" tool choice requires --enable-auto-tool-choice ...').
_NO_TOOL_SUPPORT = ("support tools", "tool choice", "tool_choice", "tools are not supported")

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}

_QUOTED = 200  # characters of a malformed argument text quoted back to the model


@dataclass(frozen=True, slots=True)
class AzureTarget:
    """An Azure OpenAI deployment: the resource's endpoint, the deployment, the API version."""

    endpoint: str
    deployment: str
    api_version: str


@dataclass(slots=True)
class _Answer:
    """An answer being read: its text, its tool calls by index, why it stopped, its usage."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, JSON] = field(default_factory=dict)
    finish: str | None = None
    model: str = ""
    usage: CompletionUsage | None = None


class OpenAILLM:
    """Any Chat Completions endpoint; implements :class:`~cairn.llm.types.LLM`."""

    name = "openai"

    def __init__(
        self,
        api_key: str,
        model: str,
        *,
        base_url: str | None = None,
        azure: AzureTarget | None = None,
        max_retries: int = 4,
        timeout: float = 120.0,
        stream: bool = False,
        tools: bool = True,
    ) -> None:
        """Prepare a client; nothing is sent until :meth:`complete`.

        Without ``base_url`` or ``azure`` the client talks to OpenAI itself, which needs
        ``api_key``; a local server usually takes none (an empty key is sent as a placeholder).
        ``timeout`` is per attempt; ``max_retries`` counts the attempts after the first. With
        ``stream`` the answer is read as Server-Sent Events. With ``tools`` False the model is
        sent no tools, and :data:`NO_TOOLS_NOTE` instead.

        Raises ConfigError when OpenAI itself or Azure is meant and ``api_key`` is empty.
        """
        if not api_key.strip() and base_url is None:
            where = "Azure OpenAI" if azure else "OpenAI"
            raise ConfigError(
                f"OPENAI_API_KEY is empty; set it to a key for {where}, or set OPENAI_BASE_URL"
                " to a local endpoint"
            )
        self.model = azure.deployment if azure else model
        self.stream = stream
        self.timeout = timeout
        self.tools = tools
        self.tools_source = "the default"  # what decided ``tools``: see from_settings
        self._api_key = api_key.strip() or "no-key"
        # The SDK would sleep as long as the server asks, up to minutes; Cairn gives up at once.
        http = openai.DefaultHttpxClient(
            event_hooks={"response": [lambda response: refuse_long_retry_after(response.headers)]}
        )
        self._client: openai.OpenAI
        if azure is not None:
            self.base_url = azure.endpoint
            self._client = openai.AzureOpenAI(
                api_key=self._api_key,
                azure_endpoint=azure.endpoint,
                azure_deployment=azure.deployment,
                api_version=azure.api_version,
                max_retries=max_retries,
                timeout=timeout,
                http_client=http,
            )
        else:
            self._client = openai.OpenAI(
                api_key=self._api_key,
                base_url=base_url,
                max_retries=max_retries,
                timeout=timeout,
                http_client=http,
            )
            self.base_url = str(self._client.base_url)
        self._shown_url = mask_url(self.base_url)  # what messages name: no credentials
        self._where = "Azure OpenAI" if azure else f"the OpenAI-compatible API at {self._shown_url}"
        # OpenAI's own newer models refuse `max_tokens`; most local servers know only it.
        self._max_tokens_field = "max_tokens" if base_url else "max_completion_tokens"

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        max_retries: int | None = None,
        timeout: float | None = None,
        stream: bool | None = None,
        tools: bool | None = None,
    ) -> OpenAILLM:
        """The adapter ``settings`` describe (key, base URL or Azure deployment, model, retries,
        timeout, streaming, whether the model calls tools); the keywords override the settings.

        Whether the model is sent tools: ``tools``, else ``CAIRN_MODEL_TOOLS``, else what
        ``cairn doctor`` found for this endpoint and model within
        :data:`~cairn.llm.tool_findings.TRUSTED_FOR`, else True; :attr:`tools_source` says
        which decided.

        Raises ConfigError when neither a key nor a base URL is set, or Azure is half set.
        """
        llm = settings.llm
        key = llm.openai_api_key.get_secret_value() if llm.openai_api_key else ""
        azure = None
        if llm.azure_endpoint is not None:
            if not (llm.azure_api_version and llm.azure_deployment):
                raise ConfigError(
                    "AZURE_OPENAI_ENDPOINT needs AZURE_OPENAI_DEPLOYMENT and OPENAI_API_VERSION"
                )
            azure = AzureTarget(llm.azure_endpoint, llm.azure_deployment, llm.azure_api_version)
        adapter = cls(
            key,
            llm.model,
            base_url=llm.openai_base_url,
            azure=azure,
            max_retries=llm.max_retries if max_retries is None else max_retries,
            timeout=llm.timeout if timeout is None else timeout,
            stream=llm.stream if stream is None else stream,
        )
        if tools is not None:
            adapter.tools, adapter.tools_source = tools, "asked by the caller"
        elif llm.model_tools is not None:
            adapter.tools = llm.model_tools
            adapter.tools_source = f"CAIRN_MODEL_TOOLS={str(llm.model_tools).lower()}"
        else:
            adapter._use_finding(ToolFindings(settings.home_dir))
        return adapter

    def _use_finding(self, findings: ToolFindings) -> None:
        """Decide ``tools`` by what ``cairn doctor`` recorded, if it is recent enough."""
        finding = findings.get(self.finding_key)
        if finding is None:
            return
        when = finding.found_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        if finding.stale():
            log.warning(
                "cairn doctor found on %s that model %s %s tools, more than %d days ago;"
                " offering tools again (run `cairn doctor` to probe afresh, or set"
                " CAIRN_MODEL_TOOLS)",
                when,
                self.model,
                "calls" if finding.tools else "does not call",
                TRUSTED_FOR.days,
            )
            return
        self.tools = finding.tools
        self.tools_source = f"cairn doctor on {when} ({findings.path})"
        log.info(
            "%s: tools %s, as %s", self._where, "on" if self.tools else "off", self.tools_source
        )

    @property
    def finding_key(self) -> str:
        """The key of this endpoint and model in the findings file of ``cairn doctor``."""
        return finding_key(self.base_url, self.model)

    def __repr__(self) -> str:
        return f"OpenAILLM(model={self.model!r}, base_url={self._shown_url!r})"

    @property
    def max_retries(self) -> int:
        """How many times a failed attempt is retried before the call gives up."""
        return self._client.max_retries

    @property
    def client(self) -> openai.OpenAI:
        """The SDK client, for checks that ask more than a completion (``cairn doctor``)."""
        return self._client

    def complete(self, request: LLMRequest, *, sink: TextSink | None = None) -> LLMResponse:
        """Send ``request`` and return the model's answer (text and ``tool_use`` blocks).

        Rate limits, server errors, timeouts and dropped connections are retried with backoff,
        honouring ``retry-after`` up to :data:`LONGEST_RETRY_AFTER`. With ``sink`` and streaming
        on, each text delta goes to ``sink`` as it arrives; with streaming off, the whole text
        goes in one piece at the end. A stream that breaks off mid-answer is retried up to
        :attr:`max_retries` times, each retry announced by ``sink.restart()``. A server that
        refuses tools for this model is asked again without them, and not sent tools again.
        Tool arguments that are not one JSON object come back as a ToolUseBlock whose
        ``malformed`` says why. Raises LLMAuthError when the key is rejected (401) or lacks
        permission (403), and LLMError, naming the status and the provider's message, for any
        other failure.
        """
        model = request.model or self.model
        try:
            try:
                answer = self._send(request, model, sink)
            except openai.BadRequestError as exc:
                if not (request.tools and self.tools and _refuses_tools(exc)):
                    raise
                log.warning(
                    "%s refused tools for model %s (%s); answering without tools from now on"
                    " (set CAIRN_MODEL_TOOLS=false, or run `cairn doctor` to record it, to skip"
                    " this attempt)",
                    self._where,
                    model,
                    self._describe(exc),
                )
                self.tools = False
                if sink is not None:
                    sink.restart()
                answer = self._send(request, model, sink)
        except openai.AuthenticationError as exc:
            # `from None`: the SDK error carries the request, whose headers hold the key.
            raise LLMAuthError(
                f"{self._where} rejected the API key ({self._describe(exc)}). Check"
                " OPENAI_API_KEY: it must be a current key for this endpoint."
            ) from None
        except openai.PermissionDeniedError as exc:
            raise LLMAuthError(
                f"{self._where} refused this API key access ({self._describe(exc)}). Check that"
                f" OPENAI_API_KEY may use model {model!r} (CAIRN_MODEL or the agent's model in"
                " cairn.toml)."
            ) from None
        except (openai.OpenAIError, httpx2.HTTPError) as exc:
            raise LLMError(self._explain(exc, model)) from exc
        response = _response(answer, model)
        log.debug(
            "openai %s: stop=%s in=%d out=%d cache_read=%d reported=%s",
            response.model,
            response.stop_reason,
            response.usage.input_tokens,
            response.usage.output_tokens,
            response.usage.cache_read_input_tokens,
            response.usage.reported,
        )
        return response

    def _params(self, request: LLMRequest, model: str) -> JSON:
        params: JSON = {
            "model": model,
            "messages": chat_messages(request, tools=self.tools),
            self._max_tokens_field: request.max_tokens,
        }
        if request.tools and self.tools:
            params["tools"] = chat_tools(request.tools)
        return params

    def _send(self, request: LLMRequest, model: str, sink: TextSink | None) -> _Answer:
        params = self._params(request, model)
        if self.stream:
            params["stream_options"] = {"include_usage": True}
            return self._stream_into(sink, params)
        completion: ChatCompletion = self._client.chat.completions.create(**params)
        answer = _whole(completion)
        if sink is not None and answer.text:  # CAIRN_LLM_STREAM=false: the text in one piece
            sink.delta("".join(answer.text))
        return answer

    def _stream_into(self, sink: TextSink | None, params: JSON) -> _Answer:
        """Read the streamed answer (its text into ``sink``), retrying a stream that breaks off.

        The SDK retries opening the stream; once the answer has begun it no longer does, so a
        failure then is retried here. Raises LLMError when the last attempt is cut short too,
        and the SDK's or httpx's error for a failure that is not retried.
        """
        retry = 0
        while True:
            last = retry >= self.max_retries
            begun = False
            try:
                chunks = self._client.chat.completions.create(stream=True, **params)
                begun = True
                with chunks:
                    answer = _read(chunks, sink)
            except openai.APIError as exc:
                # An error sent inside the stream (the SDK raises a bare APIError for it).
                if isinstance(exc, openai.APIStatusError | openai.APIConnectionError) or last:
                    raise
                broke = f"error in the stream: {self._redact(exc.message)}"
            except httpx2.HTTPError as exc:
                if not begun or last:
                    raise
                broke = type(exc).__name__
            else:
                if answer.finish is not None:
                    return answer
                if last:
                    raise LLMError(f"{self._where}: {_CUT_OFF}")
                broke = "end without a finish reason"
            wait = backoff(retry)
            log.info("openai stream broke off mid-answer (%s); retrying in %.2fs", broke, wait)
            if sink is not None:
                sink.restart()
            time.sleep(wait)
            retry += 1

    def _explain(self, exc: openai.OpenAIError | httpx2.HTTPError, model: str) -> str:
        """A message for a failed call that a person can act on."""
        retries = after_retries(self.max_retries)
        if isinstance(exc, openai.APITimeoutError):
            return timed_out(self._where, self.timeout, retries)
        if isinstance(exc, httpx2.TimeoutException):
            return timed_out(self._where, self.timeout)
        if isinstance(exc, openai.APIConnectionError):
            return (
                f"could not reach {self._where} ({retries}): {self._redact(str(exc))} Check the"
                " network, and that the server runs (OPENAI_BASE_URL or AZURE_OPENAI_ENDPOINT)."
            )
        if isinstance(exc, httpx2.HTTPError):
            name = type(exc).__name__
            return f"the connection to {self._where} broke off mid-answer ({name}); try again"
        if not isinstance(exc, openai.APIStatusError):
            if isinstance(exc, openai.APIError):
                return f"{self._where} broke off the stream: {self._redact(exc.message)}; try again"
            return f"the call to {self._where} failed: {self._redact(str(exc))}"
        wait = retry_after(exc.response.headers)
        if wait is not None and wait > LONGEST_RETRY_AFTER:
            return (
                f"{self._where} answered {self._describe(exc)} and asked to wait {wait:g}s"
                f" before retrying, longer than Cairn waits ({LONGEST_RETRY_AFTER:g}s);"
                " try again later"
            )
        if exc.status_code == 404:
            return (
                f"{self._where} answered {self._describe(exc)}; check the model name ({model!r},"
                " from CAIRN_MODEL or the agent's model in cairn.toml; `cairn doctor` lists the"
                " models the server has)"
            )
        if _retryable(exc.status_code):
            return f"{self._where} answered {self._describe(exc)} ({retries}); try again later"
        return f"{self._where} answered {self._describe(exc)}"

    def _describe(self, exc: openai.APIStatusError) -> str:
        """``<status> <error type>: <provider message>``, the key blanked out if echoed."""
        body = exc.body if isinstance(exc.body, dict) else {}
        kind = exc.type or (str(exc.code) if exc.code else "") or "error"
        said = body.get("message") or exc.response.reason_phrase or "no message"
        return self._redact(f"{exc.status_code} {kind}: {said}")

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if len(self._api_key) > 8 else text


def _refuses_tools(exc: openai.BadRequestError) -> bool:
    """Whether a 400 says the model or server cannot take tools."""
    said = json.dumps(exc.body).casefold() if exc.body is not None else str(exc).casefold()
    return any(phrase in said for phrase in _NO_TOOL_SUPPORT)


def _read(chunks: Iterable[ChatCompletionChunk], sink: TextSink | None) -> _Answer:
    """Assemble a streamed answer, sending its text to ``sink`` as it arrives."""
    answer = _Answer()
    for chunk in chunks:
        answer.model = chunk.model or answer.model
        if chunk.usage is not None:  # the last chunk, with stream_options.include_usage
            answer.usage = chunk.usage
        for choice in chunk.choices[:1]:
            delta = choice.delta
            if delta.content:
                answer.text.append(delta.content)
                if sink is not None:
                    sink.delta(delta.content)
            for part in delta.tool_calls or ():
                # Some servers leave out the index of a call sent whole; it is then the next one.
                index = part.index if part.index is not None else len(answer.calls)
                call = answer.calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
                call["id"] = part.id or call["id"]
                if part.function is not None:
                    call["name"] += part.function.name or ""
                    call["arguments"] += part.function.arguments or ""
            if choice.finish_reason is not None:
                answer.finish = choice.finish_reason
    return answer


def _whole(completion: ChatCompletion) -> _Answer:
    """The answer of a completion read in one piece."""
    answer = _Answer(model=completion.model, usage=completion.usage)
    if not completion.choices:
        raise LLMError("the OpenAI-compatible server answered with no choices; try again")
    choice = completion.choices[0]
    message = choice.message
    if message.content:
        answer.text.append(message.content)
    for index, call in enumerate(message.tool_calls or ()):
        function = getattr(call, "function", None)  # a custom tool call has none
        if function is not None:
            answer.calls[index] = {
                "id": call.id,
                "name": function.name,
                "arguments": function.arguments,
            }
    # A server that leaves it out finished normally: the whole answer arrived.
    answer.finish = choice.finish_reason or "stop"
    return answer


def _response(answer: _Answer, model: str) -> LLMResponse:
    blocks: list[Block] = []
    text = "".join(answer.text)
    if text:
        blocks.append(TextBlock(text))
    for _, call in sorted(answer.calls.items()):
        arguments, malformed = read_arguments(call["arguments"])
        blocks.append(
            ToolUseBlock(
                call["id"] or f"call_{uuid.uuid4().hex[:24]}",
                call["name"],
                arguments,
                malformed=malformed,
            )
        )
    finish = answer.finish or "stop"
    # Some servers (Ollama) finish with "stop" though they ask for tools.
    stop = "tool_use" if answer.calls else _STOP_REASONS.get(finish, finish)
    return LLMResponse(
        content=tuple(blocks), stop_reason=stop, model=answer.model or model, usage=_usage(answer)
    )


def _usage(answer: _Answer) -> Usage:
    """The usage as the Messages API counts it (cached tokens apart), or unknown."""
    usage = answer.usage
    if usage is None:
        return Usage(reported=False)
    details = usage.prompt_tokens_details
    cached = (details.cached_tokens or 0) if details else 0
    written = (getattr(details, "cache_write_tokens", None) or 0) if details else 0
    return Usage(
        input_tokens=max(usage.prompt_tokens - cached - written, 0),
        output_tokens=usage.completion_tokens,
        cache_read_input_tokens=cached,
        cache_creation_input_tokens=written,
    )


def read_arguments(raw: str | None) -> tuple[dict[str, Any], str]:
    """The tool arguments a model wrote, and why they are malformed ("" when they are not).

    Empty text is no arguments. A JSON object encoded twice (a string holding it), which weak
    models write, is read through. Anything else that is not one JSON object is malformed, the
    reason quoting the start of what was written.
    """
    text = (raw or "").strip()
    if not text:
        return {}, ""
    quoted = json.dumps(text[:_QUOTED] + ("…" if len(text) > _QUOTED else ""), ensure_ascii=False)
    try:
        value = json.loads(text)
        if isinstance(value, str) and value.strip().startswith("{"):
            value = json.loads(value)
    except json.JSONDecodeError as exc:
        return {}, f"the arguments are not valid JSON ({exc.msg} at character {exc.pos}): {quoted}"
    if not isinstance(value, dict):
        return {}, f"the arguments are a JSON {type(value).__name__}, not an object: {quoted}"
    return value, ""


def chat_tools(tools: Sequence[ToolSpec]) -> list[JSON]:
    """The Chat Completions ``tools`` for ``tools`` (what is sent, and what ``cairn bench
    context`` prices)."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.input_schema,
            },
        }
        for tool in tools
    ]


def chat_messages(request: LLMRequest, *, tools: bool = True) -> list[JSON]:
    """The Chat Completions ``messages`` for ``request``: one system message (the stable prefix,
    then the per-turn context, so that a provider's prefix cache reuses the former), then the
    turns, each tool result as a ``tool`` message. Without ``tools``, the system message ends
    with :data:`NO_TOOLS_NOTE`. What is sent, and what ``cairn bench context`` prices.
    """
    system = "\n\n".join(
        part for part in (request.system, request.context, "" if tools else NO_TOOLS_NOTE) if part
    )
    messages: list[JSON] = [{"role": "system", "content": system}] if system else []
    for message in request.messages:
        messages.extend(_turn(message))
    return messages


def _turn(message: Message) -> list[JSON]:
    """One Messages-shaped turn as chat messages (a user turn of tool results becomes several)."""
    text = "\n".join(b.text for b in message.content if isinstance(b, TextBlock))
    if message.role == "assistant":
        calls = [
            {
                "id": b.id,
                "type": "function",
                "function": {"name": b.name, "arguments": json.dumps(b.input, ensure_ascii=False)},
            }
            for b in message.content
            if isinstance(b, ToolUseBlock)
        ]
        said: JSON = {"role": "assistant", "content": text or None}
        if calls:
            said["tool_calls"] = calls
        return [said]
    turns: list[JSON] = []
    for block in message.content:
        match block:
            case ToolResultBlock():
                # Chat Completions has no error flag on a tool result: the content says it.
                content = f"error: {block.content}" if block.is_error else block.content
                turns.append(
                    {"role": "tool", "tool_call_id": block.tool_use_id, "content": content}
                )
            case TextBlock() | ImageBlock() | ToolUseBlock():
                pass
            case _:
                assert_never(block)
    images = message.images
    if images:
        # An image is a content part with a data URL (the Chat Completions vision format).
        parts: list[JSON] = [{"type": "text", "text": text}] if text else []
        parts += [
            {"type": "image_url", "image_url": {"url": f"data:{b.media_type};base64,{b.base64}"}}
            for b in images
        ]
        turns.append({"role": "user", "content": parts})
    elif text or not turns:
        turns.append({"role": "user", "content": text})
    return turns
