"""Sharing a memory wider, as a recorded and reversible act, on two axes.

Between agents (:func:`share`, :func:`unshare`): sharing moves a memory from the agent's
private partition into the tenant's team partition, where every agent of the tenant sees it
(:func:`~cairn.memory.records.visible_to` decides that, as for every read). Each share and
unshare is a ``memory_audit`` row naming who did it, when, and what it replaced, so that
unsharing restores the memory's previous visibility exactly and the history survives both.

Between conversations (:func:`widen`, :func:`narrow`): a memory learned in a private
conversation is visible only there until its author or an admin widens it to the workspace;
the model can never do that. Both acts are audited the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from cairn.core.errors import Forbidden, InvalidInput, NotFound
from cairn.db.models import MemoryAudit, MemoryOutbox, MemoryRow, utcnow
from cairn.memory.records import Memory, visible_to
from cairn.memory.scope import Scope, Visibility
from cairn.memory.store import MemoryStore, audit_row

__all__ = ["AuditEntry", "history", "narrow", "share", "unshare", "widen"]

SHARE = "share"
UNSHARE = "unshare"
WIDEN = "widen"
NARROW = "narrow"


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One recorded act on a memory: what, by whom, in which agent's scope, and when."""

    id: int
    memory_id: int
    action: str
    actor: str
    agent: str
    created_at: datetime
    data: dict[str, object]


def share(store: MemoryStore, memory_id: int, scope: Scope, *, by: str) -> Memory:
    """Make the private memory ``memory_id`` of ``scope.agent`` visible to the whole team.

    Raises NotFound when ``scope.agent`` has no such memory (another agent's private memory is
    invisible, so it is not found either), and InvalidInput when it is retracted, already
    shared, or the team already holds the same text.
    """
    with store.db.session() as s:
        row = _visible(s, memory_id, scope)
        if row.retracted:
            raise InvalidInput(f"memory #{memory_id} is retracted; restore it before sharing")
        if row.visibility != Visibility.PRIVATE.value:
            raise InvalidInput(f"memory #{memory_id} is already visible to the team")
        if row.agent != scope.agent:
            raise NotFound(f"no private memory #{memory_id} of {scope.agent}")
        before: dict[str, object] = {
            "visibility": row.visibility,
            "agent": row.agent,
            "scope_key": row.scope_key,
        }
        team_key = scope.key(Visibility.TEAM, row.private_to)
        _refuse_twin(s, row, team_key, "the team")
        row.visibility, row.agent, row.scope_key = Visibility.TEAM.value, None, team_key
        _record(s, row, SHARE, by, scope, before)
    return _after(store, memory_id, scope)


def unshare(store: MemoryStore, memory_id: int, scope: Scope, *, by: str) -> Memory:
    """Undo the last share of ``memory_id``: it becomes exactly as private as it was before.

    Only the agent that shared it may unshare it. Raises NotFound when the memory is not
    visible in ``scope``, InvalidInput when it was not shared (or is shared no more) or when
    ``scope.agent`` is not the agent that shared it.
    """
    with store.db.session() as s:
        row = _visible(s, memory_id, scope)
        last = s.exec(
            select(MemoryAudit)
            .where(MemoryAudit.memory_id == memory_id)
            .order_by(col(MemoryAudit.id).desc())
        ).first()
        if last is None or last.action != SHARE:
            raise InvalidInput(f"memory #{memory_id} was not shared; there is nothing to undo")
        if last.agent != scope.agent:
            raise InvalidInput(
                f"memory #{memory_id} was shared by {last.agent}; only {last.agent} may unshare it"
            )
        before: dict[str, object] = {
            "visibility": row.visibility,
            "agent": row.agent,
            "scope_key": row.scope_key,
        }
        previous = last.data
        row.visibility = str(previous["visibility"])
        row.agent = str(previous["agent"]) if previous.get("agent") else None
        row.scope_key = str(previous["scope_key"])
        _record(s, row, UNSHARE, by, scope, before)
    return _after(store, memory_id, replace(scope, agent=row.agent or scope.agent))


