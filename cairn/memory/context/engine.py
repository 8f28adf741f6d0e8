"""The context engine: resumes a session's state, compiles each turn's prompt, records telemetry.

A turn begins by loading the session's checkpoint and folding the events after it (a bounded
number: the previous turn's tool calls and reply), which is saved back as the new checkpoint;
then the current message is folded in and the prompt compiled. Resuming on another worker is
therefore one row read plus the new events, whatever the thread's length.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Select, Update, bindparam, update
from sqlalchemy import select as sa_select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from cairn.core.errors import InvalidInput, NotFound
from cairn.core.settings import ContextSettings
from cairn.core.tokens import count_tokens
from cairn.db import Database, insert_values, table
from cairn.db.models import (
    AgentRow,
    AgentSession,
    ContextCheckpoint,
    ContextTelemetry,
    SessionEvent,
    utcnow,
)
from cairn.llm.types import ImageBlock, ToolSpec
from cairn.memory.context.artifacts import ArtifactStore, matching_lines
from cairn.memory.context.classic import ClassicCompiler
from cairn.memory.context.compiler import CompiledPrompt, compile_prompt
from cairn.memory.context.pastes import (
    Card,
    card_text,
    make_card,
    render_message,
    store_cards,
)
from cairn.memory.context.state import (
    ITEM_KINDS,
    EventView,
    Item,
    SessionState,
    fold,
    hydrate,
)
from cairn.memory.recall import Recalled
from cairn.memos import Memo

__all__ = ["ContextEngine", "TurnContext", "agent_instructions", "tools_tokens"]

# INSERT ... ON CONFLICT DO UPDATE, where the dialect has it.
_UPSERTS: dict[str, Any] = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}

# (through_seq, turn, state as JSON): a checkpoint waiting to be written.
_Checkpoint = tuple[int, int, Any]


# Most characters one retrieve_artifact call returns; the agent pages with ``offset``.
RETRIEVE_MAX_CHARS = 20000


def tools_tokens(tools: Sequence[ToolSpec]) -> int:
    """Estimated tokens of the tool definitions sent with every call."""
    specs = [
        {"name": t.name, "description": t.description, "schema": t.input_schema} for t in tools
    ]
    return _json_tokens(json.dumps(specs)) if specs else 0


@lru_cache(maxsize=64)
def _json_tokens(text: str) -> int:
    # The tool definitions are the same on every turn of an agent: count them once.
    return count_tokens(text)


def agent_instructions(db: Database, tenant: str, agent: str) -> str:
    """The agent's own instructions from the ``agent`` table ("" when it has none)."""
    with db.engine.connect() as conn:  # read on every turn: one column, a Core read
        found = conn.execute(_instructions(), {"tenant": tenant, "agent": agent}).scalar()
        return str(found).strip() if found is not None else ""


@lru_cache(maxsize=1)
def _checkpoint_state() -> Select[Any]:
    checkpoints = table(ContextCheckpoint)
    return sa_select(checkpoints.c.state).where(checkpoints.c.session_id == bindparam("sid"))


@lru_cache(maxsize=2)
def _events_after(bounded: bool) -> Select[Any]:
    """What the fold reads of a session's events after a checkpoint (parameters sid, after
    and, when ``bounded``, before), oldest first."""
    t = table(SessionEvent)
    query = sa_select(t.c.seq, t.c.kind, t.c.text, t.c.user, t.c.status, t.c.data, t.c.id)
    query = query.where(t.c.session_id == bindparam("sid"), t.c.seq > bindparam("after"))
    if bounded:
        query = query.where(t.c.seq < bindparam("before"))
    return query.order_by(t.c.seq)


@lru_cache(maxsize=1)
def _instructions() -> Select[Any]:
    agents = table(AgentRow)
    return sa_select(agents.c.instructions).where(
        agents.c.tenant_id == bindparam("tenant"), agents.c.name == bindparam("agent")
    )


