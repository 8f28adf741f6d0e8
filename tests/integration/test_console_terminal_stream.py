"""On a terminal the console's answer grows in place: written as the model writes it, once."""

from __future__ import annotations

import io

from cairn.bot.console import Console
from cairn.bot.pipeline import Pipeline
from cairn.runtime import Runtime
from cairn.workers.dispatch import InProcessDispatcher


def test_on_a_terminal_the_answer_is_written_as_it_comes_and_not_printed_again(
    runtime: Runtime,
) -> None:
    out, err = io.StringIO(), io.StringIO()
    console = Console(Pipeline(runtime, InProcessDispatcher()), out=out, err=err, interactive=True)
    console.handle("remember deploys are frozen until Monday")
    console.handle("what do you know about deploys?")
    text = out.getvalue()
    answer = "cairn> Here is what I remember:\n- deploys are frozen until Monday"
    assert text.count(answer) == 1  # streamed, and not printed a second time
    assert text.count("cairn> Got it, I'll remember that.") == 1
    assert "  [notice] remembered: deploys are frozen until Monday\n" in text
    # Each answer's line is ended before what follows it.
    assert "full model)\n  [notice]" in text


def test_piped_without_stream_the_console_prints_replies_whole_as_before(
    runtime: Runtime,
) -> None:
    out = io.StringIO()
    console = Console(Pipeline(runtime, InProcessDispatcher()), out=out, err=io.StringIO())
    assert console._pieces is None  # no subscription: scripts see what they always saw
    console.handle("remember deploys are frozen until Monday")
    assert out.getvalue().startswith("cairn> Got it, I'll remember that.\n")
