"""The scheduler lock on a real Redis: one beat holds it, the others wait, a lost lock is let go."""

from __future__ import annotations

import logging

import pytest
import redis

from cairn.workers.beat import LOCK_KEY, SchedulerLock, scheduler_holder


@pytest.fixture
def client(redis_url: str) -> redis.Redis[bytes]:
    return redis.Redis.from_url(redis_url)


def test_one_beat_holds_the_lock_and_the_other_waits(
    client: redis.Redis[bytes], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cairn.workers.beat")
    first, second = SchedulerLock(client, ttl=3), SchedulerLock(client, ttl=3)
    assert first.keep()
    assert not second.keep()
    assert first.keep()  # renewed
    assert scheduler_holder(client) == first.holder
    assert f"took the scheduler lock as {first.holder}" in caplog.text
    assert f"held by {first.holder}: waiting (standby)" in caplog.text


def test_a_beat_whose_lock_was_taken_stops_at_once_and_says_so(
    client: redis.Redis[bytes], caplog: pytest.LogCaptureFixture
) -> None:
    first, second = SchedulerLock(client, ttl=3), SchedulerLock(client, ttl=3)
    assert first.keep()
    client.delete(LOCK_KEY)  # the holder froze past its TTL ...
    assert second.keep()  # ... and a standby took over
    assert not first.keep()
    assert not first.held
    assert f"lost the scheduler lock (now {second.holder}): stopped scheduling" in caplog.text
    assert scheduler_holder(client) == second.holder


def test_a_released_lock_is_taken_by_the_standby_at_once(client: redis.Redis[bytes]) -> None:
    first, second = SchedulerLock(client, ttl=30), SchedulerLock(client, ttl=30)
    assert first.keep()
    assert not second.keep()
    first.release()
    assert scheduler_holder(client) is None
    assert second.keep()


def test_a_beat_that_cannot_reach_redis_does_not_schedule() -> None:
    unreachable = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)
    assert not SchedulerLock(unreachable, ttl=3).keep()
