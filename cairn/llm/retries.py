"""How the LLM adapters wait and give up: one rule for every provider's SDK.

Both official SDKs (Anthropic's and OpenAI's) back off the same way and read ``retry-after`` the
same way; the adapters restate that rule here once, to retry a stream that broke off mid-answer
(which the SDKs no longer retry) and to word the final error.
"""

from __future__ import annotations

import email.utils
import random
import time

import httpx2

__all__ = [
    "LONGEST_RETRY_AFTER",
    "after_retries",
    "backoff",
    "refuse_long_retry_after",
    "retry_after",
    "retryable",
    "timed_out",
]

LONGEST_RETRY_AFTER = 60.0
"""Seconds. A ``retry-after`` longer than this fails the call at once instead of stalling a reply;
the SDKs themselves would sleep for much longer."""


def backoff(retry: int) -> float:
    """Seconds to wait before retry ``retry`` (0 for the first), as the SDKs wait between theirs.

    Their rule restated: 0.5s doubling with each retry up to 8s, less up to 25% jitter.
    """
    return min(0.5 * 2.0**retry, 8.0) * (1 - 0.25 * random.random())


def retryable(status: int) -> bool:
    """The statuses the SDKs retry (their own rule, restated to word the final error)."""
    return status in (408, 409, 429) or status >= 500


def retry_after(headers: httpx2.Headers) -> float | None:
    """Seconds the server asked to wait, read as the SDKs read them; None when it did not say."""
    try:
        return float(headers["retry-after-ms"]) / 1000
    except (KeyError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    date = email.utils.parsedate_tz(value)
    return None if date is None else email.utils.mktime_tz(date) - time.time()


def refuse_long_retry_after(headers: httpx2.Headers) -> None:
    """Mark a response not to be retried when its ``headers`` ask for a wait past
    LONGEST_RETRY_AFTER.

    ``x-should-retry: false`` is the SDKs' own switch for "do not retry this response".
    """
    wait = retry_after(headers)
    if wait is not None and wait > LONGEST_RETRY_AFTER:
        headers["x-should-retry"] = "false"


def after_retries(n: int) -> str:
    """How many times a failed call was retried, in words for its error message."""
    return f"after {n} {'retry' if n == 1 else 'retries'}" if n else "without retrying"


def timed_out(who: str, timeout: float, retries: str | None = None) -> str:
    """The message for a call to ``who`` that timed out; ``retries`` None when it stopped
    sending mid-answer (a stream, which the SDKs no longer retry)."""
    if retries is None:
        return (
            f"{who} stopped sending mid-answer for more than {timeout:g}s;"
            " try again, or raise CAIRN_LLM_TIMEOUT"
        )
    return (
        f"{who} did not answer within {timeout:g}s ({retries});"
        " try again, or raise CAIRN_LLM_TIMEOUT"
    )
