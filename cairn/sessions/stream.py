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
# A prefix subscriber (a frontend of many workspaces) also subscribes to PRESENCE_PREFIX + its
# prefix, a plain channel nobody publishes on, so that a publisher can count it with PUBSUB
# NUMSUB: PUBSUB NUMPAT counts every pattern of the server, and Celery's Redis transport holds
# some in every worker, so "any pattern" read as "someone listens" on every turn (ADR 0041).
PRESENCE_PREFIX = "cairn:stream-listeners:"
SUBSCRIBE_SECONDS = 2.0
SUBSCRIPTION_BACKLOG = 10_000  # pieces a slow subscriber may fall behind before some are lost
LISTENING_TTL = 1.0  # seconds a process keeps the answer to "does anyone listen to tenant T?"


Kind = Literal["text", "restart", "end", "status"]
KINDS = ("text", "restart", "end", "status")


@dataclass(frozen=True, slots=True)
class StreamPiece:
    """A piece of the reply to event ``cause`` of ``tenant``.

    ``text`` appends to what was shown; ``restart`` discards it (the model started over: a
    retry, or a new round after tool calls); ``end`` says the model is done (the final reply
    follows through the outbox); ``status`` says what the agent is doing meanwhile (its text,
    e.g. "searching memory...").

    Each piece also says where the reply goes (``channel``, ``thread``, the person it answers
    and the ``agent``), so that a frontend can show it without a database read; ``attempt``
    names one run of the turn (a worker killed mid-turn is followed by a run with another
    attempt, whose text starts over), and ``at`` is when the piece was made (epoch seconds).
    """

    tenant: str
    cause: int
    kind: Kind
    text: str = ""
    channel: str = ""
    thread: str = ""
    user: str = ""
    agent: str = ""
    attempt: str = ""
    at: float = 0.0

    def to_json(self) -> str:
        """The piece as one JSON object (what travels through Redis)."""
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str | bytes) -> StreamPiece | None:
        """The piece in ``raw``; None for anything malformed (logged, never raised)."""
        try:
            data = json.loads(raw)
            piece = cls(
                str(data["tenant"]),
                int(data["cause"]),
                data["kind"],
                str(data.get("text", "")),
                str(data.get("channel", "")),
                str(data.get("thread", "")),
                str(data.get("user", "")),
                str(data.get("agent", "")),
                str(data.get("attempt", "")),
                float(data.get("at", 0.0)),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            log.warning("dropped a malformed stream piece")
            return None
        return piece if piece.kind in KINDS else None


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

    def subscribe(self, tenant: str, *, prefix: bool = False) -> Subscription:
        """Receive the pieces of ``tenant``'s replies from now on; with ``prefix``, of every
        tenant whose name starts with ``tenant`` (``"slack:"``: every Slack workspace)."""
        ...

    def listening(self, tenant: str) -> bool:
        """Whether anyone subscribes to ``tenant`` now (a turn nobody watches publishes
        nothing); True when it cannot be told."""
        ...


class _LocalSubscription:
    def __init__(self, owner: LocalStreams, tenant: str, prefix: bool) -> None:
        self.owner = owner
        self.tenant = tenant
        self.prefix = prefix
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
        self._prefixed: dict[str, list[_LocalSubscription]] = {}

    def publish(self, piece: StreamPiece) -> None:
        """Hand ``piece`` to each subscriber of its tenant; one that fell far behind misses it."""
        with self._lock:
            subscribers = list(self._subscribers.get(piece.tenant, ()))
            for start, subs in self._prefixed.items():
                if piece.tenant.startswith(start):
                    subscribers += subs
        for subscription in subscribers:
            # Best effort: the final reply still comes through the outbox.
            with contextlib.suppress(queue.Full):
                subscription.pieces.put_nowait(piece)

    def listening(self, tenant: str) -> bool:
        """Whether a subscription to ``tenant`` (or a prefix of it) is open in this process."""
        with self._lock:
            return bool(self._subscribers.get(tenant)) or any(
                subs and tenant.startswith(p) for p, subs in self._prefixed.items()
            )

    def subscribe(self, tenant: str, *, prefix: bool = False) -> Subscription:
        """A subscription to ``tenant``'s pieces (with ``prefix``, of every tenant it starts)."""
        subscription = _LocalSubscription(self, tenant, prefix)
        with self._lock:
            table = self._prefixed if prefix else self._subscribers
            table.setdefault(tenant, []).append(subscription)
        return subscription

    def _drop(self, subscription: _LocalSubscription) -> None:
        with self._lock:
            table = self._prefixed if subscription.prefix else self._subscribers
            subscribers = table.get(subscription.tenant, [])
            if subscription in subscribers:
                subscribers.remove(subscription)


class _RedisSubscription:
    """A subscription to one tenant's channel; with Redis down it receives nothing."""

    def __init__(self, client: redis.Redis[bytes], tenant: str, prefix: bool) -> None:
        self.pubsub: redis.client.PubSub | None = client.pubsub()
        try:
            if prefix:
                self.pubsub.psubscribe(CHANNEL_PREFIX + _glob_escape(tenant) + "*")
                self.pubsub.subscribe(PRESENCE_PREFIX + tenant)  # to be counted (see above)
            else:
                self.pubsub.subscribe(CHANNEL_PREFIX + tenant)
            # Subscribed once Redis says so: a piece published before that would be missed.
            awaited = 2 if prefix else 1
            deadline = time.monotonic() + SUBSCRIBE_SECONDS
            while awaited and time.monotonic() < deadline:
                message = self.pubsub.get_message(timeout=0.1)
                if message and message.get("type") in ("subscribe", "psubscribe"):
                    awaited -= 1
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
        if not message or message.get("type") not in ("message", "pmessage"):
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
        self._heard: dict[str, tuple[float, bool]] = {}  # tenant -> (when asked, answer)

    def publish(self, piece: StreamPiece) -> None:
        """Publish ``piece``; a Redis failure is logged at debug and the piece is lost."""
        try:
            self.client.publish(CHANNEL_PREFIX + piece.tenant, piece.to_json())
        except (redis.RedisError, OSError) as exc:
            log.debug("a stream piece was not published: %s", first_line(exc))

    def subscribe(self, tenant: str, *, prefix: bool = False) -> Subscription:
        """A subscription to ``tenant``'s channel (with ``prefix``, a pattern subscription to
        every tenant it starts)."""
        subscription = _RedisSubscription(self.client, tenant, prefix)
        # This process listens now: what it kept of "nobody listens" no longer holds.
        if prefix:
            self._heard.clear()
        else:
            self._heard.pop(tenant, None)
        return subscription

    def listening(self, tenant: str) -> bool:
        """Whether ``tenant``'s channel has subscribers, or a subscriber to a prefix of it (a
        frontend of many workspaces) is present: one PUBSUB NUMSUB of the tenant's channel and
        of the presence channel of each of its prefixes. True if Redis fails, so that
        publishing then decides. The answer is kept for a second per tenant by this object
        (the runtime keeps one per process): a busy worker asks Redis once a second, not once
        a turn."""
        now = time.monotonic()
        known = self._heard.get(tenant)
        if known is not None and now - known[0] < LISTENING_TTL:
            return known[1]
        channels = [CHANNEL_PREFIX + tenant]
        channels += [PRESENCE_PREFIX + tenant[:n] for n in range(len(tenant) + 1)]
        try:
            heard = any(count for _, count in self.client.pubsub_numsub(*channels))
        except (redis.RedisError, OSError):
            return True
        if len(self._heard) > 10_000:
            self._heard.clear()
        self._heard[tenant] = (now, heard)
        return heard


def _glob_escape(text: str) -> str:
    """``text`` with Redis glob characters escaped, for a pattern that matches it literally."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


_LOCAL = LocalStreams()


def local_streams() -> LocalStreams:
    """This process's in-process streams (shared by its frontend and in-process workers)."""
    return _LOCAL
