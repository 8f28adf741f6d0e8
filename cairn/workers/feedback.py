"""Reaction feedback: what a person's emoji on a bot message does to the memories behind it.

A reaction acts only on the memories that message showed, used or announced (recorded in
``memory_use``). Each person's reaction counts once, and removing it undoes exactly what it
did, because the applied actions are stored with the reaction.
"""

from __future__ import annotations

import logging

from sqlmodel import select

from cairn.core.errors import Forbidden, InvalidInput, NotFound
from cairn.db.models import AgentSession, MemoryUse, OutboundMessage, Reaction, SessionEvent, utcnow
from cairn.memory import Memory, Scope, isolated, private_to, sharing, vouching
from cairn.memory.records import may_retract
from cairn.memory.vouching import Confirmer, Verdict
from cairn.runtime import Runtime

__all__ = ["apply_reaction"]

log = logging.getLogger(__name__)

# Opposite of each action, for undo.
_UNDO = {
    "confirm": "unconfirm",
    "retract": "restore",
    "dispute": "undispute",
    "useful": "not_useful",
    "not_useful": "useful",
    "widen": "narrow",
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
    # The memories a bot message showed were visible where it was posted: read them there.
    scope = Scope(
        session.tenant_id,
        outbound.agent or session.agent,
        private_to=private_to(outbound.channel, [event.data]),
        isolated=isolated([event.data]),
    )
    # A workspace or room admin, as the platform says, or one named in CAIRN_ADMINS.
    admin = event.data.get("admin") is True or event.user in rt.settings.admins
    if event.data.get("removed"):
        return _undo(rt, existing, scope, emoji, admin=admin)
    if existing is not None and existing.removed_at is None:
        return "ack", f":{emoji}: already counted"  # the same person reacting twice counts once
    memories = [m for u in uses if (m := rt.memory.get(u.memory_id, scope)) is not None]
    actions = _plan(effect, outbound.kind, memories, event.user, admin=admin)
    refused = [m for m in memories if (m.id, "refused") in actions]
    actions = [(m, a) for m, a in actions if a != "refused"]
    # Confirming is a permission (cairn.memory.vouching): who reacted decides whether it counts.
    confirmer = Confirmer(
        event.user,
        outsider=event.data.get("untrusted") is True,
        # A member of a steward user group, as the frontend found, or a steward by user id.
        steward=admin or event.data.get("steward") is True or event.user in rt.settings.stewards,
    )
    verdicts: dict[int, Verdict] = {}
    for memory_id, action in actions:
        if action == "confirm":
            verdicts[memory_id] = vouching.confirm(rt.memory, memory_id, scope, confirmer)
        else:
            _do(rt, scope, memory_id, action, event.user, admin=admin)
    refused += [m for m in memories if m.id in verdicts and not verdicts[m.id].counted]
    actions = [(m, a) for m, a in actions if m not in verdicts or verdicts[m].counted]
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
    if refused and not actions:
        return "ack", _refusal(effect, emoji, refused, verdicts)
    if verdicts:
        return "ack", _weighed(emoji, memories, verdicts)
    return "ack", _summary(effect, emoji, [(texts[m], a) for m, a in actions])


def _plan(
    effect: str, kind: str, memories: list[Memory], user: str, *, admin: bool
) -> list[tuple[int, str]]:
    live = [m for m in memories if not m.retracted]
    if effect == "retract" and kind != "notice":
        effect = "not_useful"  # a cross on an answer says it didn't help, not "delete it all"
    if effect == "retract":
        return [(m.id, "retract" if may_retract(m, user, admin=admin) else "dispute") for m in live]
    if effect == "share":
        if kind != "notice":
            return []  # sharing is asked of what was remembered, not of an answer
        return [
            (m.id, "widen" if admin or (m.author and m.author == user) else "refused")
            for m in live
            if m.private_to is not None
        ]
    return [(m.id, effect) for m in live]


def _do(
    rt: Runtime, scope: Scope, memory_id: int, action: str, user: str, *, admin: bool = False
) -> None:
    store = rt.memory
    if action == "unconfirm":
        vouching.unconfirm(store, memory_id, scope, user)
    elif action == "retract":
        store.retract(memory_id, scope, by=user, reason="retracted by reaction")
    elif action == "restore":
        try:
            store.restore(memory_id, scope, by=user)
        except (Forbidden, NotFound) as exc:  # restored or retracted again by someone else
            log.info("removing %s's retraction restored nothing: %s", user, exc)
    elif action == "dispute":
        store.adjust(memory_id, validity=-1.0, disputes=1)
    elif action == "undispute":
        store.adjust(memory_id, validity=1.0, disputes=-1)
    elif action in {"widen", "narrow"}:
        act = sharing.widen if action == "widen" else sharing.narrow
        try:
            act(store, memory_id, scope, by=user, admin=admin)
        except (Forbidden, InvalidInput, NotFound) as exc:
            log.info("%s of memory #%s by %s did nothing: %s", action, memory_id, user, exc)
    elif action == "useful":
        store.adjust(memory_id, usefulness=1.0)
    elif action == "not_useful":
        store.adjust(memory_id, usefulness=-1.0)


def _undo(
    rt: Runtime, existing: Reaction | None, scope: Scope, emoji: str, *, admin: bool
) -> tuple[str, str] | None:
    if existing is None or existing.removed_at is not None:
        return "ack", f":{emoji}: nothing to undo"
    actions = [(int(m), str(a)) for m, a in existing.data.get("actions", [])]
    for memory_id, action in reversed(actions):
        _do(rt, scope, memory_id, _UNDO[action], existing.user, admin=admin)
    with rt.db.session() as s:
        row = s.get(Reaction, existing.id)
        if row is not None:
            row.removed_at = utcnow()
            s.add(row)
    return "ack", f"undid :{emoji}: on {len(actions)} memor{'y' if len(actions) == 1 else 'ies'}"


def _refusal(effect: str, emoji: str, refused: list[Memory], verdicts: dict[int, Verdict]) -> str:
    texts = "; ".join(f'"{m.text}"' for m in refused)
    if effect == "share":
        return (
            f":{emoji}: not shared: only the author of {texts} or an admin can share it beyond "
            "this conversation"
        )
    reasons = list(dict.fromkeys(verdicts[m.id].said for m in refused if m.id in verdicts))
    return f":{emoji}: not counted for {texts}: " + "; ".join(reasons)


def _weighed(emoji: str, memories: list[Memory], verdicts: dict[int, Verdict]) -> str:
    """What a confirmation did to each memory on the message."""
    said = [f'"{m.text}": {verdicts[m.id].said}' for m in memories if m.id in verdicts]
    return f":{emoji}: " + "; ".join(said)


def _summary(effect: str, emoji: str, applied: list[tuple[str, str]]) -> str:
    if not applied:
        return f":{emoji}: noted ({effect}); no memories on that message"
    names = ", ".join(f'{action} "{text}"' for text, action in applied)
    return f":{emoji}: {names}"
