"""Reply pieces travel from workers to frontends: in this process, and through real Redis."""

from __future__ import annotations

import json
import threading
import uuid

import pytest
import redis

from cairn.sessions.stream import (
    CHANNEL_PREFIX,
    LocalStreams,
    RedisStreams,
    ReplyStreams,
    StreamPiece,
)


def _pieces(tenant: str) -> list[StreamPiece]:
    return [
        StreamPiece(tenant, 7, "text", "Roll back "),
        StreamPiece(tenant, 7, "restart"),
        StreamPiece(tenant, 7, "text", "Roll back with the tag — ünïcode kept"),
        StreamPiece(tenant, 7, "end"),
    ]


def _round_trip(streams: ReplyStreams, run: str = "") -> None:
    mine, other = streams.subscribe("T1" + run), streams.subscribe("T2" + run)
    try:
        for piece in [*_pieces("T1" + run), StreamPiece("T9" + run, 1, "text", "not for T1")]:
            streams.publish(piece)
        got = []
        while (piece := mine.get(2.0)) is not None:
            got.append(piece)
            if piece.kind == "end":
                break
        assert got == _pieces("T1" + run)  # in order, whole, and only the tenant's
        assert other.get(0.2) is None
    finally:
        mine.close()
        other.close()


def test_pieces_reach_subscribers_of_their_tenant_in_this_process() -> None:
    streams = LocalStreams()
    assert not streams.listening("T1")
    _round_trip(streams)
    assert not streams.listening("T1")  # closed subscriptions no longer count
    late = streams.subscribe("T1")
    assert late.get(0.05) is None  # a subscriber sees what comes after it subscribed


def test_a_publisher_on_another_thread_is_heard_while_the_subscriber_waits() -> None:
    streams = LocalStreams()
    subscription = streams.subscribe("T1")
    timer = threading.Timer(0.1, streams.publish, [StreamPiece("T1", 1, "text", "hi")])
    timer.start()
    assert subscription.get(2.0) == StreamPiece("T1", 1, "text", "hi")
    timer.join()


@pytest.mark.redis
def test_pieces_travel_through_redis_and_a_malformed_message_is_dropped(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    streams = RedisStreams(client)
    # Pub/sub is server-wide, not per database: tenants of their own, apart from other processes.
    run = uuid.uuid4().hex[:8]
    tenant = "T1" + run
    assert not streams.listening(tenant)
    subscription = streams.subscribe(tenant)
    assert streams.listening(tenant)
    try:
        client.publish(CHANNEL_PREFIX + tenant, b"{not json")
        shout = {"tenant": tenant, "cause": 1, "kind": "shout"}
        client.publish(CHANNEL_PREFIX + tenant, json.dumps(shout).encode())
        for piece in _pieces(tenant):
            streams.publish(piece)
        received = [subscription.get(2.0) for _ in range(6)]  # two malformed, four pieces
        assert [p for p in received if p is not None] == _pieces(tenant)
    finally:
        subscription.close()
    _round_trip(streams, run)


@pytest.mark.redis
def test_only_a_subscriber_of_the_tenant_or_of_a_prefix_of_it_is_listening(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    # A frontend of a test in another pytest process subscribes to "slack:" (see above).
    run = uuid.uuid4().hex[:8]
    slack, matrix = f"slack{run}:", f"matrix{run}:"
    # Celery's Redis transport holds pattern subscriptions in every worker: they listen to
    # nothing of Cairn's, and a worker that took them for a frontend published every turn.
    foreign = client.pubsub()
    foreign.psubscribe("/0.celery.pidbox*", "cairn:stream:other*")
    try:
        assert not RedisStreams(client).listening(slack + "T1")
        frontend = RedisStreams(client).subscribe(slack, prefix=True)
        try:
            assert RedisStreams(client).listening(slack + "T1")  # a workspace of that frontend
            assert not RedisStreams(client).listening(matrix + "hs")  # no frontend of it
        finally:
            frontend.close()
        assert not RedisStreams(client).listening(slack + "T1")
    finally:
        foreign.close()


def test_publishing_with_redis_down_loses_the_piece_and_raises_nothing() -> None:
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    assert RedisStreams(dead).listening("T1")  # cannot tell: publishing decides
    RedisStreams(dead).publish(StreamPiece("T1", 1, "text", "lost"))
    assert RedisStreams(dead).subscribe("T1").get(0.1) is None
