"""Cairn's settings, read once from the environment and an optional ``cairn.toml``, by section.

Each setting is declared once, with its default, in the section of the code that uses it:
``settings.llm``, ``settings.slack``, ``settings.matrix``, ``settings.context``,
``settings.memory`` and ``settings.workers``; what every part shares stays at the top.
A field ``name`` of a section is read from the variable ``PREFIX + NAME`` (``half_life_days`` of
``memory`` from CAIRN_MEMORY_HALF_LIFE_DAYS); a field read from a variable outside its section's
prefix names it (``alias``). In cairn.toml the key is the lower-cased variable name. Environment
variables win over the file; a missing or contradictory setting raises
:class:`~cairn.core.errors.ConfigError` naming the variable (docs/adr/0024).

Over 500 lines: each of Cairn's settings is declared here once, with its default and comment.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from contextlib import suppress
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, get_origin
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from cairn.core.bounded import bounded_setting
from cairn.core.errors import ConfigError
from cairn.core.redact import mask_url, mask_urls, url_secrets

__all__ = [
    "AgentSpec",
    "ContextSettings",
    "LlmSettings",
    "MatrixSettings",
    "McpServerSpec",
    "McpSettings",
    "MemorySettings",
    "Settings",
    "SlackSettings",
    "WorkerSettings",
    "config_file",
    "get_settings",
    "load_settings",
    "variables",
]

DEFAULT_SLACK_API_URL = "https://slack.com/api/"


def config_file() -> Path | None:
    """Where ``cairn.toml`` is read from: ``CAIRN_CONFIG``, else ./cairn.toml, else CAIRN_HOME's."""
    explicit = os.environ.get("CAIRN_CONFIG")
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"CAIRN_CONFIG points at {path}, which is not a file")
        return path
    for candidate in (Path.cwd() / "cairn.toml", _home_from_env() / "cairn.toml"):
        if candidate.is_file():
            return candidate
    return None


def _home_from_env() -> Path:
    return Path(os.environ.get("CAIRN_HOME") or "~/.cairn").expanduser()


def _prefixed(prefix: str) -> ConfigDict:
    """A section's model config: a field is read from ``prefix + NAME`` unless it has an alias.

    The alias only names the variable; the models themselves are built by field name.
    """

    def variable(name: str) -> str:
        return prefix + name.upper()

    return ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=variable,
        validate_by_name=True,
        validate_by_alias=False,
    )


AGENT_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


class AgentSpec(BaseModel):
    """One agent (persona) as declared in cairn.toml under ``[agents.NAME]``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    instructions: str = ""
    model: str | None = None
    tools: list[str] | None = None  # None: every tool
    channels: list[str] = []  # channels (ids or names) where this agent answers by default
    # The agent has a bot identity of its own (its own Slack app or Matrix user), served by a
    # frontend started with CAIRN_AGENT set to its name; the shared identity leaves it alone.
    own_identity: bool = False
    # MCP servers (names of [mcp_servers.NAME]) whose tools this agent may call; None: every
    # declared server, []: none. ``mcp_tools`` narrows further: glob patterns over the names the
    # model sees ("ops__service_*"); None: every tool of those servers (docs/adr/0031).
    mcp_servers: list[str] | None = None
    mcp_tools: list[str] | None = None
    # Who may approve this agent's tool calls that need approval: user ids, or "admins" (the
    # workspace or room admins, and CAIRN_ADMINS); None: as the server and CAIRN_MCP_APPROVERS say.
    approvers: list[str] | None = None


# An undeclared agent's declaration: one frozen instance, not a model built per message.
_UNDECLARED = AgentSpec()


SERVER_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,23}$")
# A tool runs at once ("read") or waits for a person's approval ("needs approval").
Approval = Literal["read", "needs approval"]


class McpServerSpec(BaseModel):
    """One MCP server as declared in cairn.toml under ``[mcp_servers.NAME]`` (docs/adr/0031).

    A stdio server has a ``command`` (with ``args``, ``env`` and ``cwd``); a streamable HTTP
    server a ``url`` (with ``headers``). ``env`` and ``headers`` hold credentials: they are
    secrets, masked in ``cairn config`` and in logs. ``allow`` names the server's tools any agent
    may see at all (glob patterns); ``approval`` is the default for its tools and ``approvals``
    overrides it per tool name or pattern (the most specific pattern wins).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    command: str | None = Field(default=None, min_length=1)
    args: list[str] = []
    env: dict[str, SecretStr] = {}
    cwd: Path | None = None
    url: str | None = None
    headers: dict[str, SecretStr] = {}
    allow: list[str] = ["*"]
    approval: Approval = "needs approval"
    approvals: dict[str, Approval] = {}
    # Seconds a call may take before the model is told it timed out; None: CAIRN_MCP_CALL_TIMEOUT.
    timeout: float | None = Field(default=None, gt=0, le=3600)
    # Who may approve this server's calls: user ids, or "admins"; None: CAIRN_MCP_APPROVERS.
    approvers: list[str] | None = None
    # Seconds a request for approval stays open; None: CAIRN_MCP_APPROVAL_TTL.
    approval_ttl: float | None = Field(default=None, ge=1, le=7 * 86400)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("needs either command (a stdio server) or url (streamable HTTP)")
        if self.url is not None and urlsplit(self.url).scheme not in {"http", "https"}:
            raise ValueError(f"url must be an http:// or https:// URL, got {mask_url(self.url)!r}")
        if self.url is None and self.headers:
            raise ValueError("headers are for a url server; a command server takes env")
        if self.command is None and (self.args or self.env or self.cwd):
            raise ValueError(
                "args, env and cwd are for a command server; a url server takes headers"
            )
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """How Cairn talks to the server."""
        return "stdio" if self.command is not None else "http"

    @property
    def where(self) -> str:
        """The command line or the URL (credentials masked), for people to read."""
        if self.command is not None:
            return " ".join([self.command, *self.args])
        return mask_url(self.url or "")


