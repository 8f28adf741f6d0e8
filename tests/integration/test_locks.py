"""Session locks on a real Redis: held across a long turn, freed when the holder dies."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from cairn.core.errors import QueueError
from cairn.sessions.locks import LocalLocks, RedisLocks


@pytest.fixture
def client(redis_url: str) -> redis.Redis[bytes]:
    return redis.Redis.from_url(redis_url)


def test_a_held_lock_outlives_its_ttl_while_the_holder_works(client: redis.Redis[bytes]) -> None:
    locks = RedisLocks(client, ttl=3)
    with locks.hold("session:1", wait=1):
        time.sleep(4.5)  # longer than the ttl: the heartbeat must have renewed it
        with (
            pytest.raises(QueueError, match="still busy"),
            RedisLocks(client, ttl=3).hold("session:1", wait=0.5),
        ):
            pass
    # Released at the end of the block: the next holder gets it at once.
    with locks.hold("session:1", wait=0.5):
        assert client.exists("cairn:lock:session:1")


def test_a_dead_holders_lock_frees_after_the_ttl(client: redis.Redis[bytes]) -> None:
    # A worker that died mid-turn: its lock is in Redis with nobody to renew it.
    client.set("cairn:lock:session:2", b"dead-worker-token", px=3000)
    started = time.monotonic()
    with RedisLocks(client, ttl=3).hold("session:2", wait=10):
        waited = time.monotonic() - started
    assert 1.5 < waited < 10


def test_an_unreachable_redis_is_a_queue_error() -> None:
    dead = redis.Redis(host="127.0.0.1", port=9, socket_connect_timeout=0.5)
    with (
        pytest.raises(QueueError, match="session lock in Redis"),
        RedisLocks(dead).hold("s", wait=0.5),
    ):
        pass


def test_local_locks_serialise_threads_per_key() -> None:
    locks = LocalLocks()
    inside = 0
    most = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        with locks.hold("session:1", wait=10):
            with guard:
                inside += 1
                most = max(most, inside)
            time.sleep(0.05)
            with guard:
                inside -= 1

    threads = [threading.Thread(target=work) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == 1
