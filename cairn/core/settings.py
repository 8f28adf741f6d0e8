"""Cairn's one settings model, read once from the environment and an optional ``cairn.toml``.

Environment variables win over the file. Every field names the variable it is read from; a
missing or contradictory setting raises
:class:`~cairn.core.errors.ConfigError` naming that variable.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from cairn.core.errors import ConfigError
from cairn.core.redact import mask_url, mask_urls, url_secrets

__all__ = [
    "Settings",
    "config_file",
    "env_name",
    "get_settings",
    "load_settings",
]

DEFAULT_SLACK_API_URL = "https://slack.com/api/"


def _env(name: str) -> Any:
    """Field that reads the variable ``name`` (and ``name.lower()`` in cairn.toml)."""
    return AliasChoices(name, name.lower())


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


class Settings(BaseSettings):
    """Every setting Cairn reads. Construct it through :func:`load_settings`."""

    model_config = SettingsConfigDict(
        case_sensitive=False,
        extra="ignore",
        frozen=True,
    )

    home: Path = Field(default=Path("~/.cairn"), validation_alias=_env("CAIRN_HOME"))
    database_url: str | None = Field(default=None, validation_alias=_env("CAIRN_DATABASE_URL"))
    qdrant_url: str | None = Field(default=None, validation_alias=_env("CAIRN_QDRANT_URL"))
    qdrant_api_key: SecretStr | None = Field(
        default=None, validation_alias=_env("CAIRN_QDRANT_API_KEY")
    )
    broker_url: str | None = Field(default=None, validation_alias=_env("CAIRN_BROKER_URL"))
    redis_url: str | None = Field(default=None, validation_alias=_env("CAIRN_REDIS_URL"))

    llm: Literal["auto", "anthropic", "offline"] = Field(
        default="auto", validation_alias=_env("CAIRN_LLM")
    )
    anthropic_api_key: SecretStr | None = Field(
        default=None, validation_alias=_env("ANTHROPIC_API_KEY")
    )
    anthropic_base_url: str | None = Field(
        default=None, validation_alias=_env("ANTHROPIC_BASE_URL")
    )
    model: str = Field(default="claude-sonnet-4-6", validation_alias=_env("CAIRN_MODEL"))
    llm_stream: bool = Field(default=False, validation_alias=_env("CAIRN_LLM_STREAM"))
    llm_max_retries: int = Field(
        default=4, ge=0, le=20, validation_alias=_env("CAIRN_LLM_MAX_RETRIES")
    )
    llm_timeout: float = Field(default=120.0, gt=0, validation_alias=_env("CAIRN_LLM_TIMEOUT"))
    max_output_tokens: int = Field(
        default=1024, ge=16, le=64000, validation_alias=_env("CAIRN_MAX_OUTPUT_TOKENS")
    )
    max_tool_rounds: int = Field(
        default=8, ge=1, le=50, validation_alias=_env("CAIRN_MAX_TOOL_ROUNDS")
    )

    slack_bot_token: SecretStr | None = Field(
        default=None, validation_alias=_env("SLACK_BOT_TOKEN")
    )
    slack_app_token: SecretStr | None = Field(
        default=None, validation_alias=_env("SLACK_APP_TOKEN")
    )
    slack_signing_secret: SecretStr | None = Field(
        default=None, validation_alias=_env("SLACK_SIGNING_SECRET")
    )
    # OAuth install for many workspaces (instead of one SLACK_BOT_TOKEN).
    slack_client_id: str | None = Field(default=None, validation_alias=_env("SLACK_CLIENT_ID"))
    slack_client_secret: SecretStr | None = Field(
        default=None, validation_alias=_env("SLACK_CLIENT_SECRET")
    )
    slack_api_url: str = Field(
        default=DEFAULT_SLACK_API_URL, validation_alias=_env("SLACK_API_URL")
    )
    # Slack frontend behaviour (cairn/bot/slack).
    http_host: str = Field(
        default="0.0.0.0",  # noqa: S104 - a server in a container listens on every interface
        validation_alias=_env("CAIRN_HTTP_HOST"),
    )
    http_port: int = Field(default=3000, ge=0, le=65535, validation_alias=_env("CAIRN_HTTP_PORT"))
    slack_follow_threads: bool = Field(
        default=True, validation_alias=_env("CAIRN_SLACK_FOLLOW_THREADS")
    )
    slack_answer_without_mention: Literal["never", "questions", "always"] = Field(
        default="questions", validation_alias=_env("CAIRN_SLACK_ANSWER_WITHOUT_MENTION")
    )
    slack_allow_bots: bool = Field(default=False, validation_alias=_env("CAIRN_SLACK_ALLOW_BOTS"))
    slack_working_emoji: str = Field(
        default="eyes", min_length=1, validation_alias=_env("CAIRN_SLACK_WORKING_EMOJI")
    )
    slack_message_chars: int = Field(
        default=3900, ge=100, le=40000, validation_alias=_env("CAIRN_SLACK_MESSAGE_CHARS")
    )
    slack_api_retries: int = Field(
        default=5, ge=0, le=20, validation_alias=_env("CAIRN_SLACK_API_RETRIES")
    )
    dedupe_ttl: float = Field(default=86400.0, ge=60, validation_alias=_env("CAIRN_DEDUPE_TTL"))

    matrix_homeserver: str | None = Field(default=None, validation_alias=_env("MATRIX_HOMESERVER"))
    matrix_user_id: str | None = Field(default=None, validation_alias=_env("MATRIX_USER_ID"))
    matrix_password: SecretStr | None = Field(
        default=None, validation_alias=_env("MATRIX_PASSWORD")
    )
    matrix_access_token: SecretStr | None = Field(
        default=None, validation_alias=_env("MATRIX_ACCESS_TOKEN")
    )
    # Comma-separated user ids and ":server" patterns; unset: users of the bot's homeserver.
    matrix_allowed_inviters: str | None = Field(
        default=None, validation_alias=_env("CAIRN_MATRIX_ALLOWED_INVITERS")
    )
    # Comma-separated homeservers whose users are trusted besides the bot's own; * for any.
    # Users of other servers are heard, but what they teach starts untrusted (docs/adr/0011).
    matrix_trusted_servers: str | None = Field(
        default=None, validation_alias=_env("CAIRN_MATRIX_TRUSTED_SERVERS")
    )
    # End-to-end encryption needs matrix-nio's e2e extra (cairn-bot[matrix-e2e]).
    matrix_encryption: bool = Field(default=False, validation_alias=_env("CAIRN_MATRIX_ENCRYPTION"))

    agent: str = Field(default="cairn", validation_alias=_env("CAIRN_AGENT"))
    # Declared agents; empty means one agent named by CAIRN_AGENT. In cairn.toml:
    #   [agents.ops]
    #   description = "runs deploys"
    #   instructions = "..."
    agents: dict[str, AgentSpec] = Field(
        default={}, validation_alias=AliasChoices("CAIRN_AGENTS", "cairn_agents", "agents")
    )
    console_tenant: str = Field(default="console", validation_alias=_env("CAIRN_CONSOLE_TENANT"))
    context_budget: int = Field(
        default=30000, ge=1000, le=1_000_000, validation_alias=_env("CAIRN_CONTEXT_BUDGET")
    )
    # The context engine (cairn/memory/context): "classic" sends the plain recent transcript.
    context_mode: Literal["engine", "classic"] = Field(
        default="engine", validation_alias=_env("CAIRN_CONTEXT_MODE")
    )
    context_recent_turns: int = Field(
        default=6, ge=1, le=100, validation_alias=_env("CAIRN_CONTEXT_RECENT_TURNS")
    )
    # Idle turns after which a state-graph item leaves the active tier, then the soft tier.
    context_soft_after: int = Field(
        default=8, ge=1, le=10_000, validation_alias=_env("CAIRN_CONTEXT_SOFT_AFTER")
    )
    context_hard_after: int = Field(
        default=30, ge=2, le=100_000, validation_alias=_env("CAIRN_CONTEXT_HARD_AFTER")
    )
    context_hydrate_threshold: float = Field(
        default=2.0, ge=0, validation_alias=_env("CAIRN_CONTEXT_HYDRATE_THRESHOLD")
    )
    # Scoring of units: pin + recency + max(BM25, semantic) + hydrate boost, each weighted.
    context_weight_pin: float = Field(
        default=1.0, ge=0, validation_alias=_env("CAIRN_CONTEXT_WEIGHT_PIN")
    )
    context_weight_recency: float = Field(
        default=1.0, ge=0, validation_alias=_env("CAIRN_CONTEXT_WEIGHT_RECENCY")
    )
    context_weight_relevance: float = Field(
        default=2.0, ge=0, validation_alias=_env("CAIRN_CONTEXT_WEIGHT_RELEVANCE")
    )
    context_weight_hydrate: float = Field(
        default=1.5, ge=0, validation_alias=_env("CAIRN_CONTEXT_WEIGHT_HYDRATE")
    )
    # Context pressure (density-weighted share of the budget) that starts each level.
    context_compact_at: float = Field(
        default=0.6, gt=0, le=1.0, validation_alias=_env("CAIRN_CONTEXT_COMPACT_AT")
    )
    context_emergency_at: float = Field(
        default=0.85, gt=0, le=1.0, validation_alias=_env("CAIRN_CONTEXT_EMERGENCY_AT")
    )
    # Pasted text or tool output longer than this is distilled into an artifact and a card.
    context_distill_chars: int = Field(
        default=1500, ge=200, le=1_000_000, validation_alias=_env("CAIRN_CONTEXT_DISTILL_CHARS")
    )
    max_message_chars: int = Field(
        default=40000, ge=100, le=1_000_000, validation_alias=_env("CAIRN_MAX_MESSAGE_CHARS")
    )
    recall_k: int = Field(default=5, ge=1, le=100, validation_alias=_env("CAIRN_RECALL_K"))
    # Long-term memory (cairn/memory): embeddings, ranking weights, tiers, working memory.
    # auto | none | packaged | path:/folder | fastembed:MODEL | sentence-transformers:MODEL
    embeddings: str = Field(default="auto", min_length=1, validation_alias=_env("CAIRN_EMBEDDINGS"))
    # How the local model runs: onnx (int8, ~7x less CPU), numpy (float32), auto (onnx if it loads).
    embedding_engine: Literal["auto", "onnx", "numpy"] = Field(
        default="auto", validation_alias=_env("CAIRN_EMBEDDING_ENGINE")
    )
    # score: weighted sum of min-max normalised scores; rrf: reciprocal-rank fusion.
    memory_fusion: Literal["score", "rrf"] = Field(
        default="score", validation_alias=_env("CAIRN_MEMORY_FUSION")
    )
    memory_candidates: int = Field(
        default=50, ge=5, le=1000, validation_alias=_env("CAIRN_MEMORY_CANDIDATES")
    )
    memory_weight_lexical: float = Field(
        default=0.6, ge=0, validation_alias=_env("CAIRN_MEMORY_WEIGHT_LEXICAL")
    )
    memory_weight_dense: float = Field(
        default=0.4, ge=0, validation_alias=_env("CAIRN_MEMORY_WEIGHT_DENSE")
    )
    memory_weight_context: float = Field(
        default=0.5, ge=0, validation_alias=_env("CAIRN_MEMORY_WEIGHT_CONTEXT")
    )
    # How many turns either side of a matching episodic turn share its relevance.
    memory_context_turns: int = Field(
        default=2, ge=0, le=10, validation_alias=_env("CAIRN_MEMORY_CONTEXT_TURNS")
    )
    # Boost for memories written within a date the query names ("on 9 November, 2022").
    memory_weight_period: float = Field(
        default=0.5, ge=0, validation_alias=_env("CAIRN_MEMORY_WEIGHT_PERIOD")
    )
    memory_weight_recency: float = Field(
        default=0.05, ge=0, le=1, validation_alias=_env("CAIRN_MEMORY_WEIGHT_RECENCY")
    )
    memory_weight_validity: float = Field(
        default=0.1, ge=0, validation_alias=_env("CAIRN_MEMORY_WEIGHT_VALIDITY")
    )
    memory_weight_usefulness: float = Field(
        default=0.05, ge=0, validation_alias=_env("CAIRN_MEMORY_WEIGHT_USEFULNESS")
    )
    # Each net "not useful" reaction multiplies a memory's rank by 1 - this (see ranking.py).
    memory_weight_unhelpful: float = Field(
        default=0.85, ge=0, le=1, validation_alias=_env("CAIRN_MEMORY_WEIGHT_UNHELPFUL")
    )
    memory_weight_disputes: float = Field(
        default=0.1, ge=0, validation_alias=_env("CAIRN_MEMORY_WEIGHT_DISPUTES")
    )
    memory_weight_scope: float = Field(
        default=0.05, ge=0, validation_alias=_env("CAIRN_MEMORY_WEIGHT_SCOPE")
    )
    # The factor on the rank of an unconfirmed memory from an untrusted author (1: no penalty).
    memory_weight_untrusted: float = Field(
        default=0.6, ge=0, le=1, validation_alias=_env("CAIRN_MEMORY_WEIGHT_UNTRUSTED")
    )
    memory_weight_warm: float = Field(
        default=0.9, ge=0, le=1, validation_alias=_env("CAIRN_MEMORY_WEIGHT_WARM")
    )
    memory_weight_cold: float = Field(
        default=0.75, ge=0, le=1, validation_alias=_env("CAIRN_MEMORY_WEIGHT_COLD")
    )
    memory_half_life_days: float = Field(
        default=30.0, gt=0, validation_alias=_env("CAIRN_MEMORY_HALF_LIFE_DAYS")
    )
    memory_near_duplicate: float = Field(
        default=0.9, gt=0, le=1, validation_alias=_env("CAIRN_MEMORY_NEAR_DUPLICATE")
    )
    memory_warm_below: float = Field(
        default=0.5, ge=0, le=1, validation_alias=_env("CAIRN_MEMORY_WARM_BELOW")
    )
    memory_cold_below: float = Field(
        default=0.1, ge=0, le=1, validation_alias=_env("CAIRN_MEMORY_COLD_BELOW")
    )
    memory_hot_budget: int = Field(
        default=2000, ge=1, validation_alias=_env("CAIRN_MEMORY_HOT_BUDGET")
    )
    memory_warm_budget: int = Field(
        default=20000, ge=1, validation_alias=_env("CAIRN_MEMORY_WARM_BUDGET")
    )
    memory_prune_after_days: float = Field(
        default=365.0, gt=0, validation_alias=_env("CAIRN_MEMORY_PRUNE_AFTER_DAYS")
    )
    working_memory_ttl: float = Field(
        default=3600.0, gt=0, validation_alias=_env("CAIRN_WORKING_MEMORY_TTL")
    )
    reply_timeout: float = Field(default=180.0, gt=0, validation_alias=_env("CAIRN_REPLY_TIMEOUT"))
    confirm_emoji: list[str] = Field(
        default=["white_check_mark", "heavy_check_mark"],
        validation_alias=_env("CAIRN_CONFIRM_EMOJI"),
    )
    retract_emoji: list[str] = Field(
        default=["x", "wastebasket", "no_entry_sign"], validation_alias=_env("CAIRN_RETRACT_EMOJI")
    )
    useful_emoji: list[str] = Field(
        default=["+1", "heart", "tada"], validation_alias=_env("CAIRN_USEFUL_EMOJI")
    )
    not_useful_emoji: list[str] = Field(
        default=["-1"], validation_alias=_env("CAIRN_NOT_USEFUL_EMOJI")
    )
    admins: list[str] = Field(default=[], validation_alias=_env("CAIRN_ADMINS"))
    # Authors whose memories start unconfirmed and rank lower (user ids, JSON list).
    untrusted_users: list[str] = Field(default=[], validation_alias=_env("CAIRN_UNTRUSTED_USERS"))
    metrics_port: int = Field(
        default=0, ge=0, le=65535, validation_alias=_env("CAIRN_METRICS_PORT")
    )
    # USD per million tokens: input, output, cache read, cache write; matched by model prefix.
    llm_prices: dict[str, list[float]] = Field(
        default={
            "claude-opus-4": [15.0, 75.0, 1.5, 18.75],
            "claude-sonnet-4": [3.0, 15.0, 0.3, 3.75],
            "claude-haiku-4": [1.0, 5.0, 0.1, 1.25],
        },
        validation_alias=_env("CAIRN_LLM_PRICES"),
    )
    # Upkeep: how often periodic jobs run, when a pending event counts as stuck, and when an
    # idle session ends (which triggers learning extraction).
    beat_interval: float = Field(default=30.0, ge=1, validation_alias=_env("CAIRN_BEAT_INTERVAL"))
    stale_after: float = Field(default=60.0, ge=1, validation_alias=_env("CAIRN_STALE_AFTER"))
    session_idle: float = Field(
        default=6 * 3600.0, ge=60, validation_alias=_env("CAIRN_SESSION_IDLE")
    )
    # Expired memos are never delivered; upkeep deletes them (and their receipts) this long after.
    memo_keep_expired: float = Field(
        default=7 * 86400.0, ge=0, validation_alias=_env("CAIRN_MEMO_KEEP_EXPIRED")
    )
    # A dead worker's session lock, and a dead beat's scheduler lock, free after this many
    # seconds (held locks are renewed).
    lock_ttl: float = Field(default=30.0, ge=3, validation_alias=_env("CAIRN_LOCK_TTL"))
    # How long a task waits for a busy session before leaving it to the lock's holder (which
    # looks for pending events again after releasing it); 0 means one attempt.
    lock_wait: float = Field(default=0.0, ge=0, validation_alias=_env("CAIRN_LOCK_WAIT"))
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="WARNING", validation_alias=_env("CAIRN_LOG_LEVEL")
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = config_file()
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)

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
    def slack_oauth(self) -> bool:
        """Whether Slack workspaces install Cairn through OAuth (SLACK_CLIENT_ID and secret)."""
        return bool(self.slack_client_id and self.slack_client_secret)

    @property
    def slack_enabled(self) -> bool:
        """Whether the Slack frontend is configured (a bot token, or the OAuth install)."""
        return self.slack_bot_token is not None or self.slack_oauth

    @property
    def effective_redis_url(self) -> str | None:
        """CAIRN_REDIS_URL, or the broker's URL when the broker is Redis."""
        return self.redis_url or self.broker_url

    @property
    def llm_provider(self) -> Literal["anthropic", "offline"]:
        """Which LLM adapter to use: Anthropic when a key is set (or asked for), else offline."""
        if self.llm == "auto":
            return "anthropic" if self.anthropic_api_key else "offline"
        return self.llm

    @property
    def matrix_inviters(self) -> tuple[str, ...]:
        """Who may invite the Matrix bot: user ids and ``:server`` patterns.

        CAIRN_MATRIX_ALLOWED_INVITERS, or else the users of the bot's own homeserver.
        """
        patterns = _split_commas(self.matrix_allowed_inviters)
        if patterns:
            return tuple(patterns)
        server = (self.matrix_user_id or "").partition(":")[2]
        return (f":{server}",) if server else ()

    @property
    def matrix_trusted(self) -> tuple[str, ...]:
        """Homeservers whose users are trusted: the bot's own and CAIRN_MATRIX_TRUSTED_SERVERS."""
        server = (self.matrix_user_id or "").partition(":")[2]
        listed = _split_commas(self.matrix_trusted_servers)
        return tuple(dict.fromkeys([*([server] if server else []), *listed]))

    @property
    def agent_names(self) -> list[str]:
        """Every agent of this deployment (the default one first)."""
        return [self.agent, *sorted(n for n in self.agents if n != self.agent)]

    def agent_spec(self, name: str) -> AgentSpec:
        """The declaration of agent ``name`` (an empty one for an undeclared default)."""
        return self.agents.get(name) or AgentSpec()

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
        found = [v.get_secret_value() for v in self.__dict__.values() if isinstance(v, SecretStr)]
        for url in self._urls():
            found.extend(url_secrets(url))
        return [v for v in found if v]

    def _urls(self) -> tuple[str | None, ...]:
        return (
            self.database_url,
            self.broker_url,
            self.redis_url,
            self.qdrant_url,
            self.anthropic_base_url,
            self.slack_api_url,
            self.matrix_homeserver,
        )

    def redacted(self) -> dict[str, Any]:
        """Every setting by its variable name, secrets shown as ``***``, for ``cairn config``."""
        shown: dict[str, Any] = {}
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            alias = field.validation_alias
            var = alias.choices[0] if isinstance(alias, AliasChoices) else name.upper()
            if isinstance(value, SecretStr):
                value = "***"
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, str):
                value = mask_url(value)
            shown[str(var)] = value
        return shown