class LlmSettings(BaseModel):
    """The language model and its adapter (cairn/llm): CAIRN_LLM_*."""

    model_config = _prefixed("CAIRN_LLM_")

    mode: Literal["auto", "anthropic", "openai", "offline"] = Field(
        default="auto", alias="CAIRN_LLM"
    )
    anthropic_api_key: SecretStr | None = Field(default=None, alias="ANTHROPIC_API_KEY")
    anthropic_base_url: str | None = Field(default=None, alias="ANTHROPIC_BASE_URL")
    # An OpenAI-compatible endpoint (cairn/llm/openai.py, docs/adr/0036): OpenAI, vLLM, Ollama,
    # llama.cpp, LM Studio, a gateway; or Azure OpenAI with its endpoint, deployment and version.
    openai_api_key: SecretStr | None = Field(default=None, alias="OPENAI_API_KEY")
    openai_base_url: str | None = Field(default=None, alias="OPENAI_BASE_URL")
    azure_endpoint: str | None = Field(default=None, alias="AZURE_OPENAI_ENDPOINT")
    azure_deployment: str | None = Field(default=None, alias="AZURE_OPENAI_DEPLOYMENT")
    azure_api_version: str | None = Field(default=None, alias="OPENAI_API_VERSION")
    model: str = Field(default="claude-sonnet-4-6", alias="CAIRN_MODEL")
    # False for a model that cannot call tools: it is sent none and answers from the memories
    # recalled into its prompt. Unset: what `cairn doctor` last found for this OpenAI-compatible
    # endpoint and model (CAIRN_HOME/model_tools.json, trusted 30 days), else True. A setting
    # always wins over the finding (docs/adr/0036).
    model_tools: bool | None = Field(default=None, alias="CAIRN_MODEL_TOOLS")
    # True to show the model the images people attach (PNG, JPEG, GIF, WebP within the Messages
    # API's limits), in the turn they came with. Off by default: the gate that masks every
    # credential reads no pixels, so a screenshot of a token would reach the model's provider
    # as it is (docs/adr/0040). Turn it on for a model that reads images (Claude does).
    model_images: bool = Field(default=False, alias="CAIRN_MODEL_IMAGES")
    # Stream answers (the Messages API's SSE), so that people see them as they are written.
    stream: bool = True
    # Seconds the offline model waits between two word groups it streams (0: all at once), so
    # that `cairn bench stream` can watch an answer being written without a network.
    offline_delay: float = Field(default=0.0, ge=0, le=5)
    max_retries: int = Field(default=4, ge=0, le=20)
    timeout: float = Field(default=120.0, gt=0)
    max_output_tokens: int = Field(default=1024, ge=16, le=64000, alias="CAIRN_MAX_OUTPUT_TOKENS")
    max_tool_rounds: int = Field(default=8, ge=1, le=50, alias="CAIRN_MAX_TOOL_ROUNDS")

    @property
    def provider(self) -> Literal["anthropic", "openai", "offline"]:
        """Which LLM adapter to use: the one CAIRN_LLM names; unset, Anthropic when its key is
        set, else offline (an OpenAI-compatible endpoint is always asked for by name)."""
        if self.mode == "auto":
            return "anthropic" if self.anthropic_api_key else "offline"
        return self.mode


class SlackSettings(BaseModel):
    """The Slack frontend (cairn/bot/slack): Slack's own SLACK_* credentials, CAIRN_SLACK_*."""

    model_config = _prefixed("CAIRN_SLACK_")

    bot_token: SecretStr | None = Field(default=None, alias="SLACK_BOT_TOKEN")
    app_token: SecretStr | None = Field(default=None, alias="SLACK_APP_TOKEN")
    signing_secret: SecretStr | None = Field(default=None, alias="SLACK_SIGNING_SECRET")
    # OAuth install for many workspaces (instead of one SLACK_BOT_TOKEN).
    client_id: str | None = Field(default=None, alias="SLACK_CLIENT_ID")
    client_secret: SecretStr | None = Field(default=None, alias="SLACK_CLIENT_SECRET")
    api_url: str = Field(default=DEFAULT_SLACK_API_URL, alias="SLACK_API_URL")
    # Where the HTTP Events API server listens.
    http_host: str = Field(
        default="0.0.0.0",  # noqa: S104 - a server in a container listens on every interface
        alias="CAIRN_HTTP_HOST",
    )
    http_port: int = Field(default=3000, ge=0, le=65535, alias="CAIRN_HTTP_PORT")
    follow_threads: bool = True
    answer_without_mention: Literal["never", "questions", "always"] = "questions"
    allow_bots: bool = False
    working_emoji: str = Field(default="eyes", min_length=1)
    message_chars: int = Field(default=3900, ge=100, le=40000)
    api_retries: int = Field(default=5, ge=0, le=20)
    # Slack's rate limits on reading threads (cairn/bot/slack/backfill.py): "limited" for an
    # app outside the Marketplace (1 request a minute, 15 messages), "marketplace" for a
    # Marketplace-approved or internal app (Tier 3).
    history_tier: Literal["limited", "marketplace"] = "limited"
    # Answers as they are written (docs/adr/0027): "stream" (chat.startStream where Slack
    # accepts it, else post and chat.update), "update" (always post and update), "off".
    stream_mode: Literal["stream", "update", "off"] = "stream"
    # Least seconds between two updates of one streamed answer, and most updates per message.
    stream_interval: float = Field(default=1.0, ge=0.05, le=60)
    stream_updates: int = Field(default=60, ge=1, le=1000)

    @property
    def oauth(self) -> bool:
        """Whether Slack workspaces install Cairn through OAuth (SLACK_CLIENT_ID and secret)."""
        return bool(self.client_id and self.client_secret)

    @property
    def enabled(self) -> bool:
        """Whether the Slack frontend is configured (a bot token, or the OAuth install)."""
        return self.bot_token is not None or self.oauth


