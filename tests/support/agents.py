"""The two agents the multi-agent tests declare, in a cairn.toml as a deployment writes it."""

from __future__ import annotations

from pathlib import Path

__all__ = ["FREEZE", "declare_agents"]

# What ops learns and memos to review in the scenario.
FREEZE = "deploys are frozen until Monday"


def declare_agents(home: Path, review: str = "") -> None:
    """Write ``home``/cairn.toml: ops (the default agent) and review; ``review`` adds TOML lines
    to review's table (instructions, a model, its own identity)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "cairn.toml").write_text(
        'cairn_agent = "ops"\n'
        "[agents.ops]\n"
        'description = "runs deploys"\n'
        "[agents.review]\n"
        'description = "reviews and merges pull requests"\n' + review
    )