def env_name(field: str) -> str:
    """The environment variable a settings field is read from, e.g. ``CAIRN_HOME``."""
    alias = Settings.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return field.upper()


def _contradictions(s: Settings) -> list[str]:
    problems: list[str] = []
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
    if s.anthropic_base_url is not None and urlsplit(s.anthropic_base_url).scheme not in {
        "http",
        "https",
    }:
        problems.append("ANTHROPIC_BASE_URL must be an http:// or https:// URL")
    if s.llm == "anthropic" and s.anthropic_api_key is None:
        problems.append("CAIRN_LLM=anthropic needs ANTHROPIC_API_KEY")
    if s.context_soft_after >= s.context_hard_after:
        problems.append("CAIRN_CONTEXT_SOFT_AFTER must be below CAIRN_CONTEXT_HARD_AFTER")
    if s.context_compact_at >= s.context_emergency_at:
        problems.append("CAIRN_CONTEXT_COMPACT_AT must be below CAIRN_CONTEXT_EMERGENCY_AT")
    if s.memory_cold_below >= s.memory_warm_below:
        problems.append("CAIRN_MEMORY_COLD_BELOW must be below CAIRN_MEMORY_WARM_BELOW")
    if s.memory_hot_budget > s.memory_warm_budget:
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
    problems.extend(_slack_contradictions(s))
    problems.extend(_matrix_contradictions(s))
    return problems