class MatrixSettings(BaseModel):
    """The Matrix frontend (cairn/bot/matrix): the account in MATRIX_*, CAIRN_MATRIX_*."""

    model_config = _prefixed("CAIRN_MATRIX_")

    homeserver: str | None = Field(default=None, alias="MATRIX_HOMESERVER")
    user_id: str | None = Field(default=None, alias="MATRIX_USER_ID")
    password: SecretStr | None = Field(default=None, alias="MATRIX_PASSWORD")
    access_token: SecretStr | None = Field(default=None, alias="MATRIX_ACCESS_TOKEN")
    # Comma-separated user ids and ":server" patterns; unset: users of the bot's homeserver.
    allowed_inviters: str | None = None
    # Comma-separated homeservers whose users are trusted besides the bot's own; * for any.
    # Users of other servers are heard, but what they teach starts untrusted (docs/adr/0011).
    trusted_servers: str | None = None
    # End-to-end encryption (docs/adr/0026): reads and answers in encrypted rooms and DMs.
    encryption: bool = True
    # The crypto store (keys, sessions, device trust); unset: CAIRN_HOME/matrix/store.
    store: Path | None = None
    # How long an event whose keys have not arrived waits before its sender is told.
    key_wait_seconds: float = Field(default=300.0, gt=0, le=7 * 86400)
    # Comma-separated devices never trusted: device ids, @user:server/DEVICE, or ed25519 keys.
    blocked_devices: str | None = None
    # Answers as they are written (docs/adr/0027): the first text as a message in the thread,
    # then m.replace edits at most every stream_interval seconds, at most stream_edits of them
    # before the final edit (rooms grow heavy under hundreds of edits).
    stream: bool = True
    stream_interval: float = Field(default=1.5, ge=0.05, le=60)
    stream_edits: int = Field(default=20, ge=1, le=500)
    # UTF-8 bytes of Markdown per message; a longer answer is split (its HTML is a few times
    # that, and an event must stay under Matrix's 64 KiB).
    message_bytes: int = Field(default=12_000, ge=1000, le=16_000)

    def store_dir(self, home: Path) -> Path:
        """The crypto store folder: CAIRN_MATRIX_STORE, or ``home``/matrix/store."""
        return self.store.expanduser() if self.store else home / "matrix" / "store"

    @property
    def blocked(self) -> tuple[str, ...]:
        """The devices CAIRN_MATRIX_BLOCKED_DEVICES names."""
        return tuple(_split_commas(self.blocked_devices))

    @property
    def inviters(self) -> tuple[str, ...]:
        """Who may invite the Matrix bot: user ids and ``:server`` patterns.

        CAIRN_MATRIX_ALLOWED_INVITERS, or else the users of the bot's own homeserver.
        """
        patterns = _split_commas(self.allowed_inviters)
        if patterns:
            return tuple(patterns)
        server = _server_of(self.user_id)
        return (f":{server}",) if server else ()

    @property
    def trusted(self) -> tuple[str, ...]:
        """Homeservers whose users are trusted: the bot's own and CAIRN_MATRIX_TRUSTED_SERVERS."""
        server = _server_of(self.user_id)
        listed = _split_commas(self.trusted_servers)
        return tuple(dict.fromkeys([*([server] if server else []), *listed]))


class ContextSettings(BaseModel):
    """The context engine (cairn/memory/context): CAIRN_CONTEXT_*."""

    model_config = _prefixed("CAIRN_CONTEXT_")

    budget: int = Field(default=30000, ge=1000, le=1_000_000)
    # "classic" sends the plain recent transcript.
    mode: Literal["engine", "classic"] = "engine"
    recent_turns: int = Field(default=6, ge=1, le=100)
    # Idle turns after which a state-graph item leaves the active tier, then the soft tier.
    soft_after: int = Field(default=8, ge=1, le=10_000)
    hard_after: int = Field(default=30, ge=2, le=100_000)
    hydrate_threshold: float = Field(default=2.0, ge=0)
    # Scoring of units: pin + recency + max(BM25, semantic) + hydrate boost, each weighted.
    weight_pin: float = Field(default=1.0, ge=0)
    weight_recency: float = Field(default=1.0, ge=0)
    weight_relevance: float = Field(default=2.0, ge=0)
    weight_hydrate: float = Field(default=1.5, ge=0)
    # Context pressure (density-weighted share of the budget) that starts each level.
    compact_at: float = Field(default=0.6, gt=0, le=1.0)
    emergency_at: float = Field(default=0.85, gt=0, le=1.0)
    # Pasted text or tool output longer than this is distilled into an artifact and a card.
    distill_chars: int = Field(default=1500, ge=200, le=1_000_000)
    # Memories recalled for the engine to choose from: its memory band takes its share, then
    # the room the other bands leave, best first (docs/adr/0032).
    memory_pool: int = Field(default=30, ge=1, le=500)


