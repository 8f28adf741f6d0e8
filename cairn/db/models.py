"""The schema: SQLModel tables shared by the frontends, the workers, memory and memos.

Schema changes go through Alembic migrations in ``cairn/db/migrations`` only; a test compares
these models with the migrated database so the two cannot drift.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Column, Index, LargeBinary, UniqueConstraint
from sqlmodel import Field, SQLModel

from cairn.db.types import GatedJSON, GatedText, UTCDateTime

__all__ = [
    "AGENT_CHARS",
    "CHANNEL_CHARS",
    "EMOJI_CHARS",
    "PLATFORM_CHARS",
    "REF_CHARS",
    "TENANT_CHARS",
    "THREAD_CHARS",
    "USER_CHARS",
    "AgentRow",
    "AgentSession",
    "ApprovalStatus",
    "Artifact",
    "ArtifactImage",
    "ContextArtifact",
    "ContextCheckpoint",
    "ContextTelemetry",
    "DeadLetter",
    "Erasure",
    "EventKind",
    "EventStatus",
    "MemoReceipt",
    "MemoRow",
    "MemoryAudit",
    "MemoryOutbox",
    "MemoryRow",
    "MemoryUse",
    "OutboundMessage",
    "OutboundStatus",
    "Reaction",
    "SessionEvent",
    "StreamedReply",
    "Tenant",
    "ToolApproval",
    "utcnow",
]


# The longest names and platform ids the schema keeps, in characters. The columns below are
# declared with them and the edges (ChatEvent.validated, the console, the command line) refuse
# longer values by them, so that PostgreSQL (which rejects an over-long value) and SQLite
# (which stores it) behave the same. Changing one is a schema change: it needs a migration.
PLATFORM_CHARS = 32  # "slack", "matrix", "console"
TENANT_CHARS = 200  # a Slack workspace, a Matrix homeserver, the console's tenant
CHANNEL_CHARS = 200  # a Slack channel id, a Matrix room id
THREAD_CHARS = 200  # a thread's ref within its channel; one thread is one session
USER_CHARS = 200  # a person's (or a bot's) id: authors, senders, who retracted
AGENT_CHARS = 64  # an agent's name
REF_CHARS = 300  # a platform's event id, or a message ref "channel:message id"
EMOJI_CHARS = 100  # a reaction's emoji name
CONVERSATION_CHARS = 80  # a conversation's name as people know it ("#ops", a room's name)


def utcnow() -> datetime:
    """The current time, timezone-aware UTC (the only clock the schema uses)."""
    return datetime.now(UTC)


def _json() -> Any:
    return Field(default_factory=dict, sa_column=Column(GatedJSON, nullable=False))


class EventKind(StrEnum):
    """What a session event records."""

    MESSAGE = "message"  # a person's message, as received
    REACTION = "reaction"  # a reaction added or removed on a message of the thread
    TOOL_CALL = "tool_call"  # the agent asked for a tool, logged before it runs
    TOOL_RESULT = "tool_result"  # what the tool returned
    APPROVAL = "approval"  # a tool call held for a person's approval (docs/adr/0031)
    DECISION = "decision"  # a person approved or denied a held call, or it expired (inbound)
    REPLY = "reply"  # what the bot says, logged before it is posted
    NOTICE = "notice"  # a bot notice such as "remembered: ..."
    ERROR = "error"  # a failure the session recorded instead of silence


class EventStatus(StrEnum):
    """Where an inbound event stands; only inbound kinds move beyond ``done``."""

    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"


class OutboundStatus(StrEnum):
    """Delivery state of a message the bot wants to post."""

    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"


class Tenant(SQLModel, table=True):
    """A hard partition: one Slack workspace, one Matrix homeserver, or the console."""

    __tablename__ = "tenant"

    id: str = Field(primary_key=True, max_length=TENANT_CHARS)
    platform: str = Field(max_length=PLATFORM_CHARS)
    name: str = Field(default="", max_length=200)
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )


class AgentRow(SQLModel, table=True):
    """An agent (persona) of a tenant; its memory scope is keyed by its name."""

    __tablename__ = "agent"
    __table_args__ = (UniqueConstraint("tenant_id", "name", name="uq_agent_tenant_name"),)

    id: int | None = Field(default=None, primary_key=True)
    tenant_id: str = Field(foreign_key="tenant.id", max_length=TENANT_CHARS)
    name: str = Field(max_length=AGENT_CHARS)
    description: str = Field(default="", sa_column=Column(GatedText, nullable=False, default=""))
    instructions: str = Field(default="", sa_column=Column(GatedText, nullable=False, default=""))
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )


class AgentSession(SQLModel, table=True):
    """One chat thread (Slack thread, Matrix thread, console thread) is one agent session."""

    __tablename__ = "agent_session"
    __table_args__ = (
        UniqueConstraint("tenant_id", "channel", "thread_ref", name="uq_session_thread"),
    )

    id: int | None = Field(default=None, primary_key=True)
    tenant_id: str = Field(foreign_key="tenant.id", max_length=TENANT_CHARS, index=True)
    platform: str = Field(max_length=PLATFORM_CHARS)
    channel: str = Field(max_length=CHANNEL_CHARS)
    thread_ref: str = Field(max_length=THREAD_CHARS)
    agent: str = Field(max_length=AGENT_CHARS)
    status: str = Field(default="open", max_length=16)
    last_seq: int = Field(default=0)
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )
    updated_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )
    ended_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime, nullable=True))


class SessionEvent(SQLModel, table=True):
    """The durable, append-only event log of a session; each row is written before it acts."""

    __tablename__ = "session_event"
    __table_args__ = (
        UniqueConstraint("session_id", "seq", name="uq_event_seq"),
        UniqueConstraint("tenant_id", "event_ref", name="uq_event_ref"),
        UniqueConstraint("tenant_id", "message_ref", name="uq_event_message_ref"),
        Index("ix_event_pending", "session_id", "status"),
    )

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="agent_session.id")
    tenant_id: str = Field(max_length=TENANT_CHARS)
    seq: int
    kind: str = Field(max_length=16)
    status: str = Field(default=EventStatus.DONE, max_length=16)
    # Platform ids used for dedupe: the event id, and "channel:ts" for a message, so that
    # Slack's app_mention + message double delivery and retries collapse into one row.
    event_ref: str | None = Field(default=None, max_length=REF_CHARS)
    message_ref: str | None = Field(default=None, max_length=REF_CHARS)
    user: str = Field(default="", max_length=USER_CHARS)
    agent: str = Field(default="", max_length=AGENT_CHARS)
    text: str = Field(default="", sa_column=Column(GatedText, nullable=False, default=""))
    data: dict[str, Any] = _json()
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )


class OutboundMessage(SQLModel, table=True):
    """A message the bot posts, kept in an outbox so a task that runs twice posts once."""

    __tablename__ = "outbound_message"
    __table_args__ = (
        UniqueConstraint("cause_event_id", "seq", name="uq_outbound_cause_seq"),
        Index("ix_outbound_pending", "status", "platform"),
    )

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="agent_session.id", index=True)
    cause_event_id: int = Field(foreign_key="session_event.id")
    seq: int = Field(default=0)
    tenant_id: str = Field(max_length=TENANT_CHARS)
    platform: str = Field(max_length=PLATFORM_CHARS)
    channel: str = Field(max_length=CHANNEL_CHARS)
    thread_ref: str = Field(max_length=THREAD_CHARS)
    kind: str = Field(default="reply", max_length=16)
    agent: str = Field(default="", max_length=AGENT_CHARS)
    text: str = Field(default="", sa_column=Column(GatedText, nullable=False, default=""))
    data: dict[str, Any] = _json()
    status: str = Field(default=OutboundStatus.PENDING, max_length=16)
    attempts: int = Field(default=0)
    last_error: str = Field(default="", sa_column=Column(GatedText, nullable=False, default=""))
    message_ref: str | None = Field(default=None, max_length=REF_CHARS, index=True)
    # The platform's id of the message this one answers, when there is one (an identifier,
    # like message_ref: not gated).
    in_reply_to: str = Field(default="", max_length=REF_CHARS)
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )
    sent_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime, nullable=True))


class ApprovalStatus(StrEnum):
    """Where a tool call held for approval stands (docs/adr/0031).

    ``pending`` until a person decides or it expires; an approved call becomes ``running``
    when a worker takes it (a guarded update: it runs once) and ``ran`` when its result is kept;
    ``refused`` when it was approved but, by then, no longer allowed (the settings changed).
    """

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    RUNNING = "running"
    RAN = "ran"
    REFUSED = "refused"


class ToolApproval(SQLModel, table=True):
    """A tool call that waits, waited or ran after a person's approval (docs/adr/0031).

    Written with the reply of the turn that asked for it (so a turn redone after a crash asks
    once); unique per turn and tool call. The guarded moves of ``status`` make a decision count
    once and an approved call run once; ``result`` keeps what the model was given of its run.
    """

    __tablename__ = "tool_approval"
    __table_args__ = (
        UniqueConstraint("cause_event_id", "tool_use_id", name="uq_approval_call"),
        Index("ix_approval_due", "status", "expires_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="agent_session.id", index=True)
    tenant_id: str = Field(max_length=TENANT_CHARS)
    cause_event_id: int = Field(foreign_key="session_event.id")
    tool_use_id: str = Field(max_length=REF_CHARS)
    agent: str = Field(default="", max_length=AGENT_CHARS)
    tool: str = Field(max_length=REF_CHARS)  # the name the model called (SERVER__TOOL)
    server: str = Field(max_length=AGENT_CHARS)
    server_tool: str = Field(max_length=REF_CHARS)
    arguments: dict[str, Any] = _json()
    requested_by: str = Field(default="", max_length=USER_CHARS)
    requested_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )
    expires_at: datetime = Field(sa_column=Column(UTCDateTime, nullable=False))
    status: str = Field(default=ApprovalStatus.PENDING, max_length=16)
    decided_by: str = Field(default="", max_length=USER_CHARS)
    decided_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime, nullable=True))
    started_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime, nullable=True))
    duration_ms: float | None = None
    outcome: str = Field(default="", max_length=32)
    result: str = Field(default="", sa_column=Column(GatedText, nullable=False, default=""))


class StreamedReply(SQLModel, table=True):
    """The platform messages a reply is being streamed into, before its final text is posted.

    The frontend records each message it opens for a reply that streams (ADR 0027); whoever
    posts the reply from the outbox edits these messages into the final text instead of posting
    new ones, also after the frontend that streamed it restarted. ``data["refs"]`` lists them in
    order, each a platform reference the frontend understands.
    """

    __tablename__ = "streamed_reply"

    cause_event_id: int = Field(primary_key=True, foreign_key="session_event.id")
    tenant_id: str = Field(max_length=TENANT_CHARS)
    platform: str = Field(max_length=PLATFORM_CHARS)
    data: dict[str, Any] = _json()
    updated_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )


class MemoryRow(SQLModel, table=True):
    """A long-term memory, scoped by tenant (always) and by agent, channel, user, thread."""

    __tablename__ = "memory"
    __table_args__ = (
        UniqueConstraint("tenant_id", "scope_key", "content_hash", name="uq_memory_dedupe"),
        Index("ix_memory_scope", "tenant_id", "agent", "retracted"),
        # A write looks for its text in every partition (a retraction sticks everywhere it is
        # seen) and at the newest retracted memories: both by index, not by tenant scan.
        Index("ix_memory_hash", "tenant_id", "content_hash", "retracted"),
        Index("ix_memory_retracted", "tenant_id", "retracted", "id"),
        # A fact's earlier values are found by what they are about, within the partition.
        Index("ix_memory_subject", "tenant_id", "scope_key", "subject"),
        # Recall reads a tenant's authors' names, to take them out of a dense query (ADR 0048).
        Index("ix_memory_author", "tenant_id", "author"),
    )

    id: int | None = Field(default=None, primary_key=True)
    tenant_id: str = Field(foreign_key="tenant.id", max_length=TENANT_CHARS)
    agent: str | None = Field(default=None, max_length=AGENT_CHARS)
    channel: str | None = Field(default=None, max_length=CHANNEL_CHARS)
    user_id: str | None = Field(default=None, max_length=USER_CHARS)
    thread_ref: str | None = Field(default=None, max_length=THREAD_CHARS)
    visibility: str = Field(default="private", max_length=16)
    scope_key: str = Field(max_length=600)
    kind: str = Field(default="fact", max_length=16)
    text: str = Field(sa_column=Column(GatedText, nullable=False))
    content_hash: str = Field(max_length=64)
    source_platform: str = Field(default="", max_length=PLATFORM_CHARS)
    source_channel: str = Field(default="", max_length=CHANNEL_CHARS)
    source_thread: str = Field(default="", max_length=THREAD_CHARS)
    source_message: str = Field(default="", max_length=REF_CHARS)
    # The name of the conversation it was said in, as people knew it then ("#ops", a Matrix
    # room's name); "" when the frontend did not know one. Shown with the memory wherever it is
    # recalled, which is only where its conversation's memory may be recalled.
    source_conversation: str = Field(default="", max_length=CONVERSATION_CHARS)
    author: str = Field(default="", max_length=USER_CHARS)
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )
    updated_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )
    last_recalled_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime, nullable=True)
    )
    recall_count: int = Field(default=0)
    validity: float = Field(default=0.0)
    usefulness: float = Field(default=0.0)
    confirmed: bool = Field(default=False)
    disputes: int = Field(default=0)
    tier: str = Field(default="hot", max_length=8)
    merges: int = Field(default=0)  # near-duplicates folded into this memory
    untrusted: bool = Field(default=False)  # written from a guest, a bot or a listed user
    # Reads like an instruction to the assistant: unconfirmed until someone else confirms it.
    flagged: bool = Field(default=False)
    # The private conversation (channel id) it was learned in and stays in; NULL: the workspace's.
    private_to: str | None = Field(default=None, max_length=CHANNEL_CHARS)
    retracted: bool = Field(default=False)
    retracted_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime, nullable=True)
    )
    retracted_by: str = Field(default="", max_length=USER_CHARS)
    retraction_reason: str = Field(
        default="", sa_column=Column(GatedText, nullable=False, default="")
    )
    # What a fact gives a value for ("is:call payment", see cairn.memory.claims); "" for none.
    subject: str = Field(default="", max_length=200)
    # When a newer value of the same subject replaced this one (kept for audit and "as of").
    valid_until: datetime | None = Field(default=None, sa_column=Column(UTCDateTime, nullable=True))
    superseded_by: int | None = Field(default=None)  # the memory that replaced it


class MemoryOutbox(SQLModel, table=True):
    """Pending vector-index work, written in the memory's own transaction (see ADR 0003)."""

    __tablename__ = "memory_outbox"

    id: int | None = Field(default=None, primary_key=True)
    memory_id: int = Field(foreign_key="memory.id", index=True)
    op: str = Field(default="upsert", max_length=16)
    attempts: int = Field(default=0)
    last_error: str = Field(default="", sa_column=Column(GatedText, nullable=False, default=""))
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )


