"""Working memory: a volatile key-value scratchpad per (tenant, agent, session), with a TTL.

Redis holds it when configured (shared by every worker); otherwise it lives in the process.
Every write renews the scratchpad's TTL; a scratchpad untouched for the TTL is gone. It is never
a source of truth: what must last goes to long-term memory.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from cairn.core.errors import InvalidInput

if TYPE_CHECKING:
    import redis

__all__ = [
    "InProcessWorkingMemory",
    "Pad",
    "RedisWorkingMemory",
    "Scratchpad",
    "WorkingMemory",
    "build_working_memory",
]

MAX_KEY = 200
MAX_VALUE = 20_000


@dataclass(frozen=True, slots=True)
class Pad:
    """Which scratchpad: one per tenant, agent and session."""

    tenant: str
    agent: str
    session: str

    def __post_init__(self) -> None:
        if not (self.tenant and self.agent and self.session):
            raise InvalidInput("a working-memory pad needs a tenant, an agent and a session")


class WorkingMemory(Protocol):
    """The scratchpad operations; values are strings."""

    def set(self, pad: Pad, key: str, value: str) -> None:
        """Store ``value`` under ``key`` and renew the pad's TTL."""
        ...

    def get(self, pad: Pad, key: str) -> str | None:
        """The value under ``key``, or None (never set, deleted or expired)."""
        ...

    def items(self, pad: Pad) -> dict[str, str]:
        """Every live key and value of the pad."""
        ...

    def delete(self, pad: Pad, key: str) -> None:
        """Forget ``key``."""
        ...

    def clear(self, pad: Pad) -> None:
        """Forget the whole pad (the session ended)."""
        ...


def _checked(key: str, value: str | None = None) -> None:
    if not key or len(key) > MAX_KEY:
        raise InvalidInput(f"a working-memory key needs 1 to {MAX_KEY} characters")
    if value is not None and len(value) > MAX_VALUE:
        raise InvalidInput(f"a working-memory value holds at most {MAX_VALUE} characters")


class InProcessWorkingMemory:
    """Scratchpads in this process's memory (the embedded default)."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self._clock = ttl, clock
        self._pads: dict[Pad, tuple[float, dict[str, str]]] = {}
        self._lock = threading.Lock()

    def _live(self, pad: Pad) -> dict[str, str] | None:
        entry = self._pads.get(pad)
        if entry is None:
            return None
        if entry[0] <= self._clock():
            del self._pads[pad]
            return None
        return entry[1]

    def set(self, pad: Pad, key: str, value: str) -> None:
        """Store ``value`` under ``key`` and renew the pad's TTL."""
        _checked(key, value)
        with self._lock:
            values = self._live(pad) or {}
            values[key] = value
            self._pads[pad] = (self._clock() + self.ttl, values)

    def get(self, pad: Pad, key: str) -> str | None:
        """The value under ``key``, or None."""
        with self._lock:
            return (self._live(pad) or {}).get(key)

    def items(self, pad: Pad) -> dict[str, str]:
        """Every live key and value of the pad."""
        with self._lock:
            return dict(self._live(pad) or {})

    def delete(self, pad: Pad, key: str) -> None:
        """Forget ``key``."""
        with self._lock:
            (self._live(pad) or {}).pop(key, None)

    def clear(self, pad: Pad) -> None:
        """Forget the whole pad."""
        with self._lock:
            self._pads.pop(pad, None)


class RedisWorkingMemory:
    """Scratchpads as Redis hashes with an expiry, shared by every worker."""

    def __init__(self, client: redis.Redis[bytes], ttl: float) -> None:
        self._redis, self.ttl = client, ttl

    @staticmethod
    def _key(pad: Pad) -> str:
        return f"cairn:wm:{pad.tenant}:{pad.agent}:{pad.session}"

    def set(self, pad: Pad, key: str, value: str) -> None:
        """Store ``value`` under ``key`` and renew the pad's TTL."""
        _checked(key, value)
        name = self._key(pad)
        with self._redis.pipeline() as pipe:
            pipe.hset(name, key, value)
            pipe.pexpire(name, int(self.ttl * 1000))
            pipe.execute()

    def get(self, pad: Pad, key: str) -> str | None:
        """The value under ``key``, or None."""
        value = self._redis.hget(self._key(pad), key)
        return value.decode() if value is not None else None

    def items(self, pad: Pad) -> dict[str, str]:
        """Every live key and value of the pad."""
        return {k.decode(): v.decode() for k, v in self._redis.hgetall(self._key(pad)).items()}

    def delete(self, pad: Pad, key: str) -> None:
        """Forget ``key``."""
        self._redis.hdel(self._key(pad), key)

    def clear(self, pad: Pad) -> None:
        """Forget the whole pad."""
        self._redis.delete(self._key(pad))


def build_working_memory(client: redis.Redis[bytes] | None, ttl: float) -> WorkingMemory:
    """Redis-backed when a client is given, in-process otherwise."""
    if client is not None:
        return RedisWorkingMemory(client, ttl)
    return InProcessWorkingMemory(ttl)


@dataclass(frozen=True, slots=True)
class Scratchpad:
    """One pad of a working memory, as the tools of a turn use it."""

    memory: WorkingMemory
    pad: Pad

    def write(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``; raises InvalidInput for a bad key or value."""
        self.memory.set(self.pad, key, value)

    def read(self, key: str) -> str | None:
        """The value under ``key``, or None."""
        return self.memory.get(self.pad, key)

    def entries(self) -> dict[str, str]:
        """Every live key and value."""
        return self.memory.items(self.pad)