class MemorySettings(BaseModel):
    """Long-term memory (cairn/memory): recall, embeddings, ranking weights, tiers; CAIRN_MEMORY_*.

    Recall ranks by it (cairn/memory/ranking) and tier rotation follows it (cairn/memory/tiers).
    """

    model_config = _prefixed("CAIRN_MEMORY_")

    recall_k: int = Field(default=5, ge=1, le=100, alias="CAIRN_RECALL_K")
    # auto | none | packaged | path:/folder | fastembed:MODEL | sentence-transformers:MODEL
    embeddings: str = Field(default="auto", min_length=1, alias="CAIRN_EMBEDDINGS")
    # How the local model runs: onnx (int8, ~7x less CPU), numpy (float32), auto (onnx if it loads).
    embedding_engine: Literal["auto", "onnx", "numpy"] = Field(
        default="auto", alias="CAIRN_EMBEDDING_ENGINE"
    )
    # score: weighted sum of min-max normalised scores; rrf: reciprocal-rank fusion.
    fusion: Literal["score", "rrf"] = "score"
    # How many candidates each of the lexical and dense searches proposes.
    candidates: int = Field(default=50, ge=5, le=1000)
    # Held out, every fold now chooses 0.4 / 0.6 (ADR 0048), but that costs the context
    # engine 2 points of evidence at 4,000 tokens (bench context --locomo) and 0.5 / 0.5 one;
    # 0.6 / 0.4 costs it nothing. Neither weight may go under 0.4: a memory with two "not
    # useful" reactions would then stay in a top 5 (cairn bench feedback; ADR 0030).
    weight_lexical: float = Field(default=0.6, ge=0)
    weight_dense: float = Field(default=0.4, ge=0)
    weight_context: float = Field(default=0.5, ge=0)
    # How many turns either side of a matching episodic turn share its relevance.
    context_turns: int = Field(default=2, ge=0, le=10)
    # Boost for memories written within a date the query names ("on 9 November, 2022").
    weight_period: float = Field(default=0.5, ge=0)
    weight_recency: float = Field(default=0.05, ge=0, le=1)
    weight_validity: float = Field(default=0.1, ge=0)
    weight_usefulness: float = Field(default=0.05, ge=0)
    # Each net "not useful" reaction multiplies a memory's rank by 1 - this (see ranking.py).
    weight_unhelpful: float = Field(default=0.85, ge=0, le=1)
    weight_disputes: float = Field(default=0.1, ge=0)
    weight_scope: float = Field(default=0.05, ge=0)
    # The factor on the rank of an unconfirmed memory from an untrusted author (1: no penalty).
    weight_untrusted: float = Field(default=0.6, ge=0, le=1)
    # The factor on the rank of an unconfirmed memory that reads like an instruction.
    weight_flagged: float = Field(default=0.5, ge=0, le=1)
    # The factor on the rank of a fact a newer value replaced (or, for a question about a past
    # date, of one that did not hold then); see cairn/memory/supersession.
    weight_superseded: float = Field(default=0.25, ge=0, le=1)
    # Boost for a fact whose subject the query names ("who owns payments?" for "Alice owns
    # payments"; see cairn/memory/claims.asks_about).
    weight_subject: float = Field(default=1.0, ge=0)
    # Boost for a memory whose author the query names ("what did Caroline paint?" for a turn
    # Caroline wrote; see cairn/memory/speakers). Chosen held-out (ADR 0030, ADR 0048).
    weight_speaker: float = Field(default=1.0, ge=0)
    # Pseudo-relevance feedback: a second lexical search for the query with the words of the
    # best ``feedback_docs`` candidates, fused with this weight (0: off). See ADR 0039.
    weight_feedback: float = Field(default=0.15, ge=0)
    feedback_docs: int = Field(default=2, ge=1, le=20)
    # Off: newer values of a fact no longer end older ones (what Cairn did before issue 20).
    supersede: bool = True
    weight_warm: float = Field(default=0.9, ge=0, le=1)
    weight_cold: float = Field(default=0.75, ge=0, le=1)
    half_life_days: float = Field(default=30.0, gt=0)
    near_duplicate: float = Field(default=0.9, gt=0, le=1)
    # Tier rotation: the standing below which a memory is warm, then cold; per-tenant budgets.
    warm_below: float = Field(default=0.5, ge=0, le=1)
    cold_below: float = Field(default=0.1, ge=0, le=1)
    hot_budget: int = Field(default=2000, ge=1)
    warm_budget: int = Field(default=20000, ge=1)
    prune_after_days: float = Field(default=365.0, gt=0)
    working_ttl: float = Field(default=3600.0, gt=0, alias="CAIRN_WORKING_MEMORY_TTL")


