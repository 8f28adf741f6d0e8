"""Figures of the benchmarks as PNG files (``--plot FILE.png``), drawn with matplotlib.

matplotlib is an optional extra (``pip install 'cairn-bot[plot]'``): it is imported only when a
figure is asked for, with the Agg backend (no display needed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cairn.core.errors import InvalidInput

__all__ = ["INSTALL_HINT", "plot_locomo", "plot_recall", "plot_thread", "require_plotting"]

INSTALL_HINT = "pip install 'cairn-bot[plot]'"
_COLOURS = {"engine": "tab:blue", "classic": "tab:red", "recall": "tab:green"}


def require_plotting() -> Any:
    """matplotlib's pyplot on the Agg backend; InvalidInput naming the extra when it is absent
    (checked before a bench runs, so that a long run does not end without its figure)."""
    try:
        import matplotlib
    except ImportError:
        raise InvalidInput(
            f"--plot needs matplotlib, which is not installed; install it with: {INSTALL_HINT}"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_thread(
    path: Path,
    tokens_of: Mapping[str, Sequence[int]],
    usd_of: Mapping[str, Sequence[float]],
    budget: int,
) -> None:
    """Prompt tokens and cost (USD) per turn of the generated thread, by mode."""
    plt = require_plotting()
    fig, (tokens, cost) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, counts in tokens_of.items():
        turns = range(1, len(counts) + 1)
        tokens.plot(turns, counts, label=name, color=_COLOURS.get(name))
        cost.plot(turns, [u * 100 for u in usd_of[name]], label=name, color=_COLOURS.get(name))
    tokens.axhline(budget, color="grey", linestyle=":", label=f"budget {budget}")
    tokens.set(title="Prompt tokens per turn", xlabel="turn", ylabel="tokens", yscale="log")
    cost.set(
        title="Cost per turn, prompt caching counted", xlabel="turn", ylabel="US cents",
        yscale="log",
    )  # fmt: skip
    tokens.legend()
    cost.legend()
    _save(plt, fig, path)


def plot_locomo(path: Path, result: Mapping[str, Any]) -> None:
    """Evidence share per budget and mode, and cost per 100 turns per budget, of the LoCoMo
    replay (``result`` is its ``--json`` object)."""
    plt = require_plotting()
    budgets = list(result["budgets"])
    fig, (share, cost) = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / 3
    for i, mode in enumerate(("engine", "classic", "recall")):
        xs = [b + (i - 1) * width for b in range(len(budgets))]
        share.bar(xs, [result["budgets"][b][mode] for b in budgets], width, label=mode,
                  color=_COLOURS[mode])  # fmt: skip
    share.set_xticks(range(len(budgets)), budgets)
    share.set(title="Evidence turns in the prompt", xlabel="budget (tokens)", ylabel="share",
              ylim=(0, 1))  # fmt: skip
    share.legend()
    for i, mode in enumerate(("engine", "classic")):
        xs = [b + (i - 0.5) * 0.4 for b in range(len(budgets))]
        values = [result["budgets"][b]["cost"][mode]["usd_per_100_turns"] for b in budgets]
        cost.bar(xs, values, 0.4, label=mode, color=_COLOURS[mode])
    cost.set_xticks(range(len(budgets)), budgets)
    cost.set(title="Cost per 100 turns, prompt caching counted", xlabel="budget (tokens)",
             ylabel="USD")  # fmt: skip
    cost.legend()
    _save(plt, fig, path)


def plot_recall(path: Path, methods: Mapping[str, Mapping[str, Any]], ks: Sequence[int]) -> None:
    """Recall@k against k for every method (``methods`` as ``bench recall --json`` prints)."""
    plt = require_plotting()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, row in methods.items():
        ax.plot(list(ks), [row[f"recall@{k}"] for k in ks], marker="o", markersize=3, label=name)
    ax.set(title="LoCoMo recall@k", xlabel="k", ylabel="recall@k", ylim=(0, 1))
    ax.set_xticks(list(ks))
    ax.grid(alpha=0.3)
    ax.legend()
    _save(plt, fig, path)
