"""The Slack Web API client Cairn uses: slack_sdk's WebClient at SLACK_API_URL, retrying.

Rate limits (HTTP 429) are retried after the ``Retry-After`` Slack sends, connection errors and
Slack's 500 / 503 with backoff, each up to CAIRN_SLACK_API_RETRIES times, by slack_sdk's own
retry handlers, so every call (Bolt's included) gets the same treatment.
"""

from __future__ import annotations

from http.client import RemoteDisconnected
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)

from cairn.core.settings import Settings

__all__ = ["web_client"]

# Errors worth another try: the connection failed or dropped before Slack answered.
_CONNECTION_ERRORS: list[type[Exception]] = [
    URLError,
    ConnectionError,
    RemoteDisconnected,
    TimeoutError,
]


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
    return WebClient(token=token, base_url=base_url, timeout=timeout, retry_handlers=handlers)