class McpSettings(BaseModel):
    """MCP tool servers (cairn/mcp, docs/adr/0031): CAIRN_MCP_*, servers as [mcp_servers.NAME]."""

    model_config = _prefixed("CAIRN_MCP_")

    servers: dict[str, McpServerSpec] = {}
    # Seconds to start a server (spawn or connect, handshake, first tool list).
    connect_timeout: float = Field(default=20.0, gt=0, le=600)
    # Seconds a tool call may take, unless its server declares its own timeout.
    call_timeout: float = Field(default=30.0, gt=0, le=3600)
    # After a server failed to start, seconds before it is tried again (turns go on without it).
    retry_after: float = Field(default=30.0, ge=0, le=3600)
    # Who may approve a call, unless its server or agent names people: user ids, or "admins"
    # (the workspace or room admins, and CAIRN_ADMINS).
    approvers: list[str] = ["admins"]
    # Seconds a request for approval stays open before it expires unanswered.
    approval_ttl: float = Field(default=900.0, ge=1, le=7 * 86400)
    # The reactions that approve and deny a request (short names: white_check_mark is ✅).
    approve_reaction: str = Field(default="white_check_mark", min_length=1, max_length=100)
    deny_reaction: str = Field(default="x", min_length=1, max_length=100)


class WorkerSettings(BaseModel):
    """Upkeep and the workers' pacing (cairn/workers): CAIRN_* (no prefix of their own).

    How often periodic jobs run, when a pending event counts as stuck, when an idle session
    ends (which triggers learning extraction), and how session locks are held and waited for.
    """

    model_config = _prefixed("CAIRN_")

    beat_interval: float = Field(default=30.0, ge=1)
    stale_after: float = Field(default=60.0, ge=1)
    session_idle: float = Field(default=6 * 3600.0, ge=60)
    # Expired memos are never delivered; upkeep deletes them (and their receipts) this long after.
    memo_keep_expired: float = Field(default=7 * 86400.0, ge=0)
    # A dead worker's session lock, and a dead beat's scheduler lock, free after this many
    # seconds (held locks are renewed).
    lock_ttl: float = Field(default=30.0, ge=3)
    # How long a task waits for a busy session before leaving it to the lock's holder (which
    # looks for pending events again after releasing it); 0 means one attempt.
    lock_wait: float = Field(default=0.0, ge=0)
    # Retention (docs/adr/0043): upkeep deletes session logs idle for longer than this many
    # days, and episodes (imported or remembered turns) older than this; unset keeps them.
    # Facts, decisions and the other kinds of memory, and confirmed episodes, are kept.
    retention_session_days: float | None = Field(default=None, gt=0)
    retention_episode_days: float | None = Field(default=None, gt=0)
    # A person whose account is deleted (Slack user_change with deleted=true) or deactivated
    # (Matrix) is erased as `cairn memory erase --person` does.
    erase_departed: bool = False


