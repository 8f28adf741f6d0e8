"""Cairn's one settings model, read once from the environment and an optional ``cairn.toml``.

Environment variables win over the file. Every field names the variable it is read from; a
missing or contradictory setting raises :class:`~cairn.errors.ConfigError` naming that variable.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from cairn.errors import ConfigError

__all__ = [
    "Settings",
    "config_file",
    "env_name",
    "get_settings",
    "hide_password",
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
    model: str = Field(default="claude-sonnet-4-5", validation_alias=_env("CAIRN_MODEL"))
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
    slack_api_url: str = Field(
        default=DEFAULT_SLACK_API_URL, validation_alias=_env("SLACK_API_URL")
    )

    matrix_homeserver: str | None = Field(default=None, validation_alias=_env("MATRIX_HOMESERVER"))
    matrix_user_id: str | None = Field(default=None, validation_alias=_env("MATRIX_USER_ID"))
    matrix_password: SecretStr | None = Field(
        default=None, validation_alias=_env("MATRIX_PASSWORD")
    )
    matrix_access_token: SecretStr | None = Field(
        default=None, validation_alias=_env("MATRIX_ACCESS_TOKEN")
    )

    agent: str = Field(default="cairn", validation_alias=_env("CAIRN_AGENT"))
    console_tenant: str = Field(default="console", validation_alias=_env("CAIRN_CONSOLE_TENANT"))
    context_budget: int = Field(
        default=30000, ge=1000, le=1_000_000, validation_alias=_env("CAIRN_CONTEXT_BUDGET")
    )
    max_message_chars: int = Field(
        default=40000, ge=100, le=1_000_000, validation_alias=_env("CAIRN_MAX_MESSAGE_CHARS")
    )
    recall_k: int = Field(default=5, ge=1, le=100, validation_alias=_env("CAIRN_RECALL_K"))
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
    lock_ttl: float = Field(default=900.0, gt=0, validation_alias=_env("CAIRN_LOCK_TTL"))
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
    def effective_redis_url(self) -> str | None:
        """CAIRN_REDIS_URL, or the broker's URL when the broker is Redis."""
        return self.redis_url or self.broker_url

    @property
    def llm_provider(self) -> Literal["anthropic", "offline"]:
        """Which LLM adapter to use: Anthropic when a key is set (or asked for), else offline."""
        if self.llm == "auto":
            return "anthropic" if self.anthropic_api_key else "offline"
        return self.llm

    def reaction_effect(self, emoji: str) -> str | None:
        """What a reaction means: confirm, retract, useful, not_useful, or None (ignored)."""
        for effect, names in (
            ("confirm", self.confirm_emoji),
            ("retract", self.retract_emoji),
            ("useful", self.useful_emoji),
            ("not_useful", self.not_useful_emoji),
        ):
            if emoji in names:
                return effect
        return None

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
            elif isinstance(value, str) and "://" in value:
                value = hide_password(value)
            shown[str(var)] = value
        return shown


def hide_password(url: str) -> str:
    """``url`` with the password part of its credentials replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


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
                f"not {scheme or db!r}"
            )
    for var, url in (("CAIRN_BROKER_URL", s.broker_url), ("CAIRN_REDIS_URL", s.redis_url)):
        if url is not None and urlsplit(url).scheme not in {"redis", "rediss"}:
            problems.append(f"{var} must be a redis:// or rediss:// URL, got {url!r}")
    if s.qdrant_url is not None and urlsplit(s.qdrant_url).scheme not in {"http", "https"}:
        problems.append(
            f"CAIRN_QDRANT_URL must be an http:// or https:// URL, got {s.qdrant_url!r}"
        )
    if s.anthropic_base_url is not None and urlsplit(s.anthropic_base_url).scheme not in {
        "http",
        "https",
    }:
        problems.append("ANTHROPIC_BASE_URL must be an http:// or https:// URL")
    if s.llm == "anthropic" and s.anthropic_api_key is None:
        problems.append("CAIRN_LLM=anthropic needs ANTHROPIC_API_KEY")
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
    if (app or signing) and not bot:
        problems.append("SLACK_APP_TOKEN or SLACK_SIGNING_SECRET is set but SLACK_BOT_TOKEN is not")
    if bot and not (app or signing):
        problems.append(
            "SLACK_BOT_TOKEN is set: also set SLACK_APP_TOKEN (Socket Mode) "
            "or SLACK_SIGNING_SECRET (HTTP Events API)"
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
    return problems


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
    return "invalid configuration: " + "; ".join(lines)


_VARIABLES = {name.upper(): env_name(name) for name in Settings.model_fields} | {
    env_name(name): env_name(name) for name in Settings.model_fields
}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once. Tests and the CLI may call ``cache_clear``."""
    return load_settings()