def _view(event: SessionEvent) -> EventView:
    return EventView(
        event.seq, event.kind, event.text, event.user, event.status, event.data, event.id or 0
    )


class ContextEngine:
    """Per-session state, prompts and telemetry over one database."""

    def __init__(self, db: Database, config: ContextSettings) -> None:
        self.db = db
        self.config = config
        self.artifacts = ArtifactStore(db)

    def recall_size(self, recall_k: int) -> int:
        """How many memories a turn should recall for this engine: ``recall_k`` (the memory
        setting) in classic mode, which shows them all; at least ``memory_pool`` otherwise,
        since the compiler shows the best of them that fit (docs/adr/0032)."""
        if self.config.mode == "classic":
            return recall_k
        return max(recall_k, self.config.memory_pool)

    # --- state --------------------------------------------------------------------------

    def checkpoint(self, session_id: int) -> SessionState:
        """The saved checkpoint of the session (an empty state when there is none)."""
        with self.db.session() as s:
            row = s.exec(
                select(ContextCheckpoint).where(ContextCheckpoint.session_id == session_id)
            ).first()
            return SessionState.from_json(row.state) if row is not None else SessionState()

    def catch_up(self, session: AgentSession, before_seq: int | None = None) -> SessionState:
        """The session's state through the event just before ``before_seq`` (all events when
        None): the checkpoint plus the events after it, saved back as the new checkpoint."""
        assert session.id is not None
        state, advanced = self._resume(session, before_seq)
        if advanced:
            self._save(session.id, state)
        return state

    def _resume(self, session: AgentSession, before_seq: int | None) -> tuple[SessionState, bool]:
        """The checkpoint with the events after it folded in (one read transaction); True when
        there were such events, so the checkpoint should be saved again."""
        with self.db.engine.connect() as conn:  # one connection, plain rows
            saved = conn.execute(_checkpoint_state(), {"sid": session.id}).scalar()
            state = SessionState.from_json(saved) if saved is not None else SessionState()
            params = {"sid": session.id, "after": state.through_seq, "before": before_seq}
            rows = conn.execute(_events_after(before_seq is not None), params)
            events = [EventView(*row) for row in rows]
        for event in events:
            self._fold(session, state, event)
        return state, bool(events)

    def _fold(self, session: AgentSession, state: SessionState, event: EventView) -> list[Card]:
        """Fold ``event`` into ``state`` and store the artifact cards it made; those cards."""
        folded = fold(
            state,
            event,
            distill_chars=self.config.distill_chars,
            hydrate_at=self.config.hydrate_threshold,
        )
        self._store(session, folded.cards)
        return list(folded.cards)

    def _store(self, session: AgentSession, cards: Sequence[Card]) -> None:
        store_cards(self.artifacts, session.id or 0, session.tenant_id, cards)

    def _save(self, session_id: int, state: SessionState) -> None:
        data = state.to_json()
        for _ in range(2):
            try:
                with self.db.session() as s:
                    _save_checkpoint(s, session_id, state.through_seq, state.turn, data)
                return
            except IntegrityError:
                continue  # created concurrently: compare with it on the next pass

    # --- turns --------------------------------------------------------------------------

    def begin(
        self, session: AgentSession, current: SessionEvent, *, deferred: bool = False
    ) -> TurnContext:
        """Resume the session and fold in ``current``; the turn's prompt and tools come next.

        With ``deferred``, the new checkpoint and the turn's telemetry are not written at once
        but by :meth:`TurnContext.save_in`, in the caller's transaction (a worker saves them
        with the turn's reply: one write instead of three).
        """
        started = time.perf_counter()
        assert session.id is not None
        state, advanced = self._resume(session, current.seq)
        checkpoint: _Checkpoint | None = None
        if advanced:
            snapshot = (state.through_seq, state.turn, state.to_json())
            if deferred:
                checkpoint = snapshot
            else:
                self._save(session.id, state)
        view = _view(current)
        prose = render_message(current.text, current.data, self.config.distill_chars).prose
        query_state_items = hydrate(state, prose[:4000], self.config.hydrate_threshold)
        cards = self._fold(session, state, view)
        turn = TurnContext(self, session, current, state, query_state_items, started, cards)
        turn._deferred = deferred
        turn._checkpoint = checkpoint
        return turn

    def fold_output(self, session: AgentSession, content: str) -> str:
        """Tool output of ``session`` as the model should see it: verbatim when short, else an
        artifact card (its full text kept in the artifact store, for ``retrieve_artifact``)."""
        if len(content) <= self.config.distill_chars * 2:
            return content
        card = make_card(content)
        self._store(session, [card])
        return card_text(card)

    def telemetry(self, session_id: int) -> list[ContextTelemetry]:
        """The session's per-turn telemetry rows, oldest first."""
        with self.db.session() as s:
            return list(
                s.exec(
                    select(ContextTelemetry)
                    .where(ContextTelemetry.session_id == session_id)
                    .order_by(col(ContextTelemetry.event_seq))
                ).all()
            )

    def record(self, session_id: int, event_seq: int, **fields: Any) -> None:
        """Insert or update the telemetry row of one turn."""
        with self.db.session() as s:
            _record_in(s, session_id, event_seq, fields)


