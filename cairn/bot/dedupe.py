"""Fast, shared "seen this before?" checks for frontends, before anything touches the database.

Slack retries an event it thinks was not acknowledged, and delivers one message twice (as
``app_mention`` and as ``message``). A frontend claims each key once here; the first claim wins
and every later one, in this process or another (through Redis), is told it is a duplicate. The
database's unique constraints stay the dedupe of record (docs/adr/0002); this store saves the
round trips, and also keeps small facts frontends share (such as which posted message a later
part of a split reply belongs to).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Protocol

import redis

from cairn.core.settings import Settings

__all__ = [
    "Dedupe",
    "LocalDedupe",
    "RedisDedupe",
    "claim_or_warn",
    "open_dedupe",
    "release_quietly",
]

log = logging.getLogger(__name__)


class Dedupe(Protocol):
    """Claims of keys with an expiry, and a small key-value memo beside them."""

    def claim(self, key: str, ttl: float) -> bool:
        """True for the first claim of ``key`` within ``ttl`` seconds, False afterwards."""
        ...

    def release(self, key: str) -> None:
        """Forget a claim (the work it guarded failed and may be tried again)."""
        ...

    def put(self, key: str, value: str, ttl: float) -> None:
        """Remember ``value`` under ``key`` for ``ttl`` seconds."""
        ...

    def get(self, key: str) -> str | None:
        """The value under ``key``, or None when absent or expired."""
        ...

    def healthy(self) -> bool:
        """Whether the store answers right now."""
        ...


class LocalDedupe:
    """Claims held in this process only: right for the embedded, single-process default."""

    def __init__(self, max_keys: int = 200_000) -> None:
        self._lock = threading.Lock()
        self._expiry: dict[str, float] = {}
        self._values: dict[str, str] = {}
        self._max_keys = max_keys

    def claim(self, key: str, ttl: float) -> bool:
        """True for the first claim of ``key`` within ``ttl`` seconds."""
        now = time.monotonic()
        with self._lock:
            expires = self._expiry.get(key)
            if expires is not None and expires > now:
                return False
            self._expiry[key] = now + ttl
            self._prune(now)
            return True

    def release(self, key: str) -> None:
        """Forget the claim of ``key``."""
        with self._lock:
            self._expiry.pop(key, None)

    def put(self, key: str, value: str, ttl: float) -> None:
        """Remember ``value`` under ``key`` for ``ttl`` seconds."""
        now = time.monotonic()
        with self._lock:
            self._expiry[key] = now + ttl
            self._values[key] = value
            self._prune(now)

    def get(self, key: str) -> str | None:
        """The value under ``key``, or None."""
        with self._lock:
            expires = self._expiry.get(key)
            if expires is None or expires <= time.monotonic():
                return None
            return self._values.get(key)

    def healthy(self) -> bool:
        """Always: the store is this process's memory."""
        return True

    def _prune(self, now: float) -> None:
        if len(self._expiry) <= self._max_keys:
            return
        # Expired keys go first; if that is not enough, the oldest claims do.
        for key in [k for k, t in self._expiry.items() if t <= now]:
            self._expiry.pop(key, None)
            self._values.pop(key, None)
        excess = len(self._expiry) - self._max_keys
        for key in sorted(self._expiry, key=self._expiry.__getitem__)[: max(excess, 0)]:
            self._expiry.pop(key, None)
            self._values.pop(key, None)


class RedisDedupe:
    """Claims in Redis (``SET NX PX``), shared by every frontend process of the deployment."""

    def __init__(self, client: redis.Redis[bytes], prefix: str = "cairn:dedupe:") -> None:
        self._redis = client
        self._prefix = prefix

    def claim(self, key: str, ttl: float) -> bool:
        """True for the first claim of ``key`` within ``ttl`` seconds, across processes.

        Raises redis.RedisError when Redis is unreachable (the caller decides what to do).
        """
        return bool(self._redis.set(self._prefix + key, b"1", nx=True, px=_millis(ttl)))

    def release(self, key: str) -> None:
        """Forget the claim of ``key``."""
        self._redis.delete(self._prefix + key)

    def put(self, key: str, value: str, ttl: float) -> None:
        """Remember ``value`` under ``key`` for ``ttl`` seconds."""
        self._redis.set(self._prefix + key, value.encode(), px=_millis(ttl))

    def get(self, key: str) -> str | None:
        """The value under ``key``, or None."""
        raw = self._redis.get(self._prefix + key)
        return raw.decode() if raw is not None else None

    def healthy(self) -> bool:
        """Whether Redis answers a PING."""
        try:
            return bool(self._redis.ping())
        except redis.RedisError:
            return False


def _millis(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def open_dedupe(settings: Settings, client: redis.Redis[bytes] | None = None) -> Dedupe:
    """Redis when CAIRN_REDIS_URL or CAIRN_BROKER_URL is set, this process's memory otherwise.

    ``client`` reuses the runtime's Redis connection; without it one is opened from the URL.
    """
    url = settings.effective_redis_url
    if not url:
        return LocalDedupe()
    if client is None:
        client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    return RedisDedupe(client)


def claim_or_warn(store: Dedupe, key: str, ttl: float) -> bool:
    """Claim ``key`` for ``ttl`` seconds; True when the claim is ours or the store is unreachable.

    Used before posting a reply that several frontend processes may see pending. A Redis outage
    must not silence the bot, so without the store the caller posts unclaimed: a rare duplicate
    is better than no reply.
    """
    try:
        return store.claim(key, ttl)
    except redis.RedisError as exc:
        log.warning("dedupe store unavailable, posting without a claim: %s", exc)
        return True


def release_quietly(store: Dedupe, key: str) -> None:
    """Release the claim of ``key``; an unreachable store is ignored (the claim expires)."""
    with contextlib.suppress(redis.RedisError):
        store.release(key)
