"""Long-term memory: the store callers use, and its writes (remember, retract, feedback).

The database is the source of truth. A write and its ``memory_outbox`` entry commit in one
transaction, and the index follows through :mod:`cairn.memory.index_outbox` (see docs/adr/0003);
reads go through :mod:`cairn.memory.recall`. Every read applies
:func:`~cairn.memory.records.visible_to`, so no query can return a row of another tenant or
another agent's private memory.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from cairn.core.errors import Forbidden, NotFound
from cairn.core.injection import instruction_reason
from cairn.core.settings import MemorySettings
from cairn.db import Database, ensure_tenant
from cairn.db.models import MemoryAudit, MemoryOutbox, MemoryRow, utcnow
from cairn.memory.claims import claim_of
from cairn.memory.embed import Embedder
from cairn.memory.index import IndexUnavailable, VectorIndex
from cairn.memory.index_outbox import IndexOutbox
from cairn.memory.intent import steering
from cairn.memory.recall import Recall
from cairn.memory.records import (
    MAX_MEMORY_CHARS,
    Memory,
    checked_memory,
    content_hash,
    memory_parts,
    visible_to,
)
from cairn.memory.restatement import claim, restates
from cairn.memory.scope import Scope, Source, Visibility
from cairn.memory.supersession import Judge, reassert, reopen, supersede
from cairn.memory.terms import term_set, terms
from cairn.sessions.events import conversation_name

if TYPE_CHECKING:
    from cairn.core.settings import Settings

__all__ = [
    "RESTORE",
    "RETRACT",
    "MemoryStore",
    "Remembered",
    "audit_row",
    "retraction_notice",
]

# memory_audit actions of the store (sharing has its own).
RETRACT = "retract"
RESTORE = "restore"
LEARNED = "learned"  # a learning's sources: the people whose words it was drawn from
READ_FROM = "read-from"  # written in a turn that read a tool's output (Source.via)

log = logging.getLogger(__name__)

# The most recent retracted memories a new text is compared with, word for word, so that a
# reworded retracted text stays retracted (the index no longer holds them).


@dataclass(frozen=True, slots=True)
class Remembered:
    """The outcome of a write: the memory, and whether it is new or an existing duplicate.

    ``merged`` is true when the text was a near-duplicate folded into ``memory``;
    ``superseded`` are the memories this write ended, as a newer value of the same fact.
    ``parts`` are all the memories a text too long for one was kept as, in order (``memory``
    is the first); empty when it fitted in one.
    """

    memory: Memory
    created: bool
    merged: bool = False
    superseded: tuple[Memory, ...] = ()
    parts: tuple[Memory, ...] = ()


class MemoryStore:
    """Scoped long-term memory over a database, an optional vector index and an embedder.

    Writes are its own; recall (:meth:`recall`, :meth:`candidates`) is its
    :class:`~cairn.memory.recall.Recall`'s, and the index upkeep (:meth:`flush_outbox`,
    :meth:`pending_outbox`, :meth:`reconcile`, :meth:`optimize_index`) its
    :class:`~cairn.memory.index_outbox.IndexOutbox`'s.
    """

    def __init__(
        self,
        db: Database,
        index: VectorIndex | None,
        *,
        embedder: Embedder | None = None,
        weights: MemorySettings | None = None,
        default_k: int = 5,
        judge: Judge | None = None,
    ) -> None:
        """``judge`` (a model, say) may veto or confirm each supersession the rule of
        :mod:`cairn.memory.claims` makes; without one the rule decides alone."""
        self.db = db
        self.judge = judge
        self.index = index
        self.embedder = embedder
        self.weights = weights or MemorySettings()
        self.default_k = default_k
        self._tenants: set[str] = set()  # known to exist in the database
        self.index_outbox = IndexOutbox(db, index, embedder)
        reads = Recall(db, index, embedder, self.weights, default_k)
        self.candidates = reads.candidates
        self.recall = reads.recall
        self.query_vector = reads.query_vector
        self.flush_outbox = self.index_outbox.flush
        self.pending_outbox = self.index_outbox.pending
        self.reconcile = self.index_outbox.reconcile
        self.optimize_index = self.index_outbox.optimize

    @classmethod
    def from_settings(cls, db: Database, settings: Settings, *, index: bool = True) -> MemoryStore:
        """The store the settings describe: embedder, Qdrant (server or local) and weights.

        Raises ConfigError when an explicitly named embedding model cannot be loaded.
        """
        from cairn.memory.embed import build_embedder
        from cairn.memory.index import index_for

        embedder = build_embedder(settings.memory.embeddings, settings.memory.embedding_engine)
        dim = embedder.dim if embedder is not None else None
        vectors = index_for(settings, dim) if index else None
        return cls(
            db,
            vectors,
            embedder=embedder,
            weights=settings.memory,
            default_k=settings.memory.recall_k,
        )

    # --- writes -------------------------------------------------------------------------

    def remember(
        self,
        text: str,
        scope: Scope,
        *,
        kind: str = "fact",
        visibility: Visibility = Visibility.PRIVATE,
        source: Source | None = None,
        created_at: datetime | None = None,
        flush: bool = True,
        vector: Sequence[float] | None = None,
        flagged: bool | None = None,
    ) -> Remembered:
        """Store ``text`` in ``scope``, or return the existing memory it duplicates.

        A memory written in a private conversation (``scope.private_to``) stays private to it.
        Exact duplicates (same text up to case, spacing and final punctuation) return the
        existing memory; near-duplicates of the same kind (cosine >= CAIRN_MEMORY_NEAR_DUPLICATE)
        merge into it when the new text adds no term. Episodic turns are never merged.
        ``created_at`` dates a memory that happened earlier (an imported conversation).
        ``flush=False`` leaves the index work in the outbox for a later :meth:`flush_outbox`
        (bulk loads); ``vector`` is the text's embedding when the caller has it already.
        ``flagged`` marks text that reads like an instruction to the assistant (None: decided
        here, by :func:`~cairn.core.injection.instruction_reason`): it stays unconfirmed until
        someone other than its author confirms it, and ranks lower.

        A retraction sticks: a text that restates a retracted memory visible in ``scope`` stores
        nothing and returns that memory, still retracted (see :meth:`restore`).

        Facts change: a fact, decision, constraint or preference that gives a new value for
        what an older one of the same partition gave a value for ("the on-call for payments is
        Bob" after "... is Alice", see :mod:`cairn.memory.claims`) ends the older one, which
        stays stored with its end of validity and its replacement (``superseded`` lists them;
        see :mod:`cairn.memory.supersession`). Restating a replaced text makes it current again.

        A text longer than one memory holds (a long message, a pasted log) is kept as several,
        cut at sentence ends and marked "(part i/n)", each written as above from the same
        source (see :func:`~cairn.memory.records.memory_parts`); ``parts`` lists them.

        Raises InvalidInput for empty text, text over MAX_WRITE_CHARS, control characters,
        unknown kinds and text holding a credential (see
        :func:`~cairn.memory.records.checked_memory`).
        """
        parts = memory_parts(text, kind) if len(text) > MAX_MEMORY_CHARS else [text]
        if len(parts) > 1:
            written = []
            for part in parts:
                one = self.remember(
                    part, scope, kind=kind, visibility=visibility, source=source,
                    created_at=created_at, flush=False, flagged=flagged,
                )  # fmt: skip
                written.append(one)
            if flush:
                self.index_outbox.after_write()
            first = written[0]
            return replace(
                first,
                superseded=tuple(m for w in written for m in w.superseded),
                parts=tuple(w.memory for w in written),
            )
        text = checked_memory(text, kind)
        if flagged is None:
            flagged = kind != "episode" and instruction_reason(text) is not None
        source = source or Source()
        digest = content_hash(text)
        key = scope.key(visibility, scope.private_to)
        self._ensure_tenant(scope.tenant, source.platform)
        with self.db.session() as s:
            # The same text retracted anywhere this scope can see stays retracted; else the
            # same text in this partition is the memory itself. Two lookups, each by index.
            # (Episodes, the turns of an imported conversation, are records, not claims: a
            # retraction is about what people assert, so they skip that look.)
            same = (
                None
                if kind == "episode"
                else s.exec(
                    select(MemoryRow).where(
                        MemoryRow.tenant_id == scope.tenant,
                        MemoryRow.content_hash == digest,
                        col(MemoryRow.retracted).is_(True),
                        visible_to(scope),
                    )
                ).first()
            ) or s.exec(
                select(MemoryRow).where(
                    MemoryRow.tenant_id == scope.tenant,
                    MemoryRow.scope_key == key,
                    MemoryRow.content_hash == digest,
                )
            ).first()
            if same is not None:
                again = self._reasserted(s, same, created_at or utcnow())
                return Remembered(Memory.from_row(same), created=False, superseded=again)
        if kind != "episode":
            revived = self._retracted_restatement(text, scope)
            if revived is not None:
                return Remembered(revived, created=False)
        if vector is not None:
            vector = [float(x) for x in vector]
        elif kind != "episode":  # episodes skip the near-duplicate check: embed in the outbox
            vector = self._embed_one(text)
        if not flagged and kind != "episode" and self.embedder is not None:
            # The phrasing list missed it; the classifier over its meaning may not (ADR 0035).
            flagged = steering(vector, self.embedder.name)
        if kind != "episode" and vector is not None:
            near = self._near_duplicate(text, vector, scope, visibility, kind)
            if near is not None:
                return Remembered(self._merge(near, source), created=False, merged=True)
        try:
            with self.db.session() as s:
                row = MemoryRow(
                    tenant_id=scope.tenant,
                    agent=scope.agent if visibility is Visibility.PRIVATE else None,
                    channel=scope.channel,
                    user_id=scope.user,
                    thread_ref=scope.thread,
                    visibility=visibility.value,
                    scope_key=key,
                    kind=kind,
                    text=text,
                    content_hash=digest,
                    source_platform=source.platform,
                    source_channel=source.channel,
                    source_thread=source.thread,
                    source_message=source.message,
                    source_conversation=conversation_name(source.conversation),
                    author=source.author,
                    untrusted=source.untrusted,
                    flagged=flagged,
                    private_to=scope.private_to,
                )
                if created_at is not None:
                    row.created_at = row.updated_at = created_at
                claim = claim_of(text, kind) if self.weights.supersede else None
                if claim is not None:
                    row.subject = claim.subject
                s.add(row)
                s.flush()
                assert row.id is not None
                s.add(MemoryOutbox(memory_id=row.id, op="upsert"))
                if source.drawn_from:
                    drawn = {"from": sorted(set(source.drawn_from))}
                    s.add(audit_row(row, LEARNED, source.author, scope, drawn))
                if source.via:
                    s.add(audit_row(row, READ_FROM, source.author, scope, {"reason": source.via}))
                ended: tuple[Memory, ...] = ()
                if claim is not None:
                    # An untrusted author or a planted instruction could otherwise retire true
                    # facts by stating new values: theirs replace nothing until confirmed.
                    doubtful = source.untrusted or flagged
                    ids = supersede(s, row, claim, self.judge, replaces=not doubtful)
                    s.flush()
                    ended = tuple(Memory.from_row(r) for r in _rows(s, ids))
                created = Memory.from_row(row)
        except IntegrityError:
            return Remembered(self._existing(scope, key, digest), created=False)
        if vector is not None:
            self.index_outbox.keep(created.id, vector)
        if flush:
            self.index_outbox.after_write()
        return Remembered(created, created=True, superseded=ended)

    def _reasserted(self, s: Session, row: MemoryRow, at: datetime) -> tuple[Memory, ...]:
        """A replaced fact said again, word for word: current again (see
        :func:`~cairn.memory.supersession.reassert`); the memories it ends."""
        if row.valid_until is None or row.retracted or not self.weights.supersede:
            return ()
        ids = reassert(s, row, at, self.judge)
        s.flush()
        return tuple(Memory.from_row(r) for r in _rows(s, ids))

    def _embed_one(self, text: str) -> list[float] | None:
        if self.embedder is None:
            return None
        try:
            return [float(x) for x in self.embedder.embed([text])[0]]
        except Exception as exc:  # a broken model must not stop a write; the outbox retries
            log.warning("embedding failed, the outbox will retry: %s", exc)
            return None

    def _near_duplicate(
        self, text: str, vector: list[float], scope: Scope, visibility: Visibility, kind: str
    ) -> int | None:
        """An existing memory this text restates: close in meaning and saying no new term.

        Cosine alone would merge "frozen until Monday" into "frozen until Tuesday"; requiring
        the existing memory to hold every term of the new text keeps different facts apart.
        """
        if self.index is None:
            return None
        try:
            hits = self.index.search_dense(vector, scope.tenant, scope.agent, 3, rooms=scope.rooms)
        except IndexUnavailable:
            return None
        close = [mid for mid, score in hits if score >= self.weights.near_duplicate]
        owner = scope.agent if visibility is Visibility.PRIVATE else None
        mine = set(terms(text))
        if not close or not mine:
            return None
        room = col(MemoryRow.private_to)
        with self.db.session() as s:
            live = s.exec(
                select(MemoryRow).where(
                    col(MemoryRow.id).in_(close),
                    visible_to(scope),
                    MemoryRow.kind == kind,
                    MemoryRow.visibility == visibility.value,
                    MemoryRow.agent == owner if owner else col(MemoryRow.agent).is_(None),
                    room == scope.private_to if scope.private_to else room.is_(None),
                    col(MemoryRow.retracted).is_(False),
                )
            ).all()
            for row in live:
                if mine <= term_set(row.text):  # the new text adds no term: a restatement
                    return row.id
            return None

    def _retracted_restatement(self, text: str, scope: Scope) -> Memory | None:
        """A retracted memory of the tenant, of any agent and any age, that ``text`` says again
        (:func:`~cairn.memory.restatement.restates`: reworded, retyped, abbreviated, with a
        word or a filler added), so that no edit revives it; among the workspace's retracted
        memories and those private to ``scope``'s own conversation. Every retraction is looked
        at: no run of other retractions pushes one out of reach."""
        mine = claim(text)
        if len(mine.terms) < 2:
            return None
        with self.db.session() as s:
            retracted = s.exec(
                select(MemoryRow.id, MemoryRow.text)
                .where(
                    MemoryRow.tenant_id == scope.tenant,
                    col(MemoryRow.retracted).is_(True),
                    # What this scope may see (another agent's private memory stays its own:
                    # the privacy properties), shared or the agent's own, any age.
                    visible_to(scope),
                )
                .order_by(col(MemoryRow.id).desc())
            ).all()
            for memory_id, said in retracted:
                if restates(text, said):
                    row = s.get(MemoryRow, memory_id)
                    return Memory.from_row(row) if row is not None else None
        return None

    def _merge(self, memory_id: int, source: Source) -> Memory:
        with self.db.session() as s:
            row = s.get(MemoryRow, memory_id)
            assert row is not None
            row.merges += 1
            row.updated_at = utcnow()
            s.add(row)
            s.flush()
            log.info("merged a near-duplicate from %s into memory #%s", source.author, memory_id)
            return Memory.from_row(row)

    def _existing(self, scope: Scope, key: str, digest: str) -> Memory:
        with self.db.session() as s:
            row = s.exec(
                select(MemoryRow).where(
                    MemoryRow.tenant_id == scope.tenant,
                    MemoryRow.scope_key == key,
                    MemoryRow.content_hash == digest,
                )
            ).one()
            return Memory.from_row(row)

    def _ensure_tenant(self, tenant: str, platform: str) -> None:
        # Tenants are never deleted, so one found or created stays known (a lookup per write
        # cost a fifth of the write path).
        if tenant in self._tenants:
            return
        with self.db.session() as s:
            ensure_tenant(s, tenant, platform or tenant.split(":")[0])
        self._tenants.add(tenant)

    def retract(
        self, memory_id: int, scope: Scope, *, by: str, reason: str = "", flush: bool = True
    ) -> Memory:
        """Tombstone a memory visible in ``scope``; it is kept for audit but never recalled, and
        re-sending its text does not bring it back. The act is recorded in ``memory_audit``.
        ``flush=False`` leaves the index work in the outbox, as for :meth:`remember`.

        Raises NotFound when no such memory is visible in ``scope``.
        """
        with self.db.session() as s:
            row = s.exec(
                select(MemoryRow).where(MemoryRow.id == memory_id, visible_to(scope))
            ).first()
            if row is None:
                raise NotFound(f"no memory #{memory_id} in this scope")
            if not row.retracted:
                _tombstone(row, by, reason)
                s.add(row)
                reopen(s, row)  # what it replaced is current again
                s.add(MemoryOutbox(memory_id=memory_id, op="delete"))
                s.add(audit_row(row, RETRACT, by, scope, {"reason": reason}))
            memory = Memory.from_row(row)
        if flush:
            self.index_outbox.after_write()
        return memory

    def adjust(
        self,
        memory_id: int,
        *,
        validity: float = 0.0,
        usefulness: float = 0.0,
        disputes: int = 0,
        confirmed: bool | None = None,
    ) -> None:
        """Move a memory's scores by the given amounts (feedback from people).

        Confirming a doubtful fact (untrusted or flagged) lets it replace the older values it
        would have replaced when it was written (see :mod:`cairn.memory.supersession`)."""
        values: dict[str, Any] = {
            "validity": MemoryRow.validity + validity,
            "usefulness": MemoryRow.usefulness + usefulness,
            "disputes": MemoryRow.disputes + disputes,
            "updated_at": utcnow(),
        }
        if confirmed is not None:
            values["confirmed"] = confirmed
        with self.db.session() as s:
            s.exec(update(MemoryRow).where(col(MemoryRow.id) == memory_id).values(**values))
            if confirmed and self.weights.supersede:
                self._confirmed(s, memory_id)

    def supersede_confirmed(self, memory_id: int) -> None:
        """The memory ``memory_id`` was just confirmed: it replaces what it would have replaced
        when it was written (a doubtful one replaced nothing then)."""
        if self.weights.supersede:
            with self.db.session() as s:
                self._confirmed(s, memory_id)

    def _confirmed(self, s: Session, memory_id: int) -> None:
        """A confirmed current fact replaces what it would have replaced when it was written
        (a doubtful one replaced nothing then)."""
        row = s.get(MemoryRow, memory_id)
        if row is None or not row.subject or row.retracted or row.valid_until is not None:
            return
        claim = claim_of(row.text, row.kind)
        if claim is not None and claim.subject == row.subject:
            supersede(s, row, claim, self.judge)

    def restore(
        self, memory_id: int, scope: Scope, *, by: str, admin: bool = False, flush: bool = True
    ) -> Memory:
        """Undo the retraction of a memory visible in ``scope``: only the person who retracted
        it, or an admin, may; the act is recorded in ``memory_audit``. ``flush=False`` leaves
        the index work in the outbox, as for :meth:`remember`.

        Raises NotFound when no such memory is visible in ``scope``, and Forbidden when ``by``
        may not restore it. A memory that is not retracted is returned as it is.
        """
        with self.db.session() as s:
            row = s.exec(
                select(MemoryRow).where(MemoryRow.id == memory_id, visible_to(scope))
            ).first()
            if row is None:
                raise NotFound(f"no memory #{memory_id} in this scope")
            if row.retracted:
                if not admin and by != row.retracted_by:
                    raise Forbidden(retraction_notice(Memory.from_row(row)))
                before = {"retracted_by": row.retracted_by, "reason": row.retraction_reason}
                before["retracted_at"] = row.retracted_at.isoformat() if row.retracted_at else ""
                row.retracted = False
                row.retracted_at = None
                row.retracted_by = ""
                row.retraction_reason = ""
                row.updated_at = utcnow()
                s.add(row)
                s.add(MemoryOutbox(memory_id=memory_id, op="upsert"))
                s.add(audit_row(row, RESTORE, by, scope, before))
                claim = claim_of(row.text, row.kind) if row.subject else None
                if claim is not None and claim.subject == row.subject:
                    row.valid_until = row.superseded_by = None
                    supersede(s, row, claim, self.judge)  # it replaces what it replaced
            memory = Memory.from_row(row)
        if flush:
            self.index_outbox.after_write()
        return memory

    # --- reads --------------------------------------------------------------------------

    def get(self, memory_id: int, scope: Scope) -> Memory | None:
        """The memory with ``memory_id`` if it is visible in ``scope`` (retracted ones too)."""
        with self.db.session() as s:
            row = s.exec(
                select(MemoryRow).where(MemoryRow.id == memory_id, visible_to(scope))
            ).first()
            return Memory.from_row(row) if row else None

    def from_message(self, source: Source, scope: Scope, *, kind: str) -> list[Memory]:
        """The memories of ``kind`` kept from the message ``source`` names (its platform,
        channel and message id) that are visible in ``scope`` and not retracted, oldest first:
        one, or the parts of a long message.

        Not indexed by message: it reads the tenant's memories, so it is for the odd message
        (an edit of one imported before), not for every message of an import."""
        with self.db.session() as s:
            rows = s.exec(
                select(MemoryRow)
                .where(
                    MemoryRow.tenant_id == scope.tenant,
                    MemoryRow.kind == kind,
                    MemoryRow.source_platform == source.platform,
                    MemoryRow.source_channel == source.channel,
                    MemoryRow.source_message == source.message,
                    col(MemoryRow.retracted).is_(False),
                    visible_to(scope),
                )
                .order_by(col(MemoryRow.id))
            ).all()
            return [Memory.from_row(r) for r in rows]

    def newest(
        self,
        scope: Scope,
        *,
        limit: int = 50,
        include_retracted: bool = False,
        kind: str | None = None,
        tier: str | None = None,
    ) -> list[Memory]:
        """The newest memories visible in ``scope``, optionally of one kind or tier."""
        with self.db.session() as s:
            query = select(MemoryRow).where(visible_to(scope))
            if not include_retracted:
                query = query.where(col(MemoryRow.retracted).is_(False))
            if kind is not None:
                query = query.where(MemoryRow.kind == kind)
            if tier is not None:
                query = query.where(MemoryRow.tier == tier)
            rows = s.exec(query.order_by(col(MemoryRow.id).desc()).limit(limit)).all()
            return [Memory.from_row(r) for r in rows]


def retraction_notice(memory: Memory) -> str:
    """What a person hears when they try to bring back the retracted ``memory``."""
    who = memory.retracted_by or "someone"
    when = memory.retracted_at.strftime("%Y-%m-%d %H:%M UTC") if memory.retracted_at else ""
    return (
        f"memory #{memory.id} was retracted by {who}{' on ' + when if when else ''}; "
        f"only {who} or an admin can restore it"
    )


def audit_row(
    row: MemoryRow, action: str, by: str, scope: Scope, data: dict[str, Any]
) -> MemoryAudit:
    """The ``memory_audit`` row of ``action`` on ``row`` by ``by`` (the agent's name when no
    person is known), done in ``scope.agent``'s scope; ``data`` is what it replaced."""
    assert row.id is not None
    return MemoryAudit(
        tenant_id=row.tenant_id,
        memory_id=row.id,
        action=action,
        actor=by or scope.agent,
        agent=scope.agent,
        data=data,
    )


def _rows(s: Session, ids: Sequence[int]) -> Sequence[MemoryRow]:
    if not ids:
        return []
    return s.exec(select(MemoryRow).where(col(MemoryRow.id).in_(ids))).all()


def _tombstone(row: MemoryRow, by: str, reason: str) -> None:
    row.retracted = True
    row.retracted_at = utcnow()
    row.retracted_by = by
    row.retraction_reason = reason
    row.updated_at = utcnow()
