"""Logging the Matrix bot in: a given access token, else the saved device and token, else the
password (which makes a device, saved for the next start). A server that is away is waited for;
credentials it rejects stop the frontend, since retrying cannot help."""

from __future__ import annotations

import asyncio
import logging

from nio import AsyncClient, LoginResponse, ProfileGetDisplayNameResponse, WhoamiResponse

from cairn.bot.matrix.account import BotAccount
from cairn.bot.matrix.retry import CONNECTION_ERRORS, Retry, backoff
from cairn.bot.matrix.sync_state import MatrixState, StateFile
from cairn.core.errors import CairnError, ConfigError
from cairn.core.settings import Settings

__all__ = ["DEVICE_NAME", "TOKEN_ERRORS", "Login"]

log = logging.getLogger(__name__)

DEVICE_NAME = "Cairn"
TOKEN_ERRORS = frozenset({"M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"})


class _TokenRejected(Exception):
    """The saved access token is no longer valid (logged out, or the device was deleted)."""


class Login:
    """Logs ``account`` in; the device and token it gets are kept in ``state``."""

    def __init__(
        self, account: BotAccount, settings: Settings, state: MatrixState, state_file: StateFile
    ) -> None:
        self.account = account
        self.settings = settings
        self.state = state
        self.state_file = state_file

    async def log_in(self, client: AsyncClient) -> None:
        """Log in (reusing the saved device and token), retrying while the server is away.

        Raises CairnError (ConfigError among them) when the credentials are rejected or missing.
        """
        failures = 0
        while True:
            try:
                await self._try_log_in(client)
            except (*CONNECTION_ERRORS, Retry) as exc:
                failures += 1
                delay = backoff(failures)
                log.warning("Matrix login failed (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            break
        try:
            response = await client.get_displayname(self.account.user_id)
        except CONNECTION_ERRORS:
            return  # the localpart will do until the next login
        if isinstance(response, ProfileGetDisplayNameResponse) and response.displayname:
            names = (str(response.displayname), *self.account.names)
            self.account.names = tuple(dict.fromkeys(names))

    async def _try_log_in(self, client: AsyncClient) -> None:
        token = self.settings.matrix.access_token
        if token is not None:
            await self._use_token(client, token.get_secret_value(), saved=False)
            return
        if self.state.access_token:
            try:
                await self._use_token(client, self.state.access_token, saved=True)
                return
            except _TokenRejected:
                log.info("the saved Matrix access token was rejected; logging in again")
                self.state.access_token = ""
        password = self.settings.matrix.password
        if password is None:
            raise ConfigError("Matrix needs MATRIX_PASSWORD or MATRIX_ACCESS_TOKEN")
        client.device_id = self.state.device_id or None
        response = await client.login(password.get_secret_value(), device_name=DEVICE_NAME)
        user_id = self.account.user_id
        if not isinstance(response, LoginResponse):
            if response.status_code in {"M_FORBIDDEN", "M_USER_DEACTIVATED", "M_INVALID_USERNAME"}:
                raise CairnError(
                    f"the homeserver {self.account.homeserver} rejected the login of {user_id}: "
                    f"{response}; check MATRIX_USER_ID and MATRIX_PASSWORD"
                )
            raise Retry(str(response))
        self.state.device_id = str(response.device_id)
        self.state.access_token = str(response.access_token)
        await asyncio.to_thread(self.state_file.save, self.state)
        log.info("logged in to Matrix as %s (device %s)", user_id, response.device_id)

    async def _use_token(self, client: AsyncClient, token: str, *, saved: bool) -> None:
        client.access_token = token
        response = await client.whoami()
        if not isinstance(response, WhoamiResponse):
            if response.status_code in TOKEN_ERRORS | {"M_FORBIDDEN"}:
                if saved:
                    raise _TokenRejected(str(response))
                raise CairnError(f"the homeserver rejected MATRIX_ACCESS_TOKEN: {response}")
            raise Retry(str(response))
        user_id = self.account.user_id
        if response.user_id != user_id:
            raise ConfigError(
                f"the Matrix access token belongs to {response.user_id}, not to "
                f"MATRIX_USER_ID={user_id}"
            )
        device = str(response.device_id or self.state.device_id or "")
        client.restore_login(user_id, device, token)
        if device and device != self.state.device_id:
            self.state.device_id = device
            await asyncio.to_thread(self.state_file.save, self.state)