def _secret(value: SecretStr | None) -> str:
    return value.get_secret_value() if value is not None else ""


def _slack_contradictions(s: Settings) -> list[str]:
    bot, app, signing = (
        _secret(s.slack_bot_token),
        _secret(s.slack_app_token),
        _secret(s.slack_signing_secret),
    )
    problems: list[str] = []
    if bot and not bot.startswith("xoxb-"):
        problems.append("SLACK_BOT_TOKEN must be a bot token starting with xoxb-")
    if app and not app.startswith("xapp-"):
        problems.append("SLACK_APP_TOKEN must be an app-level token starting with xapp-")
    oauth = bool(s.slack_client_id and s.slack_client_secret)
    if bool(s.slack_client_id) != bool(s.slack_client_secret):
        problems.append("the OAuth install needs both SLACK_CLIENT_ID and SLACK_CLIENT_SECRET")
    if (app or signing) and not (bot or oauth):
        problems.append(
            "SLACK_APP_TOKEN or SLACK_SIGNING_SECRET is set but SLACK_BOT_TOKEN is not "
            "(nor SLACK_CLIENT_ID and SLACK_CLIENT_SECRET for the OAuth install)"
        )
    if (bot or oauth) and not (app or signing):
        problems.append(
            f"{'SLACK_BOT_TOKEN' if bot else 'SLACK_CLIENT_ID'} is set: also set SLACK_APP_TOKEN "
            "(Socket Mode) or SLACK_SIGNING_SECRET (HTTP Events API)"
        )
    if urlsplit(s.slack_api_url).scheme not in {"http", "https"}:
        problems.append("SLACK_API_URL must be an http:// or https:// URL")
    return problems


