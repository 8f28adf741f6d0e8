"""The Slack Web API client Cairn uses: slack_sdk's WebClient at SLACK_API_URL, retrying, and
gated: every text it sends passes cairn.core.gate first, whichever method sent it.

Rate limits (HTTP 429) are retried after the ``Retry-After`` Slack sends, connection errors and
Slack's 500 / 503 with backoff, each up to CAIRN_SLACK_API_RETRIES times, by slack_sdk's own
retry handlers, so every call (Bolt's included) gets the same treatment.
"""

from __future__ import annotations

from http.client import RemoteDisconnected
from typing import Any
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.web import SlackResponse

from cairn.core.gate import gated_data
from cairn.core.settings import Settings

__all__ = ["GatedWebClient", "web_client"]

# Errors worth another try: the connection failed or dropped before Slack answered.
_CONNECTION_ERRORS: list[type[Exception]] = [
    URLError,
    ConnectionError,
    RemoteDisconnected,
    TimeoutError,
]


# What an OAuth exchange sends: credentials Slack must receive as they are, never posted text.
_CREDENTIAL_FIELDS = frozenset({"token", "client_id", "client_secret", "code", "refresh_token"})


def _gated_fields(values: dict[str, Any] | None) -> dict[str, Any] | None:
    if not values:
        return values
    return {k: v if k in _CREDENTIAL_FIELDS else gated_data(v) for k, v in values.items()}


class GatedWebClient(WebClient):
    """slack_sdk's WebClient whose every call sends its fields through the gate: text,
    blocks, attachments, file content (identifiers pass unchanged; OAuth credentials are left
    alone). Every Web API method ends in :meth:`api_call`, so no post can skip it."""

    def api_call(
        self,
        api_method: str,
        *,
        http_verb: str = "POST",
        files: dict[str, Any] | None = None,
        data: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
        json: dict[str, Any] | None = None,
        headers: dict[str, Any] | None = None,
        auth: dict[str, Any] | None = None,
    ) -> SlackResponse:
        return super().api_call(
            api_method,
            http_verb=http_verb,
            files=files,
            data=_gated_fields(data),
            params=_gated_fields(params),
            json=_gated_fields(json),
            headers=headers,
            auth=auth,
        )


def web_client(
    settings: Settings, token: str | None, *, timeout: int = 30, wait_on_limits: bool = True
) -> WebClient:
    """A WebClient for ``token`` (None: no token, as for the OAuth flow) at SLACK_API_URL.

    ``wait_on_limits=False`` gives a client that raises on a 429 instead of sleeping through
    it and tries a failed connection once more only: for calls that have something better to
    do than wait (a streamed answer just shows more at its next update).
    """
    retries = settings.slack.api_retries if wait_on_limits else 1
    base_url = settings.slack.api_url
    if not base_url.endswith("/"):
        base_url += "/"
    handlers = [
        ConnectionErrorRetryHandler(max_retry_count=retries, error_types=_CONNECTION_ERRORS),
        ServerErrorRetryHandler(max_retry_count=retries),
    ]
    if wait_on_limits:
        handlers.insert(0, RateLimitErrorRetryHandler(max_retry_count=retries))
    return GatedWebClient(token=token, base_url=base_url, timeout=timeout, retry_handlers=handlers)