class Settings(BaseModel):
    """Every setting Cairn reads, by section. Construct it through :func:`load_settings`.

    The order of the fields is the order of ``cairn config``.
    """

    model_config = _prefixed("CAIRN_")

    home: Path = Path("~/.cairn")
    database_url: str | None = None
    qdrant_url: str | None = None
    qdrant_api_key: SecretStr | None = None
    broker_url: str | None = None
    redis_url: str | None = None
    llm: LlmSettings = Field(default_factory=LlmSettings)
    slack: SlackSettings = Field(default_factory=SlackSettings)
    dedupe_ttl: float = Field(default=86400.0, ge=60)
    matrix: MatrixSettings = Field(default_factory=MatrixSettings)
    agent: str = "cairn"
    # Declared agents; empty means one agent named by CAIRN_AGENT. In cairn.toml:
    #   [agents.ops]
    #   description = "runs deploys"
    #   instructions = "..."
    agents: dict[str, AgentSpec] = {}
    console_tenant: str = "console"
    context: ContextSettings = Field(default_factory=ContextSettings)
    max_message_chars: int = Field(default=40000, ge=100, le=1_000_000)
    # The largest attached file read (bytes); larger ones are refused with the reason.
    attachment_max_bytes: int = Field(default=10_000_000, ge=1000, le=200_000_000)
    # Megabytes that must stay free under CAIRN_HOME: below it Cairn does not start, and
    # refuses new messages with the reason (cairn.core.disk, docs/adr/0038).
    min_free_mb: int = Field(default=100, ge=0, le=10_000_000)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    reply_timeout: float = Field(default=180.0, gt=0)
    # Seconds `cairn chat` waits at /quit or the end of its input for replies still owed (a
    # turn that outlived CAIRN_REPLY_TIMEOUT, or one a previous run left); then it leaves and
    # says so, and the next run shows them (docs/adr/0037).
    quit_timeout: float = Field(default=60.0, gt=0, le=86_400)
    confirm_emoji: list[str] = ["white_check_mark", "heavy_check_mark"]
    retract_emoji: list[str] = ["x", "wastebasket", "no_entry_sign"]
    useful_emoji: list[str] = ["+1", "heart", "tada"]
    not_useful_emoji: list[str] = ["-1"]
    # On a "remembered:" notice, by its author or an admin: share a memory learned in a private
    # conversation with the whole workspace (removing the reaction makes it private again).
    share_emoji: list[str] = ["mega", "loudspeaker"]
    admins: list[str] = []
    # Whose confirmation alone makes a doubtful memory (flagged, or from an untrusted author)
    # count, besides admins: user ids and Slack user group ids ("S0614TZR7", whose members
    # the Slack frontend asks for; scope usergroups:read), as a JSON list. Otherwise two
    # members have to confirm it.
    stewards: list[str] = []
    # Authors whose memories start unconfirmed and rank lower (user ids, JSON list).
    untrusted_users: list[str] = []
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # USD per million tokens: input, output, cache read, cache write; matched by model prefix.
    # The turn's cost accounting (cairn/workers/turn); here, not in ``llm``, to keep its place
    # in ``cairn config``.
    llm_prices: dict[str, list[float]] = {
        "claude-opus-4": [15.0, 75.0, 1.5, 18.75],
        "claude-sonnet-4": [3.0, 15.0, 0.3, 3.75],
        "claude-haiku-4": [1.0, 5.0, 0.1, 1.25],
        # OpenAI caches prompt prefixes by itself: a cache write costs nothing extra.
        "gpt-4.1-mini": [0.4, 1.6, 0.1, 0.0],
        "gpt-4.1": [2.0, 8.0, 0.5, 0.0],
        "gpt-4o-mini": [0.15, 0.6, 0.075, 0.0],
        "gpt-4o": [2.5, 10.0, 1.25, 0.0],
    }
    workers: WorkerSettings = Field(default_factory=WorkerSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"

    @model_validator(mode="after")
    def _check_consistency(self) -> Settings:
        problems = list(_contradictions(self))
        if problems:
            raise ValueError("; ".join(problems))
        return self

    # Derived values: computed here so that no other module re-derives them differently.

    @property
    def home_dir(self) -> Path:
        """CAIRN_HOME with ``~`` expanded."""
        return self.home.expanduser()

    @property
    def effective_database_url(self) -> str:
        """CAIRN_DATABASE_URL, or a SQLite file in CAIRN_HOME."""
        return self.database_url or f"sqlite:///{self.home_dir / 'cairn.db'}"

    @property
    def qdrant_path(self) -> Path:
        """The local-mode Qdrant folder used when CAIRN_QDRANT_URL is unset."""
        return self.home_dir / "qdrant"

    @property
    def effective_redis_url(self) -> str | None:
        """CAIRN_REDIS_URL, or the broker's URL when the broker is Redis."""
        return self.redis_url or self.broker_url

    @property
    def agent_names(self) -> list[str]:
        """Every agent of this deployment (the default one first)."""
        return [self.agent, *sorted(n for n in self.agents if n != self.agent)]

    def agent_spec(self, name: str) -> AgentSpec:
        """The declaration of agent ``name`` (an empty one for an undeclared default)."""
        return self.agents.get(name) or _UNDECLARED

    @property
    def identity_agent(self) -> str | None:
        """The agent whose own bot identity this process's frontend is, if CAIRN_AGENT has one.

        Everything such a frontend is asked goes to that agent, and it posts only that agent's
        messages. None for the shared identity, which hosts every other agent.
        """
        return self.agent if self.agent_spec(self.agent).own_identity else None

    def speaks_for(self, agent: str) -> bool:
        """Whether this process's bot identity posts the messages of ``agent``."""
        own = self.identity_agent
        if own is not None:
            return agent == own
        return not self.agent_spec(agent).own_identity

    def secret_values(self) -> list[str]:
        """Every secret setting's value, for log redaction."""
        found = [v.get_secret_value() for _, v in _values(self) if isinstance(v, SecretStr)]
        for url in (
            self.database_url,
            self.broker_url,
            self.redis_url,
            self.qdrant_url,
            self.llm.anthropic_base_url,
            self.llm.openai_base_url,
            self.llm.azure_endpoint,
            self.slack.api_url,
            self.matrix.homeserver,
        ):
            found.extend(url_secrets(url))
        for server in self.mcp.servers.values():
            given = [v.get_secret_value() for v in (*server.env.values(), *server.headers.values())]
            # "Bearer TOKEN": the token alone may be logged too.
            found.extend([*given, *(v.split(" ", 1)[1] for v in given if " " in v.strip())])
            found.extend(url_secrets(server.url))
        return [v for v in found if v]

    def redacted(self) -> dict[str, Any]:
        """Every setting by its variable name, secrets shown as ``***``, for ``cairn config``."""
        shown: dict[str, Any] = {}
        for var, value in _values(self):
            if isinstance(value, SecretStr):
                value = "***"
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, str):
                value = mask_url(value)
            elif var == "CAIRN_MCP_SERVERS":
                value = {
                    name: {**spec.model_dump(mode="json", exclude_defaults=True), "url": spec.where}
                    if spec.url
                    else spec.model_dump(mode="json", exclude_defaults=True)
                    for name, spec in self.mcp.servers.items()
                }
            shown[var] = value
        return shown


SECTIONS: dict[str, type[BaseModel]] = {
    name: info.annotation
    for name, info in Settings.model_fields.items()
    if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
}


def _fields() -> Iterator[tuple[str, tuple[str, ...]]]:
    """``(variable, where)`` of every setting in ``cairn config`` order; ``where`` is its path
    of field names, e.g. ``("memory", "half_life_days")``."""
    for name, info in Settings.model_fields.items():
        section = SECTIONS.get(name)
        if section is None:
            yield str(info.alias), (name,)
            continue
        for field, inner in section.model_fields.items():
            yield str(inner.alias), (name, field)


_WHERE: dict[str, tuple[str, ...]] = dict(_fields())
# Cairn.toml declares agents as [agents.NAME] tables.
_OTHER_NAMES = {"AGENTS": "CAIRN_AGENTS", "MCP_SERVERS": "CAIRN_MCP_SERVERS"}


def variables() -> list[str]:
    """Every variable Cairn reads its settings from, in ``cairn config`` order."""
    return list(_WHERE)


def _values(settings: Settings) -> Iterator[tuple[str, Any]]:
    """``(variable, value)`` of every setting."""
    for var, where in _WHERE.items():
        value: Any = settings
        for name in where:
            value = getattr(value, name)
        yield var, value


