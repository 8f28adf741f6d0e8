"""Reaction feedback: what a person's emoji on a bot message does to the memories behind it.

A reaction acts only on the memories that message showed, used or announced (recorded in
``memory_use``). Each person's reaction counts once, and removing it undoes exactly what it
did, because the applied actions are stored with the reaction.
"""

from __future__ import annotations

from sqlmodel import select

from cairn.db.models import AgentSession, MemoryUse, OutboundMessage, Reaction, SessionEvent, utcnow
from cairn.memory import Memory, Scope
from cairn.runtime import Runtime

__all__ = ["apply_reaction"]

# Opposite of each action, for undo.
_UNDO = {
    "confirm": "unconfirm",
    "retract": "restore",
    "dispute": "undispute",
    "useful": "not_useful",
    "not_useful": "useful",
}


def apply_reaction(
    rt: Runtime, session: AgentSession, event: SessionEvent, effect: str | None
) -> tuple[str, str] | None:
    """Apply (or undo) the reaction in ``event``, whose effect is ``effect`` (see
    :func:`cairn.core.reactions.reaction_effect`); returns (kind, text) to say, or None.

    Unknown emoji (no effect) and repeated reactions are ignored quietly.
    """
    emoji = str(event.data.get("emoji", ""))  # its short name, since the ChatEvent was built
    outbound_id = event.data.get("outbound_id")
    if effect is None or not isinstance(outbound_id, int):
        return None
    with rt.db.session() as s:
        outbound = s.get(OutboundMessage, outbound_id)
        uses = s.exec(select(MemoryUse).where(MemoryUse.outbound_id == outbound_id)).all()
        existing = s.exec(
            select(Reaction).where(
                Reaction.outbound_id == outbound_id,
                Reaction.user == event.user,
                Reaction.emoji == emoji,
            )
        ).first()
    if outbound is None:
        return None
    scope = Scope(session.tenant_id, outbound.agent or session.agent)
    if event.data.get("removed"):
        return _undo(rt, existing, scope, emoji)
    if existing is not None and existing.removed_at is None:
        return "ack", f":{emoji}: already counted"  # the same person reacting twice counts once
    memories = [m for u in uses if (m := rt.memory.get(u.memory_id, scope)) is not None]
    admin = event.data.get("admin") is True  # a workspace or room admin, as the platform says
    actions = _plan(rt, effect, outbound.kind, memories, event.user, admin=admin)
    for memory_id, action in actions:
        _do(rt, scope, memory_id, action, event.user)
    with rt.db.session() as s:
        row = s.get(Reaction, existing.id) if existing is not None else None
        row = row or Reaction(
            tenant_id=session.tenant_id,
            outbound_id=outbound_id,
            user=event.user,
            emoji=emoji,
            effect=effect,
        )
        row.removed_at = None
        row.created_at = utcnow()
        row.event_ref = event.event_ref
        row.data = {"actions": [[m, a] for m, a in actions]}
        s.add(row)
    texts = {m.id: m.text for m in memories}
    retracted = [texts[m] for m, a in actions if a == "retract"]
    if retracted:
        return "notice", "retracted: " + "; ".join(retracted)
    return "ack", _summary(effect, emoji, [(texts[m], a) for m, a in actions])


def _plan(
    rt: Runtime, effect: str, kind: str, memories: list[Memory], user: str, *, admin: bool
) -> list[tuple[int, str]]:
    live = [m for m in memories if not m.retracted]
    if effect == "retract" and kind != "notice":
        effect = "not_useful"  # a cross on an answer says it didn't help, not "delete it all"
    if effect == "retract":
        return [
            (m.id, "retract" if admin or _may_retract(rt, m, user) else "dispute") for m in live
        ]
    return [(m.id, effect) for m in live]


def _may_retract(rt: Runtime, memory: Memory, user: str) -> bool:
    """The author and the configured admins (CAIRN_ADMINS); platform admins are checked apart."""
    return not memory.author or memory.author == user or user in rt.settings.admins


def _do(rt: Runtime, scope: Scope, memory_id: int, action: str, user: str) -> None:
    store = rt.memory
    if action == "confirm":
        store.adjust(memory_id, validity=1.0, confirmed=True)
    elif action == "unconfirm":
        store.adjust(memory_id, validity=-1.0)
        memory = store.get(memory_id, scope)
        if memory is not None and memory.validity <= 0:
            store.adjust(memory_id, confirmed=False)
    elif action == "retract":
        store.retract(memory_id, scope, by=user, reason="retracted by reaction")
    elif action == "restore":
        store.restore(memory_id)
    elif action == "dispute":
        store.adjust(memory_id, validity=-1.0, disputes=1)
    elif action == "undispute":
        store.adjust(memory_id, validity=1.0, disputes=-1)
    elif action == "useful":
        store.adjust(memory_id, usefulness=1.0)
    elif action == "not_useful":
        store.adjust(memory_id, usefulness=-1.0)


def _undo(
    rt: Runtime, existing: Reaction | None, scope: Scope, emoji: str
) -> tuple[str, str] | None:
    if existing is None or existing.removed_at is not None:
        return "ack", f":{emoji}: nothing to undo"
    actions = [(int(m), str(a)) for m, a in existing.data.get("actions", [])]
    for memory_id, action in reversed(actions):
        _do(rt, scope, memory_id, _UNDO[action], existing.user)
    with rt.db.session() as s:
        row = s.get(Reaction, existing.id)
        if row is not None:
            row.removed_at = utcnow()
            s.add(row)
    return "ack", f"undid :{emoji}: on {len(actions)} memor{'y' if len(actions) == 1 else 'ies'}"


def _summary(effect: str, emoji: str, applied: list[tuple[str, str]]) -> str:
    if not applied:
        return f":{emoji}: noted ({effect}); no memories on that message"
    names = ", ".join(f'{action} "{text}"' for text, action in applied)
    return f":{emoji}: {names}"
