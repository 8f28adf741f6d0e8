"""The small protocol every language model adapter implements, and the data it speaks.

The shapes follow the Messages API (content blocks, tool_use / tool_result), because it is the
richest of the wire formats Cairn speaks; other adapters translate to and from it.
"""

from __future__ import annotations

from base64 import b64encode
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = [
    "DECISION_PREFIX",
    "IMAGE_TYPES",
    "LLM",
    "Block",
    "ImageBlock",
    "LLMRequest",
    "LLMResponse",
    "Message",
    "TextBlock",
    "TextSink",
    "ToolResultBlock",
    "ToolSpec",
    "ToolUseBlock",
    "Usage",
]

# What starts the turn a person's decision on a held tool call resumes (docs/adr/0031): the
# JSON after it is data (the decision and what the call gave), never instructions.
DECISION_PREFIX = "[decision on a held tool call, as data] "


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Plain text from a person or the model."""

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    """The model asks for a tool to run with ``input``.

    ``malformed`` is why the arguments the model wrote could not be read as one JSON object
    (quoting what it wrote), empty when they could: the call is then not run, and the model is
    told the reason so that it may call again (weak models write broken JSON).
    """

    id: str
    name: str
    input: dict[str, Any]
    type: Literal["tool_use"] = "tool_use"
    malformed: str = ""


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    """What a tool returned, sent back to the model under the id of its ``tool_use``."""

    tool_use_id: str
    content: str
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"


# The image formats a model that reads images is sent (those the Messages API takes).
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


@dataclass(frozen=True, slots=True)
class ImageBlock:
    """An image a person attached, in the user turn it came with, for a model that reads
    images: its bytes, their ``media_type`` (one of IMAGE_TYPES) and its size in pixels
    (what it costs in tokens: :func:`cairn.core.tokens.image_tokens`)."""

    media_type: str
    data: bytes = field(repr=False)
    width: int
    height: int
    type: Literal["image"] = "image"

    @property
    def base64(self) -> str:
        """The bytes in base64 (ASCII), as both wire formats carry an image."""
        return b64encode(self.data).decode("ascii")


Block = TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock


@dataclass(frozen=True, slots=True)
class Message:
    """One turn of the conversation sent to the model."""

    role: Literal["user", "assistant"]
    content: tuple[Block, ...]

    @classmethod
    def user(cls, text: str) -> Message:
        """A user turn holding one text block."""
        return cls("user", (TextBlock(text),))

    @property
    def images(self) -> tuple[ImageBlock, ...]:
        """The image blocks, in order."""
        return tuple(b for b in self.content if isinstance(b, ImageBlock))

    @property
    def text(self) -> str:
        """The text blocks joined, tool and image blocks left out."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call: a name, what it does, and a JSON Schema for its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """One call to the model.

    ``system`` is the stable prefix (instructions, tool rules) that prompt caching can reuse;
    ``context`` is the per-turn part of the system prompt (checkpoint, recalled memories,
    memos) that changes from turn to turn and therefore comes after the cached prefix.
    ``model`` is the agent's own model (``[agents.NAME] model`` in cairn.toml); None leaves the
    choice to the adapter's configured model. Adapters with a single model ignore it.
    """

    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    context: str = ""
    max_tokens: int = 1024
    metadata: dict[str, str] = field(default_factory=dict)
    model: str | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens the call consumed, as the provider reported them.

    ``input_tokens`` leaves out the cached ones (``cache_read_input_tokens``,
    ``cache_creation_input_tokens``), as the Messages API counts them. ``reported`` is False when
    the provider said nothing of usage (some OpenAI-compatible servers): the counts are then
    unknown, not zero, and no cost is estimated.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    reported: bool = True


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """The model's answer: content blocks and why it stopped."""

    content: tuple[Block, ...]
    stop_reason: str = "end_turn"
    model: str = ""
    usage: Usage = field(default_factory=Usage)

    @property
    def text(self) -> str:
        """The text blocks joined."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock)).strip()

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        """The tool calls the model asked for, in order."""
        return tuple(b for b in self.content if isinstance(b, ToolUseBlock))


class TextSink(Protocol):
    """Where a model's text goes as it is written, before the whole answer is known.

    The deltas are a preview: the :class:`LLMResponse` that ``complete`` returns is the answer.
    Joined, the deltas since the last :meth:`restart` are the response's text blocks joined with
    newlines (:attr:`LLMResponse.text` before its surrounding whitespace is stripped). Tool input
    never arrives here. Both methods are called on the thread that reads the model's answer, so
    they must return quickly and must not raise.
    """

    def delta(self, text: str) -> None:
        """The next piece of the answer's text, to append to what was shown."""
        ...

    def restart(self) -> None:
        """The attempt that wrote the text so far failed and is retried: discard what was shown.

        It may come before any delta (an attempt that failed before writing any text).
        """
        ...


@runtime_checkable
class LLM(Protocol):
    """A language model. Implementations raise LLMError (or LLMAuthError) on failure."""

    name: str

    def complete(self, request: LLMRequest, *, sink: TextSink | None = None) -> LLMResponse:
        """Answer ``request``; may ask for tools through ``tool_use`` blocks.

        With ``sink``, the answer's text is also sent there as it is written; a model that
        cannot stream sends it whole, or not at all.
        """
        ...
