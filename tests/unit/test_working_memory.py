"""Working memory: a scratchpad per (tenant, agent, session) that expires after its TTL."""

from __future__ import annotations

import pytest

from cairn.core.errors import InvalidInput
from cairn.memory.working import InProcessWorkingMemory, Pad, RedisWorkingMemory, WorkingMemory

A = Pad("acme", "ops", "s1")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_pads_are_separate_per_tenant_agent_and_session() -> None:
    wm = InProcessWorkingMemory(ttl=60)
    wm.set(A, "plan", "roll back")
    assert wm.get(A, "plan") == "roll back"
    for other in (
        Pad("globex", "ops", "s1"),
        Pad("acme", "review", "s1"),
        Pad("acme", "ops", "s2"),
    ):
        assert wm.get(other, "plan") is None
        assert wm.items(other) == {}


def test_a_pad_expires_after_its_ttl_and_writes_renew_it() -> None:
    clock = Clock()
    wm = InProcessWorkingMemory(ttl=10, clock=clock)
    wm.set(A, "step", "1")
    clock.now = 8
    wm.set(A, "step", "2")  # renews
    clock.now = 15
    assert wm.items(A) == {"step": "2"}
    clock.now = 18.5
    assert wm.get(A, "step") is None


def test_bad_keys_and_pads_are_refused() -> None:
    wm = InProcessWorkingMemory(ttl=10)
    with pytest.raises(InvalidInput):
        wm.set(A, "", "x")
    with pytest.raises(InvalidInput):
        Pad("", "ops", "s1")


@pytest.mark.redis
def test_redis_working_memory_is_shared_and_expires(redis_url: str) -> None:
    import time

    import redis

    client = redis.Redis.from_url(redis_url)
    first: WorkingMemory = RedisWorkingMemory(client, ttl=0.3)
    second: WorkingMemory = RedisWorkingMemory(redis.Redis.from_url(redis_url), ttl=0.3)
    first.set(A, "owner", "ann")
    first.set(A, "ticket", "INC-7")
    assert second.items(A) == {"owner": "ann", "ticket": "INC-7"}
    second.delete(A, "ticket")
    assert first.get(A, "ticket") is None
    assert first.get(Pad("globex", "ops", "s1"), "owner") is None
    time.sleep(0.5)
    assert first.items(A) == {}
    client.close()
