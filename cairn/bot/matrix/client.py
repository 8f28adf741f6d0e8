"""The bot's nio client: its saved device, its crypto store, and the settings every user of the
device shares (the frontend, and `cairn import matrix` when no frontend runs)."""

from __future__ import annotations

from nio import AsyncClientConfig

from cairn.bot.matrix.account import BotAccount
from cairn.bot.matrix.gated import GatedAsyncClient
from cairn.bot.matrix.store import PICKLE_KEY, CryptoStore
from cairn.bot.matrix.sync import SYNC_TIMEOUT_MS
from cairn.bot.matrix.sync_state import MatrixState
from cairn.core.settings import Settings

__all__ = ["bot_client"]


def bot_client(
    settings: Settings, account: BotAccount, state: MatrixState, store: CryptoStore
) -> GatedAsyncClient:
    """A client of ``account`` with its saved device and its crypto store (not logged in yet:
    see :class:`~cairn.bot.matrix.login.Login`)."""
    store.folder.mkdir(parents=True, exist_ok=True)
    config = AsyncClientConfig(
        max_limit_exceeded=None,  # rate limited: wait as told, however often
        max_timeouts=2,  # then our own backoff takes over, and healthy() says so
        request_timeout=SYNC_TIMEOUT_MS / 1000 + 30,
        encryption_enabled=settings.matrix.encryption,
        store_sync_tokens=False,  # the since token is ours to save, after ingest
        pickle_key=PICKLE_KEY,  # named, so that `cairn doctor` reads the store with it
    )
    return GatedAsyncClient(
        account.homeserver,
        account.user_id,
        device_id=state.device_id or None,
        store_path=str(store.folder),
        config=config,
    )
