"""Which workspaces Cairn is installed in, and the bot's client and identity in each.

The simple default is one workspace, one SLACK_BOT_TOKEN (:class:`SingleWorkspace`). With
SLACK_CLIENT_ID and SLACK_CLIENT_SECRET, workspaces install Cairn through Slack's OAuth flow and
their bot tokens are kept by slack_sdk's SQLAlchemy installation store in Cairn's database
(:class:`InstalledWorkspaces`); each workspace is its own memory tenant.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from slack_bolt.oauth import OAuthFlow
from slack_bolt.oauth.oauth_settings import OAuthSettings
from slack_sdk import WebClient

from cairn.bot.slack.web import web_client
from cairn.core.settings import Settings
from cairn.db import Database

if TYPE_CHECKING:
    from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore

__all__ = [
    "BOT_SCOPES",
    "PLATFORM",
    "BotIdentity",
    "InstalledWorkspaces",
    "SingleWorkspace",
    "Workspaces",
    "installation_flow",
    "tenant_of",
]

PLATFORM = "slack"

# The bot scopes an OAuth install asks for: the same as manifest.yml's.
BOT_SCOPES = (
    "app_mentions:read",
    "channels:history",
    "groups:history",
    "im:history",
    "mpim:history",
    "chat:write",
    "reactions:read",
    "reactions:write",
    "users:read",
    "channels:read",
    "groups:read",
    "im:read",
    "mpim:read",
    "assistant:write",
    "commands",
    "files:read",
    "usergroups:read",
)
# How long an install link (its OAuth state) stays valid.
STATE_SECONDS = 600


def tenant_of(team_id: str) -> str:
    """The memory tenant of a Slack workspace."""
    return f"{PLATFORM}:{team_id}"


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is in a workspace (from auth.test or the installation)."""

    user_id: str
    bot_id: str
    team_id: str


class Workspaces(Protocol):
    """The bot's Web API client and identity per workspace (team id)."""

    def client(self, team: str) -> WebClient | None:
        """The client with the bot token of ``team``; None when Cairn is not installed there."""
        ...

    def identity(self, team: str) -> BotIdentity | None:
        """The bot's user and bot ids in ``team``; None when Cairn is not installed there."""
        ...


class SingleWorkspace:
    """One bot token: every event is the token's workspace."""

    def __init__(self, client: WebClient, identity: BotIdentity) -> None:
        self._client = client
        self._identity = identity

    def client(self, team: str) -> WebClient | None:
        """The one client, whatever the team."""
        return self._client

    def identity(self, team: str) -> BotIdentity | None:
        """The one identity, whatever the team."""
        return self._identity


class InstalledWorkspaces:
    """Workspaces that installed Cairn through OAuth, read from the installation store."""

    # A token read from the store is reused this long (uninstalls delete it from the store).
    CACHE_SECONDS = 30.0

    def __init__(self, store: SQLAlchemyInstallationStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, WebClient, BotIdentity] | None] = {}

    def client(self, team: str) -> WebClient | None:
        """A client with the workspace's bot token, or None when it is not installed."""
        found = self._find(team)
        return found[1] if found else None

    def identity(self, team: str) -> BotIdentity | None:
        """The bot's ids in the workspace, or None when it is not installed."""
        found = self._find(team)
        return found[2] if found else None

    def forget(self, team: str) -> None:
        """Drop the cached token of ``team`` (after an uninstall or a revocation)."""
        with self._lock:
            self._cache.pop(team, None)

    def _find(self, team: str) -> tuple[float, WebClient, BotIdentity] | None:
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(team)
        if cached is not None and now - cached[0] < self.CACHE_SECONDS:
            return cached
        bot = self.store.find_bot(enterprise_id=None, team_id=team)
        if bot is None or not bot.bot_token:
            self.forget(team)
            return None
        entry = (
            now,
            web_client(self.settings, bot.bot_token),
            BotIdentity(user_id=bot.bot_user_id, bot_id=bot.bot_id, team_id=team),
        )
        with self._lock:
            self._cache[team] = entry
        return entry


def installation_flow(
    settings: Settings, db: Database, client: WebClient
) -> tuple[SQLAlchemyInstallationStore, OAuthFlow]:
    """The installation store in Cairn's database and Bolt's OAuth flow around it.

    The store's tables are slack_sdk's own (created here when missing), not part of Cairn's
    Alembic schema: slack_sdk reads and writes them, and migrates them with its releases.
    Installs start at ``/slack/install`` and come back to ``/slack/oauth_redirect``.
    """
    # Imported here: the SQLAlchemy stores pull in sqlalchemy.ext.asyncio (and greenlet).
    from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
    from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore

    assert settings.slack.client_id is not None
    assert settings.slack.client_secret is not None
    log = logging.getLogger("cairn.bot.slack.oauth")
    store = SQLAlchemyInstallationStore(
        client_id=settings.slack.client_id, engine=db.engine, logger=log
    )
    states = SQLAlchemyOAuthStateStore(
        expiration_seconds=STATE_SECONDS, engine=db.engine, logger=log
    )
    for tables in (store, states):
        tables.metadata.create_all(db.engine)
    flow = OAuthFlow(
        client=client,
        logger=log,
        settings=OAuthSettings(
            client_id=settings.slack.client_id,
            client_secret=settings.slack.client_secret.get_secret_value(),
            scopes=list(BOT_SCOPES),
            installation_store=store,
            installation_store_bot_only=True,
            state_store=states,
            install_page_rendering_enabled=False,
        ),
    )
    return store, flow
