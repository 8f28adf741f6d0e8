"""A person who left erased on the platform's word, when CAIRN_ERASE_DEPARTED is on.

Slack's ``user_change`` with ``deleted: true`` and a Matrix account's deactivation (as
Synapse's admin API tells it, :mod:`cairn.bot.matrix.departures`) call
:func:`erase_departed`, which does what ``cairn memory erase --person`` does, recorded as
erased by ``cairn:departed`` (docs/adr/0043).
"""

from __future__ import annotations

import logging

from cairn.bot.spool import forget_in_spools
from cairn.core.errors import StorageError
from cairn.memory.erasure import ErasureReport, compact, erase_person
from cairn.runtime import Runtime

__all__ = ["DEPARTED_BY", "erase_departed"]

log = logging.getLogger(__name__)

DEPARTED_BY = "cairn:departed"  # who the audit row says erased them


def erase_departed(rt: Runtime, tenant: str, person: str) -> ErasureReport | None:
    """Erase ``person`` of ``tenant`` if CAIRN_ERASE_DEPARTED is on; None when it is off or
    the erasure failed (logged: run ``cairn memory erase`` then)."""
    if not rt.settings.workers.erase_departed:
        return None
    try:
        report = erase_person(rt.db, rt.memory.index, person, by=DEPARTED_BY, tenant=tenant)
    except StorageError as exc:
        log.error("could not erase %s, who left %s: %s", person, tenant, exc)
        return None
    forget_in_spools(rt.settings.home_dir, person)
    for problem in compact(rt.db, rt.memory.index):
        log.warning("erasing %s: %s", person, problem)
    log.info("erased %s, who left %s: %s", person, tenant, report.counts)
    return report