@lru_cache(maxsize=1)
def _advance_checkpoint() -> Update:
    """Move a session's checkpoint forward unless it is already as far (parameters sid,
    through, turn_no, data, now); built once, it runs on every turn."""
    checkpoints = table(ContextCheckpoint)
    return (
        update(checkpoints)
        .where(
            checkpoints.c.session_id == bindparam("sid"),
            checkpoints.c.through_seq < bindparam("through"),
        )
        .values(
            through_seq=bindparam("through"),
            turn=bindparam("turn_no"),
            state=bindparam("data", type_=checkpoints.c.state.type),
            updated_at=bindparam("now"),
        )
    )


def _save_checkpoint(s: Session, session_id: int, through_seq: int, turn: int, data: Any) -> None:
    """Write the checkpoint in ``s`` unless an equal or newer one is already saved."""
    checkpoints = table(ContextCheckpoint)
    params = {"sid": session_id, "through": through_seq, "turn_no": turn, "data": data}
    advanced = s.connection().execute(_advance_checkpoint(), params | {"now": utcnow()})
    if advanced.rowcount:  # the usual case: one statement
        return
    saved = (
        s.connection()
        .execute(sa_select(checkpoints.c.id).where(checkpoints.c.session_id == session_id))
        .first()
    )
    if saved is None:  # the session's first checkpoint
        insert_values(
            s,
            ContextCheckpoint,
            session_id=session_id,
            through_seq=through_seq,
            turn=turn,
            state=data,
        )


@lru_cache(maxsize=64)
def _telemetry_upsert(dialect: str, updated: tuple[str, ...]) -> Any:
    """The telemetry upsert for a dialect and the fields a turn sets, built once (a Core
    statement: not the ORM's bulk insert); its values come as parameters."""
    statement = _UPSERTS[dialect](table(ContextTelemetry))
    return statement.on_conflict_do_update(
        index_elements=["session_id", "event_seq"],
        set_={name: statement.excluded[name] for name in updated},
    )


@lru_cache(maxsize=1)
def _telemetry_defaults() -> dict[str, Any]:
    # The model's field defaults, read once; created_at is stamped per row.
    blank = ContextTelemetry(session_id=0, event_seq=0)
    return blank.model_dump(exclude={"id", "session_id", "event_seq", "created_at"})


def _record_in(s: Session, session_id: int, event_seq: int, fields: dict[str, Any]) -> None:
    dialect = s.get_bind().dialect.name
    if dialect in _UPSERTS:
        # One statement instead of a read and an ORM write: this runs on every turn.
        values = _telemetry_defaults() | fields
        values |= {"session_id": session_id, "event_seq": event_seq, "created_at": utcnow()}
        s.connection().execute(_telemetry_upsert(dialect, tuple(sorted(fields))), values)
        return
    row = s.exec(
        select(ContextTelemetry).where(
            ContextTelemetry.session_id == session_id,
            ContextTelemetry.event_seq == event_seq,
        )
    ).first() or ContextTelemetry(session_id=session_id, event_seq=event_seq)
    for name, value in fields.items():
        setattr(row, name, value)
    s.add(row)


