"""Ending a session: its learnings extracted, stored unconfirmed and announced in the thread.

What a learning is and how the model's proposals are checked lives in
:mod:`cairn.memory.learnings`; this module runs it on one session of the log and writes the
"remembered: ..." notices to the outbox in the transaction that marks the session ended.
"""

from __future__ import annotations

import logging

from cairn.core.errors import InvalidInput, NotFound
from cairn.db.models import AgentSession, EventKind, SessionEvent, utcnow
from cairn.memory.learnings import LEARNINGS_MARK, extract_learnings, transcript
from cairn.memory.records import Memory
from cairn.memory.scope import Scope, Source, Visibility, isolated, private_to, said_in
from cairn.runtime import Runtime
from cairn.sessions.log import EventLog
from cairn.sessions.outbox import Said, say_in

__all__ = ["end_session"]

log = logging.getLogger(__name__)


def end_session(rt: Runtime, session_id: int, *, forbidden: tuple[str, ...] = ()) -> list[Memory]:
    """End a session: extract learnings, store them unconfirmed, announce them in the thread.

    The "remembered: ..." notices go to the outbox, each linked to its memory with the role
    "announced", in the transaction that marks the session ended.
    Ending an ended session does nothing and returns []. Raises NotFound for an unknown id.
    """
    with rt.db.session() as s:
        session = s.get(AgentSession, session_id)
        if session is None:
            raise NotFound(f"no session #{session_id}")
        events = _since_last_learnings(EventLog.events_in(s, session_id))
        if events is None:
            return []  # this stretch of the session was already reviewed
        tenant, agent = session.tenant_id, session.agent
        channel, thread, platform = session.channel, session.thread_ref, session.platform
    learnings = extract_learnings(rt.llm, transcript(events), forbidden=forbidden)
    # Learned from the whole stretch: private if any of it was said in private.
    said = [e.data for e in events if e.kind == EventKind.MESSAGE]
    room = private_to(channel, said)
    scope = Scope(tenant, agent, channel, None, thread, private_to=room, isolated=isolated(said))
    # Which speaker a learning came from is unknown: one untrusted voice in the stretch (a
    # guest, another bot, a configured user) makes all of its learnings untrusted.
    untrusted = any(
        e.kind == EventKind.MESSAGE
        and ((e.data or {}).get("untrusted") is True or e.user in rt.settings.untrusted_users)
        for e in events
    )
    source = Source(
        platform=platform,
        channel=channel,
        thread=thread,
        conversation=said_in(said),
        author=f"{agent}:learnings",
        untrusted=untrusted,
        # Whose words it came from is unknown too: none of the stretch's speakers may confirm.
        drawn_from=tuple(
            sorted({e.user for e in events if e.kind == EventKind.MESSAGE and e.user})
        ),
    )
    remembered: list[Memory] = []
    for learning in learnings:
        try:
            written = rt.memory.remember(
                learning.text,
                scope,
                kind=learning.kind,
                visibility=Visibility.PRIVATE,
                source=source,
            )
        except InvalidInput as exc:
            log.info("learning refused: %s", exc)
            continue
        remembered.append(written.memory)
    _announce(rt, session_id, remembered)
    return remembered


def _since_last_learnings(events: list[SessionEvent]) -> list[SessionEvent] | None:
    """Events after the last learnings marker; None when no message came after it."""
    marks = [i for i, e in enumerate(events) if (e.data or {}).get("kind") == LEARNINGS_MARK]
    rest = events[marks[-1] + 1 :] if marks else events
    if marks and not any(e.kind == EventKind.MESSAGE for e in rest):
        return None
    return rest


def _announce(rt: Runtime, session_id: int, memories: list[Memory]) -> None:
    with rt.db.session() as s:
        session = s.get(AgentSession, session_id, with_for_update=True)
        if session is None:
            return
        done = EventLog.events_in(s, session_id)
        if _since_last_learnings(done) is None:
            return  # a concurrent run announced first
        cause = EventLog.append_in(
            s,
            session_id,
            session.tenant_id,
            EventKind.NOTICE,
            text=f"session ended; {len(memories)} learnings",
            agent=session.agent,
            data={"kind": LEARNINGS_MARK},
        )
        said = [Said("notice", f"remembered: {m.text}", ((m.id, "announced"),)) for m in memories]
        say_in(s, session, cause["id"], said, agent=session.agent)
        session.status = "ended"
        session.ended_at = utcnow()
        s.add(session)
