"""Answers as they are written: the text a worker's model streams, on its way to the frontend.

Best effort on top of the durable path. The worker publishes each piece of a reply's text as
the model writes it (:class:`StreamPiece`, keyed by the event the reply answers); a frontend
that subscribed to the tenant shows it growing. The final reply still goes through the outbox,
exactly once, and is what counts: a piece lost, a subscriber late or a stream cut short only
means the person sees the answer appear at once, as before. With a Redis broker the pieces go
through Redis pub/sub (the worker is another process); without one, through this process.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import time
from dataclasses import asdict, dataclass
from typing import Literal, Protocol

import redis

from cairn.core.errors import first_line

__all__ = [
    "LocalStreams",
    "RedisStreams",
    "ReplyStreams",
    "StreamPiece",
    "Subscription",
    "local_streams",
]

log = logging.getLogger(__name__)

CHANNEL_PREFIX = "cairn:stream:"
SUBSCRIBE_SECONDS = 2.0
SUBSCRIPTION_BACKLOG = 10_000  # pieces a slow subscriber may fall behind before some are lost


@dataclass(frozen=True, slots=True)
class StreamPiece:
    """A piece of the reply to event ``cause`` of ``tenant``.

    ``text`` appends to what was shown; ``restart`` discards it (the model started over: a
    retry, or a new round after tool calls); ``end`` says the model is done (the final reply
    follows through the outbox).
    """

    tenant: str
    cause: int
    kind: Literal["text", "restart", "end"]
    text: str = ""

    def to_json(self) -> str:
        """The piece as one JSON object (what travels through Redis)."""
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str | bytes) -> StreamPiece | None:
        """The piece in ``raw``; None for anything malformed (logged, never raised)."""
        try:
            data = json.loads(raw)
            piece = cls(str(data["tenant"]), int(data["cause"]), data["kind"], str(data["text"]))
        except (ValueError, KeyError, TypeError):
            log.warning("dropped a malformed stream piece")
            return None
        return piece if piece.kind in ("text", "restart", "end") else None


class Subscription(Protocol):
    """The pieces of one tenant's replies, as they come."""

    def get(self, timeout: float) -> StreamPiece | None:
        """The next piece, waiting at most ``timeout`` seconds; None when none came."""
        ...

    def close(self) -> None:
        """Stop receiving."""
        ...


class ReplyStreams(Protocol):
    """Where workers publish reply pieces and frontends subscribe to them."""

    def publish(self, piece: StreamPiece) -> None:
        """Send ``piece`` to the tenant's subscribers; never raises (best effort)."""
        ...

    def subscribe(self, tenant: str) -> Subscription:
        """Receive the pieces of ``tenant``'s replies from now on."""
        ...

    def listening(self, tenant: str) -> bool:
        """Whether anyone subscribes to ``tenant`` now (a turn nobody watches publishes
        nothing); True when it cannot be told."""
        ...


class _LocalSubscription:
    def __init__(self, owner: LocalStreams, tenant: str) -> None:
        self.owner = owner
        self.tenant = tenant
        self.pieces: queue.Queue[StreamPiece] = queue.Queue(SUBSCRIPTION_BACKLOG)

    def get(self, timeout: float) -> StreamPiece | None:
        try:
            return self.pieces.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self.owner._drop(self)


class LocalStreams:
    """Reply pieces within this process (in-process workers)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: dict[str, list[_LocalSubscription]] = {}

    def publish(self, piece: StreamPiece) -> None:
        """Hand ``piece`` to each subscriber of its tenant; one that fell far behind misses it."""
        with self._lock:
            subscribers = list(self._subscribers.get(piece.tenant, ()))
        for subscription in subscribers:
            # Best effort: the final reply still comes through the outbox.
            with contextlib.suppress(queue.Full):
                subscription.pieces.put_nowait(piece)

    def listening(self, tenant: str) -> bool:
        """Whether a subscription to ``tenant`` is open in this process."""
        with self._lock:
            return bool(self._subscribers.get(tenant))

    def subscribe(self, tenant: str) -> Subscription:
        """A subscription to ``tenant``'s pieces."""
        subscription = _LocalSubscription(self, tenant)
        with self._lock:
            self._subscribers.setdefault(tenant, []).append(subscription)
        return subscription

    def _drop(self, subscription: _LocalSubscription) -> None:
        with self._lock:
            subscribers = self._subscribers.get(subscription.tenant, [])
            if subscription in subscribers:
                subscribers.remove(subscription)


class _RedisSubscription:
    """A subscription to one tenant's channel; with Redis down it receives nothing."""

    def __init__(self, client: redis.Redis[bytes], tenant: str) -> None:
        self.pubsub: redis.client.PubSub | None = client.pubsub()
        try:
            self.pubsub.subscribe(CHANNEL_PREFIX + tenant)
            # Subscribed once Redis says so: a piece published before that would be missed.
            deadline = time.monotonic() + SUBSCRIBE_SECONDS
            while time.monotonic() < deadline:
                message = self.pubsub.get_message(timeout=0.1)
                if message and message.get("type") == "subscribe":
                    break
        except (redis.RedisError, OSError) as exc:
            log.warning("answers will not stream (Redis: %s)", first_line(exc))
            self.close()

    def get(self, timeout: float) -> StreamPiece | None:
        if self.pubsub is None:
            time.sleep(timeout)
            return None
        try:
            message = self.pubsub.get_message(timeout=timeout)
        except (redis.RedisError, OSError) as exc:
            log.debug("stream subscription interrupted: %s", first_line(exc))
            time.sleep(timeout)
            return None
        if not message or message.get("type") != "message":
            return None
        return StreamPiece.from_json(message["data"])

    def close(self) -> None:
        if self.pubsub is not None:
            with contextlib.suppress(redis.RedisError, OSError):
                self.pubsub.close()
            self.pubsub = None


class RedisStreams:
    """Reply pieces through Redis pub/sub, one channel per tenant."""

    def __init__(self, client: redis.Redis[bytes]) -> None:
        self.client = client

    def publish(self, piece: StreamPiece) -> None:
        """Publish ``piece``; a Redis failure is logged at debug and the piece is lost."""
        try:
            self.client.publish(CHANNEL_PREFIX + piece.tenant, piece.to_json())
        except (redis.RedisError, OSError) as exc:
            log.debug("a stream piece was not published: %s", first_line(exc))

    def subscribe(self, tenant: str) -> Subscription:
        """A subscription to ``tenant``'s channel."""
        return _RedisSubscription(self.client, tenant)

    def listening(self, tenant: str) -> bool:
        """Whether ``tenant``'s channel has subscribers (PUBSUB NUMSUB); True if Redis fails,
        so that publishing then decides."""
        try:
            counts = self.client.pubsub_numsub(CHANNEL_PREFIX + tenant)
        except (redis.RedisError, OSError):
            return True
        return bool(counts and counts[0][1])


_LOCAL = LocalStreams()


def local_streams() -> LocalStreams:
    """This process's in-process streams (shared by its frontend and in-process workers)."""
    return _LOCAL