class MemoryAudit(SQLModel, table=True):
    """A recorded act on a memory that changes who sees it (share, unshare), kept for good.

    ``data`` holds what the act replaced (visibility, owner agent, dedupe partition), so that
    undoing it restores the memory exactly.
    """

    __tablename__ = "memory_audit"

    id: int | None = Field(default=None, primary_key=True)
    tenant_id: str = Field(max_length=TENANT_CHARS)
    memory_id: int = Field(foreign_key="memory.id", index=True)
    action: str = Field(max_length=16)
    actor: str = Field(max_length=USER_CHARS)  # the person or agent who did it
    agent: str = Field(max_length=AGENT_CHARS)  # the agent in whose scope it was done
    data: dict[str, Any] = _json()
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )


class MemoryUse(SQLModel, table=True):
    """Which memories a bot message showed, used or announced; reactions act on these."""

    __tablename__ = "memory_use"
    __table_args__ = (UniqueConstraint("outbound_id", "memory_id", "role", name="uq_memory_use"),)

    id: int | None = Field(default=None, primary_key=True)
    outbound_id: int = Field(foreign_key="outbound_message.id", index=True)
    memory_id: int = Field(foreign_key="memory.id", index=True)
    role: str = Field(max_length=16)  # shown | used | announced


class Reaction(SQLModel, table=True):
    """A person's reaction on a bot message, and what it did, so removal can undo it exactly."""

    __tablename__ = "reaction"
    __table_args__ = (UniqueConstraint("outbound_id", "user", "emoji", name="uq_reaction_once"),)

    id: int | None = Field(default=None, primary_key=True)
    tenant_id: str = Field(max_length=TENANT_CHARS)
    outbound_id: int = Field(foreign_key="outbound_message.id", index=True)
    user: str = Field(max_length=USER_CHARS)
    emoji: str = Field(max_length=EMOJI_CHARS)
    effect: str = Field(max_length=16)
    event_ref: str | None = Field(default=None, max_length=REF_CHARS, index=True)
    data: dict[str, Any] = _json()
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )
    removed_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime, nullable=True))


