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
from typing import Any

from sqlalchemy import bindparam, update
from sqlalchemy import select as sa_select
from sqlmodel import col

from cairn.core.errors import InvalidInput
from cairn.core.progress import ProgressCallback
from cairn.core.settings import MemorySettings
from cairn.db import Database
from cairn.db.models import MemoryOutbox, MemoryRow, utcnow
from cairn.memory.erasure import chunks
from cairn.memory.ranking import decay

__all__ = ["TierReport", "collect_garbage", "rotate_tiers", "standing_score"]

TIERS = ("hot", "warm", "cold")


@dataclass(frozen=True, slots=True)
class TierReport:
    """What one rotation or collection did, per tier."""

    moved: dict[str, int]
    pruned: int
    counts: dict[str, int]


def standing_score(row: MemoryRow | Any, now: datetime, half_life_days: float) -> float:
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

    Only the columns the score needs are read, and the moves are written in short
    transactions of at most ``WRITE_CHUNK`` memories, so that a home of 100,000 memories does
    not hold SQLite's single write lock for the whole rotation while messages wait for it (it
    held it for over 30 s, and turns failed with "database is locked").
    """
    if not tenant:
        raise InvalidInput("tier rotation needs a tenant")
    now = now or utcnow()
    moved = dict.fromkeys(TIERS, 0)
    with db.engine.connect() as conn:
        rows = conn.execute(_SCORED, {"tenant": tenant}).all()
    scored = sorted(
        ((standing_score(r, now, policy.half_life_days), r) for r in rows),
        key=lambda pair: (-pair[0], -pair[1].id),
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
        wanted[row.id] = tier
    moves: dict[str, list[int]] = {tier: [] for tier in TIERS}
    for row in rows:
        if row.tier != wanted[row.id]:
            moves[wanted[row.id]].append(row.id)
    done = len(rows) - sum(len(ids) for ids in moves.values())
    for tier, ids in moves.items():
        for chunk in chunks(ids, WRITE_CHUNK):
            with db.engine.begin() as conn:
                conn.execute(_MOVE, {"ids": chunk, "tier": tier})
            moved[tier] += len(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done, len(rows))
    if progress is not None:
        progress(len(rows), len(rows))
    counts = dict.fromkeys(TIERS, 0)
    for tier in wanted.values():
        counts[tier] += 1
    return TierReport(moved=moved, pruned=0, counts=counts)


# The most memories one write transaction of rotation or collection changes.
WRITE_CHUNK = 500

_SCORED = sa_select(
    col(MemoryRow.id),
    col(MemoryRow.tier),
    col(MemoryRow.created_at),
    col(MemoryRow.last_recalled_at),
    col(MemoryRow.recall_count),
    col(MemoryRow.usefulness),
    col(MemoryRow.validity),
).where(col(MemoryRow.tenant_id) == bindparam("tenant"), col(MemoryRow.retracted).is_(False))

_MOVE = (
    update(MemoryRow)
    .where(col(MemoryRow.id).in_(bindparam("ids", expanding=True)))
    .values(tier=bindparam("tier"))
)


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
    with db.engine.connect() as conn:
        stale = [
            r.id
            for r in conn.execute(_UNTOUCHED, {"tenant": tenant}).all()
            if (r.last_recalled_at or r.created_at) < cutoff
            and r.created_at < cutoff
            and (r.tier == "cold" or dry_run)
        ]
    if not dry_run:
        reason = f"gc: cold and untouched for {policy.prune_after_days:g} days"
        done = 0
        for chunk in chunks(stale, WRITE_CHUNK):  # short transactions, as rotation's
            with db.session() as s:
                s.exec(
                    update(MemoryRow)
                    .where(col(MemoryRow.id).in_(chunk), col(MemoryRow.retracted).is_(False))
                    .values(
                        retracted=True,
                        retracted_at=now,
                        retracted_by="gc",
                        retraction_reason=reason,
                        updated_at=now,
                    )
                )
                s.add_all(MemoryOutbox(memory_id=mid, op="delete") for mid in chunk)
            done += len(chunk)
            if progress is not None:
                progress(placed + done, placed + len(stale))
    if progress is not None:
        progress(placed + len(stale), placed + len(stale))
    if report is None:
        return TierReport(moved=dict.fromkeys(TIERS, 0), pruned=len(stale), counts={})
    return TierReport(moved=report.moved, pruned=len(stale), counts=report.counts)


# What collection reads of the memories it may prune (the rest is decided here, by the clock).
_UNTOUCHED = sa_select(
    col(MemoryRow.id),
    col(MemoryRow.tier),
    col(MemoryRow.created_at),
    col(MemoryRow.last_recalled_at),
).where(
    col(MemoryRow.tenant_id) == bindparam("tenant"),
    col(MemoryRow.retracted).is_(False),
    col(MemoryRow.confirmed).is_(False),
    col(MemoryRow.usefulness) <= 0,
)
