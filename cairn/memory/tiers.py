"""Tiers and garbage collection: memories move hot -> warm -> cold by rule, never silently vanish.

A memory's standing is its decay score: recency of creation or last recall (half-life
CAIRN_MEMORY_HALF_LIFE_DAYS), lifted by how often it was recalled and how useful and valid
people found it. Rotation puts it in the tier its score earns, then enforces the per-tenant
budgets of hot and warm memories by demoting the lowest scores. Collection retracts (tombstones)
cold memories nobody confirmed or recalled for CAIRN_MEMORY_PRUNE_AFTER_DAYS; nothing is deleted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import update
from sqlmodel import col, select

from cairn.core.errors import InvalidInput
from cairn.core.progress import ProgressCallback
from cairn.core.settings import MemorySettings
from cairn.db import Database
from cairn.db.models import MemoryOutbox, MemoryRow, utcnow
from cairn.memory.ranking import decay

__all__ = ["TierReport", "collect_garbage", "rotate_tiers", "standing_score"]

TIERS = ("hot", "warm", "cold")


@dataclass(frozen=True, slots=True)
class TierReport:
    """What one rotation or collection did, per tier."""

    moved: dict[str, int]
    pruned: int
    counts: dict[str, int]


def standing_score(row: MemoryRow, now: datetime, half_life_days: float) -> float:
    """Decay of the last touch, lifted by recalls, usefulness and validity (0 .. ~3)."""
    touched = max(row.created_at, row.last_recalled_at or row.created_at)
    lift = 1.0 + 0.25 * math.log1p(row.recall_count)
    lift *= 1.0 + 0.25 * math.tanh(max(0.0, row.usefulness) + max(0.0, row.validity))
    return decay(touched, now, half_life_days) * lift


def rotate_tiers(
    db: Database,
    tenant: str,
    policy: MemorySettings,
    *,
    now: datetime | None = None,
    progress: ProgressCallback | None = None,
) -> TierReport:
    """Move the live memories of ``tenant`` to the tier their score and the budgets allow.

    ``progress`` hears (memories placed, live memories). Raises InvalidInput when ``tenant``
    is empty: rotation is always scoped to one tenant.
    """
    if not tenant:
        raise InvalidInput("tier rotation needs a tenant")
    now = now or utcnow()
    moved = dict.fromkeys(TIERS, 0)
    with db.session() as s:
        rows = s.exec(
            select(MemoryRow).where(
                MemoryRow.tenant_id == tenant, col(MemoryRow.retracted).is_(False)
            )
        ).all()
        scored = sorted(
            ((standing_score(r, now, policy.half_life_days), r) for r in rows),
            key=lambda pair: (-pair[0], -(pair[1].id or 0)),
        )
        wanted: dict[int, str] = {}
        hot = warm = 0
        for score, row in scored:
            tier = "hot" if score >= policy.warm_below else "warm"
            if score < policy.cold_below:
                tier = "cold"
            if tier == "hot" and hot >= policy.hot_budget:
                tier = "warm"
            if tier == "warm" and warm >= policy.warm_budget:
                tier = "cold"
            hot += tier == "hot"
            warm += tier == "warm"
            wanted[row.id or 0] = tier
        for done, row in enumerate(rows, 1):
            tier = wanted[row.id or 0]
            if row.tier != tier:
                moved[tier] += 1
                s.exec(update(MemoryRow).where(col(MemoryRow.id) == row.id).values(tier=tier))
            if progress is not None:
                progress(done, len(rows))
        counts = dict.fromkeys(TIERS, 0)
        for tier in wanted.values():
            counts[tier] += 1
    return TierReport(moved=moved, pruned=0, counts=counts)


def collect_garbage(
    db: Database,
    tenant: str,
    policy: MemorySettings,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    progress: ProgressCallback | None = None,
) -> TierReport:
    """Rotate tiers, then tombstone stale cold memories of ``tenant``.

    ``progress`` hears (memories handled, memories to handle): those placed in a tier, then
    those pruned; the total grows once the stale ones are known.

    A memory is pruned only when it is cold, unconfirmed, has no usefulness, and was neither
    created nor recalled within CAIRN_MEMORY_PRUNE_AFTER_DAYS. Pruning is a retraction with the
    reason recorded (kept for audit), never a delete. ``dry_run`` reports without changing.
    """
    now = now or utcnow()
    report = rotate_tiers(db, tenant, policy, now=now, progress=progress) if not dry_run else None
    placed = sum(report.counts.values()) if report is not None else 0
    cutoff = now - timedelta(days=policy.prune_after_days)
    with db.session() as s:
        stale = [
            r
            for r in s.exec(
                select(MemoryRow).where(
                    MemoryRow.tenant_id == tenant,
                    col(MemoryRow.retracted).is_(False),
                    col(MemoryRow.confirmed).is_(False),
                    col(MemoryRow.usefulness) <= 0,
                )
            ).all()
            if (r.last_recalled_at or r.created_at) < cutoff
            and r.created_at < cutoff
            and (r.tier == "cold" or dry_run)
        ]
        if not dry_run:
            for done, row in enumerate(stale, 1):
                if progress is not None:
                    progress(placed + done, placed + len(stale))
                row.retracted = True
                row.retracted_at = now
                row.retracted_by = "gc"
                row.retraction_reason = (
                    f"gc: cold and untouched for {policy.prune_after_days:g} days"
                )
                row.updated_at = now
                s.add(row)
                s.add(MemoryOutbox(memory_id=row.id or 0, op="delete"))
    if progress is not None:
        progress(placed + len(stale), placed + len(stale))
    if report is None:
        return TierReport(moved=dict.fromkeys(TIERS, 0), pruned=len(stale), counts={})
    return TierReport(moved=report.moved, pruned=len(stale), counts=report.counts)
