"""How the Matrix frontend waits out a homeserver that fails: which failures pass, and how long
to pause between tries."""

from __future__ import annotations

import random

import aiohttp

__all__ = ["CONNECTION_ERRORS", "Retry", "backoff"]

BACKOFF_MAX_SECONDS = 30.0
# Failures of the connection to the homeserver, after nio's own quick retries.
CONNECTION_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)


class Retry(Exception):
    """The homeserver answered with an error that may pass; try again after a pause."""


def backoff(failures: int) -> float:
    """Seconds to wait after ``failures`` failures in a row: exponential with jitter, capped."""
    ceiling = min(BACKOFF_MAX_SECONDS, 0.5 * 2.0 ** min(failures, 10))
    return ceiling * random.uniform(0.5, 1.0)
