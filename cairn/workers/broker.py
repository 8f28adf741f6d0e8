"""Celery's Redis transport, with one Redis client per channel instead of one per message.

kombu's Redis channel builds a new ``redis.Redis`` client for every acknowledgement and every
delivery it records for ``acks_late`` (``Channel.conn_or_acquire``). A client is cheap to
connect (it draws from the channel's pool) but costly to build with redis-py's response
callbacks, and with acks_late that happens twice per task: profiled, it was the largest single
cost of a worker handling short turns. Clients are thread-safe, so one per channel (rebuilt
when the channel replaces its connection pool) does the same work. Everything else is kombu's.

Celery uses it through ``broker_transport`` (see :mod:`cairn.workers.app`) for ``redis://``
and ``rediss://`` broker URLs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kombu.transport import redis as kombu_redis

__all__ = ["Channel", "Transport"]


class Channel(kombu_redis.Channel):
    """A kombu Redis channel that reuses its synchronous client."""

    _shared_client: Any = None

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        """The given client, else this channel's shared one (same pool as kombu would use)."""
        if client:
            yield client
            return
        pool = self.pool
        shared = self._shared_client
        if shared is None or shared.connection_pool is not pool:
            shared = self._shared_client = self._create_client()  # type: ignore[no-untyped-call]
        yield shared


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with :class:`Channel`."""

    Channel = Channel