class MemoRow(SQLModel, table=True):
    """A memo from an agent or a person to one agent (or ``*``: all agents of the tenant)."""

    __tablename__ = "memo"
    __table_args__ = (Index("ix_memo_inbox", "tenant_id", "recipient"),)

    id: int | None = Field(default=None, primary_key=True)
    tenant_id: str = Field(foreign_key="tenant.id", max_length=TENANT_CHARS)
    sender: str = Field(max_length=USER_CHARS)
    recipient: str = Field(max_length=AGENT_CHARS)
    text: str = Field(sa_column=Column(GatedText, nullable=False))
    priority: int = Field(default=0)
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )
    expires_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime, nullable=True))
    # The private conversation it was sent from, and the only one it is shown in; NULL: any.
    private_to: str | None = Field(default=None, max_length=CHANNEL_CHARS)
    # The person whose turn made an agent send it ("": an operator's, or sent before 0012).
    asked_by: str = Field(default="", max_length=USER_CHARS)
    # Reads like an instruction to the assistant: shown to its recipient as flagged.
    flagged: bool = Field(default=False)


class MemoReceipt(SQLModel, table=True):
    """Read / acknowledged state of a memo for one recipient agent."""

    __tablename__ = "memo_receipt"
    __table_args__ = (UniqueConstraint("memo_id", "agent", name="uq_memo_receipt"),)

    id: int | None = Field(default=None, primary_key=True)
    memo_id: int = Field(foreign_key="memo.id", index=True)
    agent: str = Field(max_length=AGENT_CHARS)
    read_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime, nullable=True))
    acked_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime, nullable=True))