def _nest(raw: Mapping[str, Any], *, decode: bool = False) -> dict[str, Any]:
    """The known variables of ``raw`` (any case) as Settings input, nested by section.

    With ``decode`` (the environment), list and dict settings are read as JSON.
    """
    flat = {str(key).upper(): value for key, value in raw.items()}
    for other, var in _OTHER_NAMES.items():
        if other in flat:
            flat.setdefault(var, flat[other])
    nested: dict[str, Any] = {}
    for var, where in _WHERE.items():
        if var not in flat:
            continue
        value = flat[var]
        if decode and isinstance(value, str) and _is_complex(where):
            # Not JSON: left as text, and validation names the variable and what it should be.
            with suppress(ValueError):
                value = json.loads(value)
        *sections, name = where
        into = nested
        for section in sections:
            into = into.setdefault(section, {})
        into[name] = value
    return nested


def _is_complex(where: tuple[str, ...]) -> bool:
    model: type[BaseModel] = Settings
    for name in where[:-1]:
        model = SECTIONS[name]
    return get_origin(model.model_fields[where[-1]].annotation) in (list, dict)


def _merge(low: dict[str, Any], high: dict[str, Any]) -> dict[str, Any]:
    merged = dict(low)
    for key, value in high.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict) and key in SECTIONS:
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def _openai_contradictions(llm: LlmSettings) -> list[str]:
    problems = [
        f"{var} must be an http:// or https:// URL"
        for var, url in (
            ("OPENAI_BASE_URL", llm.openai_base_url),
            ("AZURE_OPENAI_ENDPOINT", llm.azure_endpoint),
        )
        if url is not None and urlsplit(url).scheme not in {"http", "https"}
    ]
    if llm.mode != "openai":
        return problems
    if llm.azure_endpoint is not None:
        if llm.azure_api_version is None:
            problems.append("AZURE_OPENAI_ENDPOINT needs OPENAI_API_VERSION (e.g. 2024-10-21)")
        if llm.openai_api_key is None:
            problems.append("AZURE_OPENAI_ENDPOINT needs OPENAI_API_KEY (the resource's key)")
    elif llm.openai_api_key is None and llm.openai_base_url is None:
        problems.append(
            "CAIRN_LLM=openai needs OPENAI_API_KEY (for OpenAI itself) or OPENAI_BASE_URL"
            " (a local or self-hosted endpoint)"
        )
    return problems


def _contradictions(s: Settings) -> list[str]:
    problems: list[str] = []
    for var, value in _values(s):  # a count, size or duration nobody means (docs/adr/0037)
        if isinstance(value, int | float) and not isinstance(value, bool):
            problems.extend(filter(None, [bounded_setting(value, var)]))
    db = s.database_url
    if db is not None:
        scheme = urlsplit(db).scheme.split("+")[0]
        if scheme not in {"sqlite", "postgresql", "postgres"}:
            problems.append(
                "CAIRN_DATABASE_URL must be a sqlite:/// or postgresql:// URL, "
                f"not {scheme or mask_url(db)!r}"
            )
    for var, url in (("CAIRN_BROKER_URL", s.broker_url), ("CAIRN_REDIS_URL", s.redis_url)):
        if url is not None and urlsplit(url).scheme not in {"redis", "rediss"}:
            problems.append(f"{var} must be a redis:// or rediss:// URL, got {mask_url(url)!r}")
    if s.qdrant_url is not None and urlsplit(s.qdrant_url).scheme not in {"http", "https"}:
        problems.append(
            f"CAIRN_QDRANT_URL must be an http:// or https:// URL, got {mask_url(s.qdrant_url)!r}"
        )
    llm = s.llm
    if llm.anthropic_base_url is not None and urlsplit(llm.anthropic_base_url).scheme not in {
        "http",
        "https",
    }:
        problems.append("ANTHROPIC_BASE_URL must be an http:// or https:// URL")
    if llm.mode == "anthropic" and llm.anthropic_api_key is None:
        problems.append("CAIRN_LLM=anthropic needs ANTHROPIC_API_KEY")
    problems.extend(_openai_contradictions(llm))
    if s.context.soft_after >= s.context.hard_after:
        problems.append("CAIRN_CONTEXT_SOFT_AFTER must be below CAIRN_CONTEXT_HARD_AFTER")
    if s.context.compact_at >= s.context.emergency_at:
        problems.append("CAIRN_CONTEXT_COMPACT_AT must be below CAIRN_CONTEXT_EMERGENCY_AT")
    if s.memory.cold_below >= s.memory.warm_below:
        problems.append("CAIRN_MEMORY_COLD_BELOW must be below CAIRN_MEMORY_WARM_BELOW")
    if s.memory.hot_budget > s.memory.warm_budget:
        problems.append("CAIRN_MEMORY_HOT_BUDGET must not exceed CAIRN_MEMORY_WARM_BUDGET")
    for name in s.agents:
        if not AGENT_NAME.match(name):
            problems.append(
                f"CAIRN_AGENTS: agent name {name!r} must be lower-case letters, digits, - or _"
            )
    if s.agents and s.agent not in s.agents:
        problems.append(
            f"CAIRN_AGENT is {s.agent!r}, which is not among the declared agents "
            f"({', '.join(sorted(s.agents))})"
        )
    problems.extend(_mcp_contradictions(s))
    problems.extend(_slack_contradictions(s.slack))
    problems.extend(_matrix_contradictions(s.matrix))
    return problems


