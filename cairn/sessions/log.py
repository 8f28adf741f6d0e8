"""The durable, append-only event log of each session, and the sessions themselves.

Every incoming message and reaction, tool call, tool result and reply is a row here, committed
before it is acted on. Sequence numbers are allocated by an atomic ``UPDATE ... RETURNING`` on
the session row, so concurrent writers (frontend and worker) never collide.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import Select, Update, bindparam, func, update
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from cairn.db import Database, ensure_tenant, insert_values, table
from cairn.db.models import AgentSession, EventStatus, SessionEvent, utcnow

__all__ = ["EventLog", "ThreadRef"]


# Statements run for every message, built once (their values are bind parameters).
@lru_cache(maxsize=2)
def _next_seq(wake: bool) -> Update:
    """Take the session's next sequence number (parameters sid, now); ``wake`` also reopens
    an ended session."""
    sessions = table(AgentSession)
    values: dict[str, Any] = {"last_seq": sessions.c.last_seq + 1, "updated_at": bindparam("now")}
    if wake:
        values |= {"status": "open", "ended_at": None}
    return (
        update(sessions)
        .where(sessions.c.id == bindparam("sid"))
        .values(**values)
        .returning(sessions.c.last_seq)
    )


@lru_cache(maxsize=1)
def _any_pending() -> Select[Any]:
    """One pending event of a session, if any (parameter sid)."""
    return _of_pending(sa_select(table(SessionEvent).c.id)).limit(1)


@lru_cache(maxsize=1)
def _pending_events() -> Select[Any]:
    """Every column of a session's pending events, oldest first (parameter sid)."""
    events = table(SessionEvent)
    return _of_pending(sa_select(events)).order_by(events.c.seq)


def _of_pending(query: Select[Any]) -> Select[Any]:
    events = table(SessionEvent)
    return query.where(
        events.c.session_id == bindparam("sid"), events.c.status == EventStatus.PENDING
    )


@dataclass(frozen=True, slots=True)
class ThreadRef:
    """Which thread a session is: platform, tenant, channel and thread id."""

    platform: str
    tenant: str
    channel: str
    thread: str


class _KnownSessions:
    """Session rows this process has read, by thread and by id, per database (bounded).

    A frontend asks for the same threads over and over, and a worker handles the same
    sessions. Sessions are never deleted and their id, tenant, platform, channel, thread and
    agent never change; status and last_seq may be stale in a remembered row.
    """

    LIMIT = 10000

    def __init__(self) -> None:
        self.by_ref: dict[ThreadRef, AgentSession] = {}
        self.by_id: dict[int, AgentSession] = {}

    def keep(self, row: AgentSession, ref: ThreadRef | None = None) -> None:
        if len(self.by_id) >= self.LIMIT:
            self.by_ref.clear()
            self.by_id.clear()
        self.by_id[row.id or 0] = row
        if ref is not None:
            self.by_ref[ref] = row


# Weak: a database that is closed and dropped takes its sessions with it.
_KNOWN: WeakKeyDictionary[Database, _KnownSessions] = WeakKeyDictionary()


