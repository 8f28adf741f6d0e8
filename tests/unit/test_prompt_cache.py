"""The prompt-cache simulation of ``cairn bench context``: Anthropic's prefix-caching rules."""

from __future__ import annotations

from cairn.bench.cost import Block, Prices, PromptCache, minimum_cacheable, request_blocks
from cairn.core.tokens import count_tokens
from cairn.llm.types import Message, ToolSpec


def _blocks(*sizes: int, marks: tuple[int, ...] = (), prefix: str = "") -> list[Block]:
    return [Block(n, f"{prefix}{i}:{n}", i in marks) for i, n in enumerate(sizes)]


def test_an_append_only_prefix_is_read_from_the_cache() -> None:
    cache = PromptCache(1024)
    first = cache.send(_blocks(2000, 500, marks=(1,)), at=0)
    assert (first.cache_read, first.cache_write, first.uncached) == (0, 2500, 0)
    # The next request repeats both blocks and appends two: read 2500, write the new 300.
    second = cache.send(_blocks(2000, 500, 200, 100, marks=(3,)), at=60)
    assert (second.cache_read, second.cache_write, second.uncached) == (2500, 300, 0)


def test_a_change_at_the_start_rewrites_everything() -> None:
    cache = PromptCache(1024)
    cache.send(_blocks(2000, 500, marks=(1,)), at=0)
    changed = cache.send(_blocks(2000, 500, marks=(1,), prefix="x"), at=60)
    assert (changed.cache_read, changed.cache_write) == (0, 2500)


def test_below_the_minimum_length_nothing_is_cached() -> None:
    cache = PromptCache(1024)
    short = cache.send(_blocks(600, 300, marks=(1,)), at=0)
    assert (short.cache_read, short.cache_write, short.uncached) == (0, 0, 900)
    again = cache.send(_blocks(600, 300, marks=(1,)), at=10)
    assert again.cache_read == 0


def test_an_entry_lapses_five_minutes_after_its_last_use() -> None:
    cache = PromptCache(1024)
    cache.send(_blocks(3000, marks=(0,)), at=0)
    assert cache.send(_blocks(3000, marks=(0,)), at=299).cache_read == 3000  # read: refreshed
    assert cache.send(_blocks(3000, marks=(0,)), at=598).cache_read == 3000
    lapsed = cache.send(_blocks(3000, marks=(0,)), at=898.5)
    assert (lapsed.cache_read, lapsed.cache_write) == (0, 3000)


def test_after_the_last_breakpoint_tokens_are_uncached() -> None:
    cache = PromptCache(1024)
    usage = cache.send(_blocks(1500, 700, marks=(0,)), at=0)
    assert (usage.cache_write, usage.uncached) == (1500, 700)


def test_the_request_blocks_follow_the_adapter() -> None:
    tool = ToolSpec("recall", "Search memory.", {"type": "object", "properties": {}})
    blocks = request_blocks("frame " * 50, "context", (Message.user("hi"),), (tool,))
    # API order: the tool, the system frame, the context, the message; breakpoints on the
    # last tool, the frame and the end of the messages (the context changes every turn).
    assert [b.breakpoint for b in blocks] == [True, True, False, True]
    assert all(b.tokens > 0 for b in blocks)


def test_prices_and_minimums_of_the_default_model() -> None:
    prices = Prices.of("claude-sonnet-4-6", {"claude-sonnet-4": [3.0, 15.0, 0.3, 3.75]})
    assert prices.cache_write == 3.75
    assert minimum_cacheable("claude-haiku-3-5") == 2048
    assert minimum_cacheable("claude-sonnet-4-5") == 1024


def test_a_text_block_is_priced_at_no_less_than_the_estimator_counts_its_text() -> None:
    context = '## Recalled\n- memory #1: "a ... b"\n\n\n  indented line 42\n\n## Band\n' * 40
    history = "ana: first line\n\nbo: 12345 and 678\nsecond line of bo\n\nana: done"
    blocks = request_blocks("frame", context, (Message.user(history),))
    assert blocks[1].tokens >= count_tokens(context)
    assert blocks[2].tokens >= count_tokens(history) + 4  # + the message's framing
    # An upper bound, not a wild one: within a token per line.
    assert blocks[1].tokens <= count_tokens(context) + context.count("\n") + 1
