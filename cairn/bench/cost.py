"""What a sequence of prompts costs as Anthropic or OpenAI bills it, prompt caching included.

The Messages API reads a request as one prefix (tools, then system, then messages) cut into
content blocks. A block carrying ``cache_control`` is a breakpoint: the prefix up to and
including it is written to the cache (1.25x the input price for the 5-minute cache) when it
is at least the model's minimum cacheable length, and a later request whose prefix is identical
up to a block boundary at most 20 blocks before one of its breakpoints reads it from the cache
(0.1x). Each read refreshes the entry's five minutes. What comes after the last breakpoint, or
is not cached, is billed at the input price. :class:`PromptCache` replays those rules over the
request bodies the real adapter builds (:func:`cairn.llm.anthropic.prompt_body`), with Cairn's
token estimator standing in for the model's tokenizer; docs/adr/0028 records the rules and
the prices used.

OpenAI (and servers that copy it) caches by itself, without breakpoints: a request whose first
1,024 tokens or more are identical to a recent request's reads them from the cache, in steps of
128 tokens, at the model's cache-read price, and nothing is charged for writing.
:class:`PrefixCache` replays that rule over the request the OpenAI-compatible adapter sends
(:func:`cairn.llm.openai.chat_messages`), cut where its content can change (:func:`chat_blocks`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cairn.core.tokens import count_tokens
from cairn.llm.anthropic import prompt_body
from cairn.llm.openai import chat_messages, chat_tools
from cairn.llm.types import LLMRequest, Message, ToolSpec
from cairn.memory.context.relevance import cached_tokens

__all__ = [
    "CACHE_LIFETIME",
    "LOOKBACK_BLOCKS",
    "PREFIX_MINIMUM",
    "PREFIX_STEP",
    "Block",
    "Cache",
    "CacheRules",
    "CacheUsage",
    "CostLedger",
    "PrefixCache",
    "Prices",
    "PromptCache",
    "cache_rules",
    "chat_blocks",
    "minimum_cacheable",
    "request_blocks",
]

CACHE_LIFETIME = 300.0
"""Seconds a cache entry lives after it was last written or read (the default 5-minute cache)."""

LOOKBACK_BLOCKS = 20
"""How many block boundaries before a breakpoint the API checks for an earlier cached prefix."""

_MESSAGE_OVERHEAD = 4  # tokens the API spends framing each message (as the compiler counts)

# Minimum cacheable prefix by model-name prefix, most specific first (Anthropic's prompt-caching
# documentation; a shorter marked prefix is simply not cached).
_MINIMUMS = (
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-6", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-sonnet-4-6", 2048),
    ("claude-haiku-3", 2048),
    ("claude-3-haiku", 2048),
    ("claude-3-5-haiku", 2048),
)


def minimum_cacheable(model: str) -> int:
    """The shortest prefix (tokens) the API caches for ``model``; 1024 unless listed."""
    return next((n for prefix, n in _MINIMUMS if model.startswith(prefix)), 1024)


@dataclass(frozen=True, slots=True)
class Block:
    """One content block of a request's prefix: its tokens, its content's digest, and whether
    it carries a cache breakpoint."""

    tokens: int
    digest: str
    breakpoint: bool = False


def _block(payload: dict[str, Any], extra: int = 0) -> Block:
    marked = "cache_control" in payload
    content = {k: v for k, v in payload.items() if k != "cache_control"}
    text = json.dumps(content, sort_keys=True, ensure_ascii=False)
    # Text blocks are priced by their text, tool blocks by their whole definition.
    digest = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
    if payload.get("type") != "text":
        return Block(count_tokens(text) + extra, digest, marked)
    # Counted line by line (each line's count is cached): a transcript grows by a turn and a
    # compiled context changes by a few lines a turn, so most lines were counted before. Each
    # newline costs one, as the estimator counts it; a line's own rounding makes this an upper
    # bound of the text's count.
    lines = payload["text"].split("\n")
    tokens = sum(cached_tokens(line) for line in lines if line) + len(lines) - 1
    return Block(tokens + extra, digest, marked)


def request_blocks(
    system: str,
    context: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec] = (),
) -> list[Block]:
    """The blocks of the request the Anthropic adapter would send for this prompt, in API order
    (tools, system, messages), with its breakpoints."""
    body = prompt_body(
        LLMRequest(system=system, context=context, messages=tuple(messages), tools=tuple(tools))
    )
    blocks = [_block(tool) for tool in body["tools"]]
    blocks += [_block(part) for part in body["system"]]
    for message in body["messages"]:
        for i, part in enumerate(message["content"]):
            blocks.append(_block(part, _MESSAGE_OVERHEAD if i == 0 else 0))
    return blocks


@dataclass(frozen=True, slots=True)
class CacheUsage:
    """Input tokens of one request as the API reports them, and the output tokens."""

    cache_read: int = 0
    cache_write: int = 0
    uncached: int = 0
    output: int = 0

    @property
    def input_tokens(self) -> int:
        """All the input tokens, however billed."""
        return self.cache_read + self.cache_write + self.uncached


class PromptCache:
    """Anthropic's prefix cache for one workspace and model, replayed request by request."""

    def __init__(
        self,
        minimum: int = 1024,
        *,
        lifetime: float = CACHE_LIFETIME,
        lookback: int = LOOKBACK_BLOCKS,
    ) -> None:
        self.minimum = minimum
        self.lifetime = lifetime
        self.lookback = lookback
        self._expires: dict[str, float] = {}  # prefix digest -> when it lapses

    def send(self, blocks: Sequence[Block], at: float, output: int = 0) -> CacheUsage:
        """Bill a request of ``blocks`` sent at ``at`` (seconds), updating the cache."""
        prefixes: list[str] = []
        ends: list[int] = []
        running, total = hashlib.blake2b(digest_size=16), 0
        for block in blocks:
            running.update(block.digest.encode())
            prefixes.append(running.hexdigest())
            total += block.tokens
            ends.append(total)
        live = {p for p, until in self._expires.items() if until > at}
        marks = [i for i, b in enumerate(blocks) if b.breakpoint]
        hit = -1
        for mark in marks:
            for j in range(mark, max(-1, mark - self.lookback), -1):
                if prefixes[j] in live:
                    hit = max(hit, j)
                    break
        read = ends[hit] if hit >= 0 else 0
        if hit >= 0:
            self._expires[prefixes[hit]] = at + self.lifetime
        written_to = hit
        for mark in marks:
            if ends[mark] < self.minimum:
                continue
            self._expires[prefixes[mark]] = at + self.lifetime
            written_to = max(written_to, mark)
        write = ends[written_to] - read if written_to > hit else 0
        # Forget what has lapsed, so a long replay keeps a small table.
        if len(self._expires) > 4096:
            self._expires = {p: t for p, t in self._expires.items() if t > at}
        return CacheUsage(read, write, total - read - write, output)