class EventLog:
    """Sessions and their event logs in the database."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._known = _KNOWN.setdefault(db, _KnownSessions())

    def open_session(self, ref: ThreadRef, agent: str) -> AgentSession:
        """The session of ``ref``, created (with its tenant) on first use; remembered (see
        :class:`_KnownSessions`)."""
        known = self._known.by_ref.get(ref)
        if known is not None:
            return known
        session = self._open_session(ref, agent)
        self._known.keep(session, ref)
        return session

    def _open_session(self, ref: ThreadRef, agent: str) -> AgentSession:
        for _ in range(3):
            with self.db.session() as s:
                found = s.exec(
                    select(AgentSession).where(
                        AgentSession.tenant_id == ref.tenant,
                        AgentSession.channel == ref.channel,
                        AgentSession.thread_ref == ref.thread,
                    )
                ).first()
                if found is not None:
                    return found
            try:
                with self.db.session() as s:
                    ensure_tenant(s, ref.tenant, ref.platform)
                    row = AgentSession(
                        tenant_id=ref.tenant,
                        platform=ref.platform,
                        channel=ref.channel,
                        thread_ref=ref.thread,
                        agent=agent,
                    )
                    s.add(row)
                    s.flush()
                    return row
            except IntegrityError:
                continue  # created concurrently: read it on the next pass
        raise RuntimeError(f"could not open the session of {ref}")

    @staticmethod
    def append_in(
        s: Session,
        session_id: int,
        tenant: str,
        kind: str,
        *,
        text: str = "",
        status: str = EventStatus.DONE,
        user: str = "",
        agent: str = "",
        event_ref: str | None = None,
        message_ref: str | None = None,
        data: dict[str, Any] | None = None,
        wake: bool = False,
    ) -> dict[str, Any]:
        """Append an event inside the caller's transaction; returns the row's values, its
        new id included (no model object: this runs for every message and reply).

        ``wake`` also marks the session open again (a new message wakes an ended session).
        """
        numbered = s.connection().execute(_next_seq(wake), {"sid": session_id, "now": utcnow()})
        seq: int = numbered.scalar_one()
        return insert_values(
            s,
            SessionEvent,
            session_id=session_id,
            tenant_id=tenant,
            seq=seq,
            kind=kind,
            status=status,
            text=text,
            user=user,
            agent=agent,
            event_ref=event_ref,
            message_ref=message_ref,
            data=data or {},
        )

    def append(self, session_id: int, tenant: str, kind: str, **fields: Any) -> SessionEvent:
        """Append an event in its own transaction (committed when this returns)."""
        with self.db.session() as s:
            return SessionEvent(**self.append_in(s, session_id, tenant, kind, **fields))

    def has_pending(self, session_id: int) -> bool:
        """True when an event of the session is still waiting to be handled."""
        with self.db.engine.connect() as conn:  # one row, no ORM objects: a Core read
            return conn.execute(_any_pending(), {"sid": session_id}).first() is not None

    def pending(self, session_id: int) -> tuple[AgentSession | None, list[SessionEvent]]:
        """The session row (None if it has no pending events) and its events still waiting
        to be handled, oldest first; the row may be a remembered one (see
        :class:`_KnownSessions`)."""
        with self.db.engine.connect() as conn:  # a Core read: this runs for every message
            rows = conn.execute(_pending_events(), {"sid": session_id}).mappings().all()
        if not rows:
            return None, []
        # Plain model objects (not attached to an ORM session) built without validation: the
        # values come from the table itself.
        events = [SessionEvent.model_construct(**row) for row in rows]
        session = self._known.by_id.get(session_id)
        if session is None:
            with self.db.session() as s:
                session = s.get(AgentSession, session_id)
            if session is not None:
                self._known.keep(session)
        return session, events

    def sessions_with_pending(self) -> list[int]:
        """Ids of sessions that have events waiting (for recovery after a crash)."""
        with self.db.session() as s:
            ids = s.exec(
                select(SessionEvent.session_id)
                .where(SessionEvent.status == EventStatus.PENDING)
                .distinct()
            ).all()
            return sorted(ids)

    def session(self, session_id: int) -> AgentSession:
        """The session row; raises KeyError when it does not exist."""
        with self.db.session() as s:
            row = s.get(AgentSession, session_id)
            if row is None:
                raise KeyError(session_id)
            return row

    def event(self, event_id: int) -> SessionEvent | None:
        """One event by its row id."""
        with self.db.session() as s:
            return s.get(SessionEvent, event_id)

    def events(self, session_id: int) -> list[SessionEvent]:
        """Every event of a session, in order."""
        with self.db.session() as s:
            return self.events_in(s, session_id)

    @staticmethod
    def events_in(s: Session, session_id: int) -> list[SessionEvent]:
        """Every event of a session, in order, read inside the caller's transaction."""
        return list(
            s.exec(
                select(SessionEvent)
                .where(SessionEvent.session_id == session_id)
                .order_by(col(SessionEvent.seq))
            ).all()
        )

    def event_at(self, tenant: str, event_ref: str, kind: str) -> SessionEvent | None:
        """The event of ``kind`` the platform knows as ``event_ref`` in ``tenant``, if any."""
        with self.db.session() as s:
            return s.exec(
                select(SessionEvent).where(
                    SessionEvent.tenant_id == tenant,
                    SessionEvent.event_ref == event_ref,
                    SessionEvent.kind == kind,
                )
            ).first()

    def still_pending(self, event_ids: Iterable[int]) -> set[int]:
        """Which of ``event_ids`` still wait to be handled."""
        ids = list(event_ids)
        if not ids:
            return set()
        with self.db.session() as s:
            rows = s.exec(
                select(SessionEvent.id).where(
                    col(SessionEvent.id).in_(ids), SessionEvent.status == EventStatus.PENDING
                )
            ).all()
        return {r for r in rows if r is not None}

    def count_pending(self) -> int:
        """How many events, of every session, wait to be handled."""
        with self.db.session() as s:
            return int(
                s.exec(
                    select(func.count())
                    .select_from(SessionEvent)
                    .where(SessionEvent.status == EventStatus.PENDING)
                ).one()
            )

    def thread_agent(self, tenant: str, channel: str, thread: str) -> str | None:
        """The agent of the session on ``thread`` in ``channel``; None when it is no session."""
        with self.db.session() as s:
            return s.exec(
                select(AgentSession.agent).where(
                    AgentSession.tenant_id == tenant,
                    AgentSession.channel == channel,
                    AgentSession.thread_ref == thread,
                )
            ).first()

    def stale_sessions(self, *, older_than: float) -> list[int]:
        """Sessions with an event pending for longer than ``older_than`` seconds."""
        cutoff = utcnow() - timedelta(seconds=older_than)
        with self.db.session() as s:
            rows = s.exec(
                select(SessionEvent.session_id)
                .where(SessionEvent.status == EventStatus.PENDING, SessionEvent.created_at < cutoff)
                .group_by(col(SessionEvent.session_id))
                .having(func.count() > 0)
            ).all()
        return sorted(rows)

    def idle_since(self, cutoff: datetime) -> list[int]:
        """Open sessions without activity since ``cutoff``."""
        with self.db.session() as s:
            rows = s.exec(
                select(AgentSession.id).where(
                    AgentSession.status == "open", col(AgentSession.updated_at) < cutoff
                )
            ).all()
        return [r for r in rows if r is not None]

    def end_if_idle(self, session_id: int, cutoff: datetime) -> bool:
        """Mark the session ended if it is open and had no activity since ``cutoff``; False
        when a message woke it meanwhile (or it had ended already)."""
        with self.db.session() as s:
            result = s.exec(
                update(AgentSession)
                .where(
                    col(AgentSession.id) == session_id,
                    col(AgentSession.status) == "open",
                    col(AgentSession.updated_at) < cutoff,
                )
                .values(status="ended", ended_at=utcnow())
            )
            return bool(result.rowcount)