class TurnContext:
    """One turn of a session: its compiled prompt, and the state-graph and artifact tools."""

    def __init__(
        self,
        engine: ContextEngine,
        session: AgentSession,
        current: SessionEvent,
        state: SessionState,
        hydrated: set[str],
        started: float,
        cards: Sequence[Card],
    ) -> None:
        self.engine = engine
        self.session = session
        self.current = current
        self.state = state
        self.hydrated = hydrated
        self.retrieved = 0
        self._deferred = False
        self._checkpoint: _Checkpoint | None = None
        self._telemetry: dict[str, Any] = {}
        # Resuming the session and folding in (distilling) the new message, then compiling.
        self.prepare_ms = (time.perf_counter() - started) * 1000
        self.compile_ms = 0.0
        self._cards = tuple(cards)
        # What the person wrote, pastes left out: the query for recall and for scoring.
        self.query = current.text[:4000]
        if self._cards and state.units:
            self.query = state.units[-1].text.split("\n[artifact", 1)[0][:4000]

    @property
    def session_id(self) -> int:
        """The session's id."""
        return self.session.id or 0

    def compile(
        self,
        *,
        system: str,
        tools: Sequence[ToolSpec] = (),
        recalled: Sequence[Recalled] = (),
        memos: Sequence[Memo] = (),
        images: bool = False,
    ) -> CompiledPrompt:
        """The prompt for this turn, in the configured mode, with its telemetry recorded.

        With ``images`` (a model that reads them: CAIRN_MODEL_IMAGES), the images kept with
        the current message go into its turn (:meth:`images`); no other turn carries any.
        """
        config = self.engine.config
        started = time.perf_counter()
        shown = self.images() if images else []
        if config.mode == "classic":
            compiled = ClassicCompiler(self.engine.db, budget=config.budget).compile(
                self.session_id,
                self.current,
                system=system,
                tools_tokens=tools_tokens(tools),
                recalled=recalled,
                images=shown,
            )
        else:
            compiled = compile_prompt(
                self.state,
                system=system,
                tools_tokens=tools_tokens(tools),
                query=self.query,
                hydrated=self.hydrated,
                recalled=recalled,
                memos=memos,
                config=config,
                images=shown,
            )
        self.compile_ms = (time.perf_counter() - started) * 1000
        self._record(
            mode=config.mode,
            level=compiled.level,
            pressure=compiled.pressure,
            budget=config.budget,
            prompt_tokens=compiled.prompt_tokens,
            bands={
                **compiled.tokens,
                "events": list(compiled.events),
                "prepare_ms": round(self.prepare_ms, 3),
            },
            memories_recalled=len(recalled if config.mode == "classic" else compiled.memory_ids),
            memos_shown=len(compiled.memo_ids),
            hydrated=len(compiled.hydrated),
            artifacts_created=len(self._cards),
            compile_ms=round(self.compile_ms, 3),
        )
        return compiled

    def images(self) -> list[ImageBlock]:
        """The images kept with the current message (attached to it, and within what a model
        is sent), in the order they were attached."""
        records = self.current.data.get("artifacts") if self.current.data else None
        refs = [
            str(r.get("sha256"))
            for r in records or ()
            if isinstance(r, dict) and r.get("kind") == "image"
        ]
        return ArtifactStore(self.engine.db).images(self.session_id, refs)

    def finish(self) -> None:
        """Record what the turn did after the prompt (artifacts retrieved)."""
        if self.retrieved:
            self._record(artifacts_retrieved=self.retrieved)

    def save_in(self, s: Session) -> None:
        """Write what a deferred turn held back (checkpoint, telemetry) in the transaction
        ``s``; a no-op for a turn that wrote them at once."""
        if self._checkpoint is not None:
            _save_checkpoint(s, self.session_id, *self._checkpoint)
            self._checkpoint = None
        if self._telemetry:
            _record_in(s, self.session_id, self.current.seq, self._telemetry)
            self._telemetry = {}

    def _record(self, **fields: Any) -> None:
        if self._deferred:
            self._telemetry.update(fields)
        else:
            self.engine.record(self.session_id, self.current.seq, **fields)

    # --- tools ---------------------------------------------------------------------------

    def fold_tool_output(self, content: str) -> str:
        """Tool output as the model should see it: verbatim when short, else an artifact card.

        Long output (logs, diffs, test runs, search results) is distilled into a card and its
        full text stored in the artifact store, retrievable with ``retrieve_artifact``.
        """
        return self.engine.fold_output(self.session, content)

    def add_item(self, kind: str, text: str, rationale: str = "") -> Item:
        """Add a constraint, decision, task or note to the state graph (InvalidInput if bad)."""
        if kind not in ITEM_KINDS:
            raise InvalidInput(f"unknown item kind {kind!r}; use one of {', '.join(ITEM_KINDS)}")
        text = " ".join(text.split())
        if not text or len(text) > 1000:
            raise InvalidInput("an item needs a text of 1 to 1000 characters")
        return self.state.add_item(
            kind, text, rationale=rationale[:1000], source="tool", turn=self.state.turn
        )

    def update_item(
        self,
        item_id: str,
        *,
        status: str | None = None,
        text: str | None = None,
        rationale: str | None = None,
    ) -> Item:
        """Change an item's status (open, done, dropped), text or rationale.

        Raises NotFound for an unknown id, InvalidInput for a bad status or text; a constraint
        or decision can be dropped only by saying so explicitly, never by leaving it out.
        """
        item = self.state.items.get(item_id.strip().upper())
        if item is None:
            raise NotFound(f"no item {item_id!r} in this thread's state")
        if status is not None:
            if status not in {"open", "done", "dropped"}:
                raise InvalidInput("status must be open, done or dropped")
            item.status = status
        if text is not None:
            if not text.strip() or len(text) > 1000:
                raise InvalidInput("an item needs a text of 1 to 1000 characters")
            item.text = " ".join(text.split())
        if rationale is not None:
            item.rationale = rationale[:1000]
        item.touched_turn = self.state.turn
        return item

    def search_artifact(self, ref: str, query: str, *, limit: int = 10) -> dict[str, Any]:
        """The lines of an artifact of this thread that hold the words of ``query``: each with
        its number (from 1), those holding the most words first, then in file order.

        Raises NotFound when the thread has no such artifact.
        """
        content, kind = self.engine.artifacts.get(
            self.session.tenant_id, ref, session_id=self.session_id
        )
        self.retrieved += 1
        found = matching_lines(content, query, limit=max(1, min(limit, 50)))
        return {
            "artifact": ref,
            "kind": kind,
            "query": query,
            "lines": [{"line": n, "text": text} for n, text in found],
        }

    def retrieve_artifact(self, ref: str, *, offset: int = 0, limit: int = 8000) -> dict[str, Any]:
        """A slice of an artifact of this thread: text, kind, offset, total and next offset.

        Raises NotFound when the thread has no such artifact.
        """
        content, kind = self.engine.artifacts.get(
            self.session.tenant_id, ref, session_id=self.session_id
        )
        offset = max(0, offset)
        limit = max(1, min(limit, RETRIEVE_MAX_CHARS))
        chunk = content[offset : offset + limit]
        end = offset + len(chunk)
        self.retrieved += 1
        return {
            "artifact": ref,
            "kind": kind,
            "offset": offset,
            "total_chars": len(content),
            "next_offset": end if end < len(content) else None,
            "text": chunk,
        }