def _matrix_contradictions(s: Settings) -> list[str]:
    problems: list[str] = []
    any_matrix = (
        s.matrix_homeserver or s.matrix_user_id or s.matrix_password or (s.matrix_access_token)
    )
    if not any_matrix:
        return problems
    if not s.matrix_homeserver:
        problems.append("MATRIX_HOMESERVER is not set but other MATRIX_* settings are")
    elif urlsplit(s.matrix_homeserver).scheme not in {"http", "https"}:
        problems.append("MATRIX_HOMESERVER must be an http:// or https:// URL")
    user = s.matrix_user_id or ""
    if not user:
        problems.append("MATRIX_USER_ID is not set but other MATRIX_* settings are")
    elif not (user.startswith("@") and ":" in user):
        problems.append(f"MATRIX_USER_ID must look like @name:server, got {user!r}")
    if not (s.matrix_password or s.matrix_access_token):
        problems.append("Matrix needs MATRIX_PASSWORD or MATRIX_ACCESS_TOKEN")
    for pattern in _split_commas(s.matrix_allowed_inviters):
        if not (pattern.startswith(":") or (pattern.startswith("@") and ":" in pattern)):
            problems.append(
                "CAIRN_MATRIX_ALLOWED_INVITERS takes user ids (@name:server) and :server "
                f"patterns, separated by commas; {pattern!r} is neither"
            )
    return problems


def _split_commas(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def load_settings(**overrides: Any) -> Settings:
    """Read the settings now; raises ConfigError (naming the variable) on a bad setting."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = err.get("loc") or ()
        where = str(loc[0]).upper() if loc else ""
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        known = where in Settings.model_fields or where in _VARIABLES
        lines.append(f"{_VARIABLES.get(where, where)}: {message}" if known else message)
    # A URL may be quoted in any message (pydantic's or ours): none may show its password.
    return mask_urls("invalid configuration: " + "; ".join(lines))


_VARIABLES = {name.upper(): env_name(name) for name in Settings.model_fields} | {
    env_name(name): env_name(name) for name in Settings.model_fields
}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once. Tests and the CLI may call ``cache_clear``."""
    return load_settings()
