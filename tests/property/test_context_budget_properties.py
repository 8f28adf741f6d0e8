"""Properties of the context engine's prompts that the budget relies on."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.bench.opsgen import generate_thread
from cairn.core.settings import ContextSettings
from cairn.core.tokens import count_tokens
from cairn.db.models import EventKind
from cairn.memory.context.bands import band_tokens
from cairn.memory.context.compiler import compile_prompt
from cairn.memory.context.state import EventView, SessionState, fold

SYSTEM = "You are cairn, a chat-ops assistant in a team chat."


@settings(max_examples=12, deadline=None)
@given(
    budget=st.integers(min_value=2000, max_value=40000),
    seed=st.integers(min_value=0, max_value=10_000),
    recent=st.integers(min_value=1, max_value=12),
)
def test_no_compiled_prompt_is_over_the_budget(budget: int, seed: int, recent: int) -> None:
    config = ContextSettings(budget=budget, recent_turns=recent)
    state = SessionState()
    seq = 0
    thread, _ = generate_thread(60, seed=seed)
    for turn in thread:
        seq += 1
        fold(state, EventView(seq, EventKind.MESSAGE, turn.text, turn.user),
             distill_chars=config.distill_chars, hydrate_at=2.0)  # fmt: skip
        compiled = compile_prompt(
            state, system=SYSTEM, tools_tokens=400, query=turn.text[:200], hydrated=set(),
            recalled=(), memos=(), config=config,
        )  # fmt: skip
        real = (
            count_tokens(compiled.system) + 400 + count_tokens(compiled.context)
            + sum(count_tokens(m.text) + 4 for m in compiled.messages)
        )  # fmt: skip
        assert real <= compiled.prompt_tokens <= budget
        seq += 1
        fold(state, EventView(seq, EventKind.REPLY, turn.reply), distill_chars=1500,
             hydrate_at=2.0)  # fmt: skip


@given(st.lists(st.text(max_size=60), min_size=1, max_size=8))
def test_a_band_never_costs_more_than_its_lines_bound(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert count_tokens(text) <= band_tokens(text)
