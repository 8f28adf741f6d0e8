"""The Redis dedupe store: claims shared by every frontend process of a deployment."""

from __future__ import annotations

import time

import redis

from cairn.bot.dedupe import RedisDedupe, open_dedupe
from cairn.core.settings import load_settings


def test_claims_are_shared_between_clients(redis_url: str) -> None:
    one = open_dedupe(load_settings(CAIRN_REDIS_URL=redis_url))
    two = open_dedupe(load_settings(CAIRN_REDIS_URL=redis_url))
    assert isinstance(one, RedisDedupe)
    assert one.claim("slack:event:Ev1", 60)
    assert not two.claim("slack:event:Ev1", 60)
    two.release("slack:event:Ev1")
    assert one.claim("slack:event:Ev1", 60)


def test_claims_expire(redis_url: str) -> None:
    store = open_dedupe(load_settings(CAIRN_REDIS_URL=redis_url))
    assert store.claim("k", 0.05)
    time.sleep(0.15)
    assert store.claim("k", 60)


def test_values_and_health(redis_url: str) -> None:
    store = open_dedupe(load_settings(CAIRN_REDIS_URL=redis_url))
    store.put("part", "C1:1.0", 60)
    assert open_dedupe(load_settings(CAIRN_REDIS_URL=redis_url)).get("part") == "C1:1.0"
    assert store.healthy()
    gone = RedisDedupe(redis.Redis(port=1, socket_connect_timeout=0.5))
    assert not gone.healthy()