class Artifact(SQLModel, table=True):
    """Content-addressed full text of distilled tool output or pasted logs."""

    __tablename__ = "artifact"

    sha256: str = Field(primary_key=True, max_length=64)
    tenant_id: str = Field(max_length=TENANT_CHARS, index=True)
    kind: str = Field(default="text", max_length=32)
    content: str = Field(sa_column=Column(GatedText, nullable=False))
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )


class ArtifactImage(SQLModel, table=True):
    """The bytes of an attached image, kept for a model that reads images (docs/adr/0040).

    Keyed by its card's artifact (whose text names the image and the SHA-256 of these bytes),
    so a session reads it through that artifact's link, and it goes when the artifact goes
    (erasure, retention). Only an image a model is sent is kept: PNG, JPEG, GIF or WebP
    within the Messages API's limits.
    """

    __tablename__ = "artifact_image"

    sha256: str = Field(primary_key=True, foreign_key="artifact.sha256", max_length=64)
    media_type: str = Field(max_length=32)
    width: int
    height: int
    data: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


class ContextArtifact(SQLModel, table=True):
    """An artifact as one session saw it: the card's title, and who may retrieve it.

    The content is stored once per hash (``artifact``); this row is what lets a session of
    a tenant retrieve it, so one tenant can never read another's paste by guessing a hash.
    """

    __tablename__ = "context_artifact"
    __table_args__ = (UniqueConstraint("session_id", "sha256", name="uq_context_artifact"),)

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="agent_session.id", index=True)
    tenant_id: str = Field(max_length=TENANT_CHARS)
    sha256: str = Field(foreign_key="artifact.sha256", max_length=64, index=True)
    kind: str = Field(default="text", max_length=32)
    title: str = Field(default="", sa_column=Column(GatedText, nullable=False, default=""))
    chars: int = Field(default=0)
    tokens: int = Field(default=0)
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )


class ContextCheckpoint(SQLModel, table=True):
    """A session's compact state through one event (state graph, digests, units), derived
    deterministically from the event log; a worker resumes from it plus the events after it."""

    __tablename__ = "context_checkpoint"

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="agent_session.id", index=True, unique=True)
    through_seq: int = Field(default=0)
    turn: int = Field(default=0)
    version: int = Field(default=1)
    state: dict[str, Any] = _json()
    updated_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )


class ContextTelemetry(SQLModel, table=True):
    """What the context engine did for one turn: tokens per band, pressure, what it showed."""

    __tablename__ = "context_telemetry"
    __table_args__ = (UniqueConstraint("session_id", "event_seq", name="uq_context_telemetry"),)

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="agent_session.id", index=True)
    event_seq: int
    mode: str = Field(default="engine", max_length=16)
    level: str = Field(default="normal", max_length=16)
    pressure: float = Field(default=0.0)
    budget: int = Field(default=0)
    prompt_tokens: int = Field(default=0)
    bands: dict[str, Any] = _json()
    memories_recalled: int = Field(default=0)
    memos_shown: int = Field(default=0)
    hydrated: int = Field(default=0)
    artifacts_created: int = Field(default=0)
    artifacts_retrieved: int = Field(default=0)
    compile_ms: float = Field(default=0.0)
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )


class DeadLetter(SQLModel, table=True):
    """An event that kept failing: kept with the reason, for people to look at and replay."""

    __tablename__ = "dead_letter"

    id: int | None = Field(default=None, primary_key=True)
    event_id: int = Field(foreign_key="session_event.id", index=True, unique=True)
    session_id: int = Field(foreign_key="agent_session.id")
    tenant_id: str = Field(max_length=TENANT_CHARS)
    reason: str = Field(sa_column=Column(GatedText, nullable=False))
    attempts: int = Field(default=1)
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )
    replayed_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime, nullable=True))


class Erasure(SQLModel, table=True):
    """A person erased on request (``cairn memory erase``, docs/adr/0043): who was erased,
    by whom, when, and how many rows of each kind went; never anything they said."""

    __tablename__ = "erasure"

    id: int | None = Field(default=None, primary_key=True)
    tenant_id: str = Field(default="", max_length=TENANT_CHARS)  # "": every tenant
    person: str = Field(max_length=USER_CHARS)
    erased_by: str = Field(max_length=USER_CHARS)
    counts: dict[str, Any] = _json()
    created_at: datetime = Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime, nullable=False)
    )
