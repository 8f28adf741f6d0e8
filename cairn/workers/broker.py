"""Celery on Redis: the workers' transport, and the frontends' publisher.

The transport is kombu's Redis transport, with one Redis client per channel instead of one per
message.

kombu's Redis channel builds a new ``redis.Redis`` client for every acknowledgement and every
delivery it records for ``acks_late`` (``Channel.conn_or_acquire``). A client is cheap to
connect (it draws from the channel's pool) but costly to build with redis-py's response
callbacks, and with acks_late that happens twice per task: profiled, it was the largest single
cost of a worker handling short turns. Clients are thread-safe, so one per channel (rebuilt
when the channel replaces its connection pool) does the same work. Everything else is kombu's.

Celery uses it through ``broker_transport`` (see :mod:`cairn.workers.celery_app`) for ``redis://``
and ``rediss://`` broker URLs.

The publisher (:class:`QueuePublisher`) puts a task message on its Redis list the way kombu's
Redis transport does, without kombu's producer: Celery builds the message (protocol 2), the
envelope is kombu's, and one LPUSH sends it. That costs 0.17 ms of CPU against 0.38 ms for
``apply_async`` (ADR 0016), on the path of every message. A test compares the envelope with
the one ``apply_async`` writes, so that a Celery or kombu upgrade that changes it is noticed.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis
from celery import Celery
from kombu.serialization import dumps
from kombu.transport import redis as kombu_redis

__all__ = ["Channel", "QueuePublisher", "Transport", "is_redis_url"]

# Publishing retries a connection failure after these pauses (seconds), then gives up.
RETRY_PAUSES = (0.2, 0.7, 1.2)


def is_redis_url(url: str | None) -> bool:
    """True for a broker URL this module serves (``redis://``, ``rediss://``)."""
    return (url or "").startswith(("redis://", "rediss://"))


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


class QueuePublisher:
    """Sends Celery tasks to a queue on a Redis broker with one LPUSH each.

    Messages carry no priority and go to the queue by name (the default exchange), which is how
    Cairn's tasks are routed; Celery's before/after publish signals are not sent.
    """

    def __init__(self, app: Celery, url: str, queue: str, *, timeout: float = 10.0) -> None:
        self._amqp = app.amqp
        self._queue = queue
        # Thread-safe, with its own connection pool; a Redis that accepts and never answers
        # fails the publish after ``timeout`` seconds (per try) instead of hanging the frontend.
        self._client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=min(timeout, 5.0)
        )

    def publish(self, task: str, args: Sequence[Any]) -> str:
        """Queue ``task`` with ``args``; returns the task id.

        Raises redis.ConnectionError or redis.TimeoutError when Redis stays unreachable through
        the retries, and redis.RedisError for any other refusal.
        """
        task_id = str(uuid.uuid4())
        message = self._amqp.create_task_message(task_id, task, tuple(args), {}, ignore_result=True)
        content_type, encoding, body = dumps(message.body, serializer="json")  # type: ignore[no-untyped-call]
        raw = body if isinstance(body, bytes) else body.encode(encoding)
        envelope = {
            "body": base64.b64encode(raw).decode("ascii"),
            "content-encoding": encoding,
            "content-type": content_type,
            "headers": message.headers,
            "properties": {
                **message.properties,
                "delivery_mode": 2,  # persistent, kombu's default
                "delivery_info": {"exchange": "", "routing_key": self._queue},
                "priority": 0,
                "body_encoding": "base64",
                "delivery_tag": str(uuid.uuid4()),
            },
        }
        data = json.dumps(envelope)
        for pause in RETRY_PAUSES:
            try:
                self._client.lpush(self._queue, data)
                return task_id
            except (redis.ConnectionError, redis.TimeoutError):
                time.sleep(pause)
        self._client.lpush(self._queue, data)  # the last try: its failure is the caller's
        return task_id

    def close(self) -> None:
        """Close the connections to Redis."""
        self._client.close()