PREFIX_MINIMUM = 1024
"""The shortest prompt OpenAI's automatic prefix cache reads or keeps (tokens)."""

PREFIX_STEP = 128
"""A cache read beyond the minimum is a whole number of these tokens."""


def chat_blocks(
    system: str,
    context: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec] = (),
) -> list[Block]:
    """The request the OpenAI-compatible adapter would send for this prompt, in prompt order:
    each tool, the system message cut where the stable prefix ends and the per-turn context
    begins (the cache matches tokens, not messages, so the prefix is reused though the message
    changes), then each message."""
    request = LLMRequest(system=system, context=context, messages=tuple(messages), tools=())
    sent = chat_messages(request)
    blocks = [_block(tool) for tool in chat_tools(tools)]
    if sent and sent[0]["role"] == "system":
        first, sent = sent[0]["content"], sent[1:]
        stable = system if first.startswith(system) else ""
        for i, part in enumerate(p for p in (stable, first[len(stable) :]) if p):
            blocks.append(_block({"type": "text", "text": part}, _MESSAGE_OVERHEAD if not i else 0))
    for message in sent:
        content = message.get("content")
        if isinstance(content, str) and set(message) == {"role", "content"}:
            blocks.append(_block({"type": "text", "text": content}, _MESSAGE_OVERHEAD))
        else:  # tool calls and their results: priced by their whole JSON
            blocks.append(_block(message, _MESSAGE_OVERHEAD))
    return blocks


