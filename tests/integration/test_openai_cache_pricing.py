"""OpenAI's automatic prompt cache: the adapter reports the cached tokens a server bills, and
``cairn bench context --provider openai`` prices the same requests the same way (issue 35).

The stand-in (:class:`tests.support.chat_server.PrefixCache`) computes ``cached_tokens`` from
the bytes the real ``openai`` SDK sent, as OpenAI does; the bench replays its rule over the
blocks it thinks the adapter sends. If the adapter's request and the bench's model of it
parted (the per-turn context moved before the stable prefix, tools sent in another order),
the two would disagree.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from cairn.bench.cost import PrefixCache, Prices, cache_rules, chat_blocks
from cairn.commands.main import main
from cairn.core.settings import Settings
from cairn.llm.types import LLMRequest, Message, TextBlock
from cairn.workers.tools import TOOL_SPECS
from cairn.workers.turn import SYSTEM_FRAME
from tests.integration.test_openai_provider import KEY, adapter
from tests.support.chat_server import ChatServer, echo_responder
from tests.support.chat_server import PrefixCache as ServerCache


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer(api_key=KEY, responder=ServerCache(echo_responder)) as srv:
        yield srv


def test_cached_tokens_the_server_reports_are_what_the_bench_predicts(server: ChatServer) -> None:
    llm = adapter(server)
    system = SYSTEM_FRAME.format(agent="cairn") + "\n" + "Runbook: restart api-3 first.\n" * 200
    bench = PrefixCache()
    said: list[Message] = []
    rows = []
    for turn in range(5):
        said.append(Message("user", (TextBlock(f"ann: is api-{turn} healthy?"),)))
        context = f"Recalled memories (turn {turn}):\n- api-{turn} was restarted at 0{turn}:00"
        request = LLMRequest(system=system, context=context, messages=tuple(said), tools=TOOL_SPECS)
        reported = llm.complete(request).usage
        predicted = bench.send(chat_blocks(system, context, said, TOOL_SPECS), at=turn * 60.0)
        rows.append((reported.cache_read_input_tokens, predicted.cache_read))
        assert reported.input_tokens + reported.cache_read_input_tokens > 1024
        said.append(Message("assistant", (TextBlock("yes"),)))
    assert rows[0] == (0, 0)  # nothing seen yet
    for reported_read, predicted_read in rows[1:]:
        # The tools and the stable prefix are read from the cache; the context that follows
        # changes every turn, so nothing after it is (the conversation is not cached).
        assert reported_read >= 1024
        assert abs(reported_read - predicted_read) <= 128, rows
    assert len({r for r, _ in rows[1:]}) == 1  # the same prefix every turn


def test_bench_context_prices_openai_cache_reads_and_no_writes() -> None:
    result = CliRunner().invoke(
        main,
        ["bench", "context", "--turns", "50", "--provider", "openai", "--model", "gpt-4.1",
         "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    prices = Prices.of("gpt-4.1", Settings.model_fields["llm_prices"].default)
    for mode in ("engine", "classic"):
        cost = figures[mode]["cost"]
        tokens = cost["tokens"]
        assert tokens["cache_write"] == 0
        assert tokens["cache_read"] > 0
        usd = (
            tokens["uncached"] * prices.input
            + tokens["output"] * prices.output
            + tokens["cache_read"] * prices.cache_read
        ) / 1_000_000
        assert cost["usd_total"] == pytest.approx(usd, rel=1e-6, abs=1e-5)


def test_a_model_without_a_price_is_refused_naming_the_option() -> None:
    result = CliRunner().invoke(
        main, ["bench", "context", "--turns", "50", "--provider", "openai", "--model", "nope"]
    )
    assert result.exit_code != 0
    assert "no price for model 'nope' in llm_prices; name one with --model" in result.output


def test_rules_by_provider() -> None:
    assert cache_rules("openai", "gpt-4.1").minimum == 1024
    assert cache_rules("anthropic", "claude-opus-4-5").minimum == 4096
    with pytest.raises(ValueError, match="no prompt-cache rules"):
        cache_rules("offline", "x")
