"""The context engine's tuning, read from the one settings model (never from literals)."""

from __future__ import annotations

from dataclasses import dataclass

from cairn.core.settings import Settings

__all__ = ["EngineConfig"]


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Everything the engine may be tuned by; built from :class:`~cairn.core.settings.Settings`."""

    budget: int = 30000
    mode: str = "engine"
    recent_turns: int = 6
    soft_after: int = 8
    hard_after: int = 30
    hydrate_threshold: float = 2.0
    weight_pin: float = 1.0
    weight_recency: float = 1.0
    weight_relevance: float = 2.0
    weight_hydrate: float = 1.5
    compact_at: float = 0.6
    emergency_at: float = 0.85
    distill_chars: int = 1500

    @classmethod
    def from_settings(cls, settings: Settings) -> EngineConfig:
        """The engine's settings (CAIRN_CONTEXT_*)."""
        return cls(
            budget=settings.context_budget,
            mode=settings.context_mode,
            recent_turns=settings.context_recent_turns,
            soft_after=settings.context_soft_after,
            hard_after=settings.context_hard_after,
            hydrate_threshold=settings.context_hydrate_threshold,
            weight_pin=settings.context_weight_pin,
            weight_recency=settings.context_weight_recency,
            weight_relevance=settings.context_weight_relevance,
            weight_hydrate=settings.context_weight_hydrate,
            compact_at=settings.context_compact_at,
            emergency_at=settings.context_emergency_at,
            distill_chars=settings.context_distill_chars,
        )