def _mcp_contradictions(s: Settings) -> list[str]:
    problems: list[str] = []
    servers = s.mcp.servers
    for name in servers:
        if not SERVER_NAME.match(name) or "__" in name:
            problems.append(
                f"[mcp_servers.{name}]: a server name is lower-case letters, digits, - and single "
                "_ (at most 24 characters, starting with a letter), since tools are named "
                "SERVER__TOOL"
            )
    for agent, spec in s.agents.items():
        for name in spec.mcp_servers or []:
            if name not in servers:
                known = ", ".join(sorted(servers)) or "none declared"
                problems.append(
                    f"[agents.{agent}] mcp_servers: no MCP server named {name!r} ({known})"
                )
    return problems


def _secret(value: SecretStr | None) -> str:
    return value.get_secret_value() if value is not None else ""


def _slack_contradictions(s: SlackSettings) -> list[str]:
    bot, app, signing = _secret(s.bot_token), _secret(s.app_token), _secret(s.signing_secret)
    problems: list[str] = []
    if bot and not bot.startswith("xoxb-"):
        problems.append("SLACK_BOT_TOKEN must be a bot token starting with xoxb-")
    if app and not app.startswith("xapp-"):
        problems.append("SLACK_APP_TOKEN must be an app-level token starting with xapp-")
    if bool(s.client_id) != bool(s.client_secret):
        problems.append("the OAuth install needs both SLACK_CLIENT_ID and SLACK_CLIENT_SECRET")
    if (app or signing) and not (bot or s.oauth):
        problems.append(
            "SLACK_APP_TOKEN or SLACK_SIGNING_SECRET is set but SLACK_BOT_TOKEN is not "
            "(nor SLACK_CLIENT_ID and SLACK_CLIENT_SECRET for the OAuth install)"
        )
    if (bot or s.oauth) and not (app or signing):
        problems.append(
            f"{'SLACK_BOT_TOKEN' if bot else 'SLACK_CLIENT_ID'} is set: also set SLACK_APP_TOKEN "
            "(Socket Mode) or SLACK_SIGNING_SECRET (HTTP Events API)"
        )
    if urlsplit(s.api_url).scheme not in {"http", "https"}:
        problems.append("SLACK_API_URL must be an http:// or https:// URL")
    return problems


def _matrix_contradictions(s: MatrixSettings) -> list[str]:
    problems: list[str] = []
    if not (s.homeserver or s.user_id or s.password or s.access_token):
        return problems
    if not s.homeserver:
        problems.append("MATRIX_HOMESERVER is not set but other MATRIX_* settings are")
    elif urlsplit(s.homeserver).scheme not in {"http", "https"}:
        problems.append("MATRIX_HOMESERVER must be an http:// or https:// URL")
    user = s.user_id or ""
    if not user:
        problems.append("MATRIX_USER_ID is not set but other MATRIX_* settings are")
    elif not (user.startswith("@") and ":" in user):
        problems.append(f"MATRIX_USER_ID must look like @name:server, got {user!r}")
    if not (s.password or s.access_token):
        problems.append("Matrix needs MATRIX_PASSWORD or MATRIX_ACCESS_TOKEN")
    for pattern in _split_commas(s.allowed_inviters):
        if not (pattern.startswith(":") or (pattern.startswith("@") and ":" in pattern)):
            problems.append(
                "CAIRN_MATRIX_ALLOWED_INVITERS takes user ids (@name:server) and :server "
                f"patterns, separated by commas; {pattern!r} is neither"
            )
    return problems


def _split_commas(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def _server_of(user_id: str | None) -> str:
    """The homeserver of a Matrix user id ("" when unset)."""
    return (user_id or "").partition(":")[2]


def load_settings(**overrides: Any) -> Settings:
    """Read the settings now; raises ConfigError (naming the variable) on a bad setting.

    ``overrides`` are keyed by variable name (``CAIRN_HOME=...``) and win over the environment,
    which wins over cairn.toml.
    """
    path = config_file()
    values: dict[str, Any] = {}
    if path is not None:
        try:
            with path.open("rb") as f:
                values = _nest(tomllib.load(f))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"can't read {path}: {exc.strerror or exc}") from None
    values = _merge(values, _nest(os.environ, decode=True))
    values = _merge(values, _nest(overrides))
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(err.get("loc") or ())
        var = _variable_at(loc)
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        table = _table_at(loc)
        if table:
            var = f"{var} ({table})" if var else table
        lines.append(f"{var}: {message}" if var else message)
    # A URL may be quoted in any message (pydantic's or ours): none may show its password.
    return mask_urls("invalid configuration: " + "; ".join(lines))


_VARIABLE_AT = {where: var for var, where in _WHERE.items()}


def _table_at(loc: tuple[int | str, ...]) -> str:
    """Where in cairn.toml an error inside a table of tables is: "[mcp_servers.ops] approval"."""
    parts = [str(p) for p in loc]
    if parts[:2] == ["mcp", "servers"]:
        parts = ["mcp_servers", *parts[2:]]
    if len(parts) < 2 or parts[0] not in {"agents", "mcp_servers"}:
        return ""
    key = ".".join(parts[2:])
    return f"[{parts[0]}.{parts[1]}]" + (f" {key}" if key else "")


def _variable_at(loc: tuple[int | str, ...]) -> str | None:
    """The variable an error's location points into (``("memory", "half_life_days", ...)``)."""
    return _VARIABLE_AT.get(tuple(str(p) for p in loc[:2])) or _VARIABLE_AT.get(
        tuple(str(p) for p in loc[:1])
    )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once. Tests and the CLI may call ``cache_clear``."""
    return load_settings()