def widen(
    store: MemoryStore, memory_id: int, scope: Scope, *, by: str, admin: bool = False
) -> Memory:
    """Make ``memory_id``, private to the conversation it was learned in, the workspace's:
    visible in every conversation of the tenant. Only its author or an admin (``admin``) may;
    never the model. Recorded, and undone by :func:`narrow`.

    Raises NotFound when the memory is not visible in ``scope``, Forbidden when ``by`` may not
    widen it, and InvalidInput when it is retracted, already the workspace's, or the workspace
    already holds the same text.
    """
    with store.db.session() as s:
        row = _visible(s, memory_id, scope)
        if row.private_to is None:
            raise InvalidInput(f"memory #{memory_id} is already visible in every conversation")
        if row.retracted:
            raise InvalidInput(f"memory #{memory_id} is retracted; restore it before sharing")
        if not admin and (not row.author or row.author != by):
            raise Forbidden(
                f"only the author of memory #{memory_id} ({row.author or 'unknown'}) or an "
                "admin can share it beyond the conversation it was said in"
            )
        before: dict[str, object] = {"private_to": row.private_to, "scope_key": row.scope_key}
        owner = Scope(scope.tenant, row.agent or scope.agent)
        key = owner.key(Visibility(row.visibility), None)
        _refuse_twin(s, row, key, "the workspace")
        row.private_to, row.scope_key = None, key
        _record(s, row, WIDEN, by, scope, before)
    return _after(store, memory_id, scope)


def narrow(
    store: MemoryStore, memory_id: int, scope: Scope, *, by: str, admin: bool = False
) -> Memory:
    """Undo the last :func:`widen` of ``memory_id``: it is private to its conversation again.

    Only whoever widened it or an admin may. Raises NotFound, Forbidden or InvalidInput (it was
    not widened, or was changed since) as :func:`widen` does.
    """
    with store.db.session() as s:
        row = _visible(s, memory_id, scope)
        last = s.exec(
            select(MemoryAudit)
            .where(
                MemoryAudit.memory_id == memory_id,
                col(MemoryAudit.action).in_([WIDEN, NARROW]),
            )
            .order_by(col(MemoryAudit.id).desc())
        ).first()
        if last is None or last.action != WIDEN or row.private_to is not None:
            raise InvalidInput(f"memory #{memory_id} was not shared beyond its conversation")
        if not admin and last.actor != by:
            raise Forbidden(f"memory #{memory_id} was shared by {last.actor}; ask them or an admin")
        before: dict[str, object] = {"private_to": None, "scope_key": row.scope_key}
        row.private_to = str(last.data["private_to"])
        row.scope_key = str(last.data["scope_key"])
        _record(s, row, NARROW, by, scope, before)
    return _after(store, memory_id, replace(scope, every_conversation=True))


def history(store: MemoryStore, memory_id: int, scope: Scope) -> list[AuditEntry]:
    """The recorded acts on ``memory_id``, oldest first, if the memory is visible in ``scope``.

    Raises NotFound when it is not.
    """
    with store.db.session() as s:
        _visible(s, memory_id, scope)
        rows = s.exec(
            select(MemoryAudit)
            .where(MemoryAudit.memory_id == memory_id)
            .order_by(col(MemoryAudit.id))
        ).all()
        return [
            AuditEntry(
                r.id or 0, r.memory_id, r.action, r.actor, r.agent, r.created_at, dict(r.data)
            )
            for r in rows
        ]


def _visible(s: Session, memory_id: int, scope: Scope) -> MemoryRow:
    row = s.exec(select(MemoryRow).where(MemoryRow.id == memory_id, visible_to(scope))).first()
    if row is None:
        raise NotFound(f"no memory #{memory_id} visible to {scope.agent} in {scope.tenant}")
    return row


def _refuse_twin(s: Session, row: MemoryRow, key: str, where: str) -> None:
    """Raise InvalidInput when the partition ``key`` already holds ``row``'s text."""
    twin = s.exec(
        select(MemoryRow.id).where(
            MemoryRow.tenant_id == row.tenant_id,
            MemoryRow.scope_key == key,
            MemoryRow.content_hash == row.content_hash,
        )
    ).first()
    if twin is not None:
        raise InvalidInput(f"{where} already has this memory as #{twin}")


def _record(
    s: Session, row: MemoryRow, action: str, by: str, scope: Scope, before: dict[str, object]
) -> None:
    """Change ``row`` and log the act, in one transaction with its index update."""
    assert row.id is not None
    # Read before the flush: a failed flush expires ``row``, and reading ``row.id`` for the
    # message then raised PendingRollbackError instead of InvalidInput (narrowing a memory whose
    # room has said its text again; found by the privacy properties of issue 16).
    memory_id = row.id
    row.updated_at = utcnow()
    s.add(row)
    s.add(audit_row(row, action, by, scope, before))
    # The index filters on visibility, owner and conversation too: re-index with the new ones.
    s.add(MemoryOutbox(memory_id=row.id, op="upsert"))
    try:
        s.flush()
    except IntegrityError as exc:  # the same text landed in the target partition meanwhile
        raise InvalidInput(
            f"memory #{memory_id} collides with an existing one: {exc.orig}"
        ) from exc


def _after(store: MemoryStore, memory_id: int, scope: Scope) -> Memory:
    store.flush_outbox()
    memory = store.get(memory_id, scope)
    assert memory is not None
    return memory