class PrefixCache:
    """OpenAI's automatic prefix cache, replayed request by request.

    Every prefix of a request of :data:`PREFIX_MINIMUM` tokens or more is kept for
    ``lifetime`` seconds after it was last used; a later request reads its longest prefix kept,
    rounded down to the minimum plus whole :data:`PREFIX_STEP`s. Prefixes are matched at block
    boundaries (the real cache matches tokens, a little further into the block where two
    requests part), so the reads are a slight underestimate. Writing costs nothing extra.
    """

    def __init__(self, minimum: int = PREFIX_MINIMUM, *, lifetime: float = CACHE_LIFETIME) -> None:
        self.minimum = minimum
        self.lifetime = lifetime
        self._expires: dict[str, float] = {}

    def send(self, blocks: Sequence[Block], at: float, output: int = 0) -> CacheUsage:
        """Bill a request of ``blocks`` sent at ``at`` (seconds), updating the cache."""
        running, total = hashlib.blake2b(digest_size=16), 0
        prefixes: list[tuple[str, int]] = []
        for block in blocks:
            running.update(block.digest.encode())
            total += block.tokens
            prefixes.append((running.hexdigest(), total))
        matched = max(
            (end for digest, end in prefixes if self._expires.get(digest, -1.0) > at), default=0
        )
        read = 0
        if matched >= self.minimum:
            read = self.minimum + (matched - self.minimum) // PREFIX_STEP * PREFIX_STEP
        if total >= self.minimum:
            for digest, _ in prefixes:
                self._expires[digest] = at + self.lifetime
        if len(self._expires) > 4096:
            self._expires = {p: t for p, t in self._expires.items() if t > at}
        return CacheUsage(cache_read=read, uncached=total - read, output=output)


class Cache(Protocol):
    """A provider's prompt cache, replayed: what each request costs."""

    def send(self, blocks: Sequence[Block], at: float, output: int = 0) -> CacheUsage:
        """Bill a request of ``blocks`` sent at ``at`` (seconds), updating the cache."""
        ...


@dataclass(frozen=True, slots=True)
class CacheRules:
    """How a provider's adapter cuts a prompt into blocks, and how its cache bills them."""

    provider: str
    minimum: int  # the shortest prefix cached (tokens)
    blocks: Callable[[str, str, Sequence[Message], Sequence[ToolSpec]], list[Block]]
    cache: Callable[[], Cache]


def cache_rules(provider: str, model: str) -> CacheRules:
    """The caching rules of ``provider`` (``anthropic`` or ``openai``) for ``model``.

    Raises ValueError for another provider.
    """
    if provider == "anthropic":
        minimum = minimum_cacheable(model)
        return CacheRules(provider, minimum, request_blocks, lambda: PromptCache(minimum))
    if provider == "openai":
        return CacheRules(provider, PREFIX_MINIMUM, chat_blocks, PrefixCache)
    raise ValueError(f"no prompt-cache rules for provider {provider!r}")


@dataclass(frozen=True, slots=True)
class Prices:
    """USD per million tokens: input, output, cache read, cache write (5-minute cache)."""

    model: str
    input: float
    output: float
    cache_read: float
    cache_write: float

    @classmethod
    def of(cls, model: str, table: dict[str, list[float]]) -> Prices:
        """The prices of ``model`` in ``table`` (``llm_prices``: exact name, else the longest
        matching prefix). Raises KeyError when the model has none."""
        price = table.get(model)
        if price is None:
            names = sorted((n for n in table if model.startswith(n)), key=len, reverse=True)
            if not names:
                raise KeyError(f"no price for model {model!r} in llm_prices")
            price = table[names[0]]
        return cls(model, *price[:4])

    def usd(self, usage: CacheUsage) -> float:
        """What ``usage`` costs."""
        return (
            usage.uncached * self.input
            + usage.output * self.output
            + usage.cache_read * self.cache_read
            + usage.cache_write * self.cache_write
        ) / 1_000_000


@dataclass(slots=True)
class CostLedger:
    """Per-turn usage and cost of one mode over a run."""

    prices: Prices
    turns: list[CacheUsage] = field(default_factory=list)
    usd: list[float] = field(default_factory=list)

    def add(self, usage: CacheUsage) -> None:
        """Record one turn."""
        self.turns.append(usage)
        self.usd.append(self.prices.usd(usage))

    def extend(self, other: Iterable[CacheUsage]) -> None:
        """Record several turns."""
        for usage in other:
            self.add(usage)

    def as_json(self, at: Sequence[int] = ()) -> dict[str, Any]:
        """Totals, the cost per 100 turns, and the turns numbered in ``at`` (1-based)."""
        n = len(self.turns)
        sums = {
            key: sum(getattr(u, key) for u in self.turns)
            for key in ("cache_read", "cache_write", "uncached", "output")
        }
        return {
            "turns": n,
            "tokens": sums,
            "usd_total": round(sum(self.usd), 6),
            "usd_per_100_turns": round(sum(self.usd) / n * 100, 6) if n else 0.0,
            "at": {
                str(t): {
                    "cache_read": self.turns[t - 1].cache_read,
                    "cache_write": self.turns[t - 1].cache_write,
                    "uncached": self.turns[t - 1].uncached,
                    "usd": round(self.usd[t - 1], 6),
                }
                for t in at
                if 0 < t <= n
            },
        }
