"""The scheduler lock on a real Redis: one beat holds it, the others wait, a lost lock is let go."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import pytest
import redis

from cairn.core.settings import load_settings
from cairn.workers.beat import LOCK_KEY, OneScheduler, SchedulerLock, scheduler_holder
from cairn.workers.celery_app import configure_celery


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


def test_a_clock_that_steps_back_does_not_hold_the_jobs_back(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CAIRN_BROKER_URL", redis_url)
    monkeypatch.setenv("CAIRN_BEAT_INTERVAL", "1")
    app = configure_celery(load_settings())
    scheduler = OneScheduler(app)
    client = redis.Redis.from_url(redis_url)
    try:
        # The wall clock stepped back ten minutes (a machine's clock set after it booted):
        # by the clock, every job last ran in the future. Celery would send nothing until the
        # clock caught up.
        ahead = app.now() + timedelta(minutes=10)
        for entry in scheduler.schedule.values():
            entry.last_run_at = ahead
        deadline = time.monotonic() + 15
        while client.llen("cairn") == 0 and time.monotonic() < deadline:
            time.sleep(max(0.0, min(scheduler.tick(), 0.5)))
        assert client.llen("cairn") > 0, "no job was sent"
        assert "the clock is 600 s behind when" in caplog.text
    finally:
        scheduler.close()
        client.close()
