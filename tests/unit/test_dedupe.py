"""The in-process dedupe store: the first claim wins until it expires."""

from __future__ import annotations

import threading
import time

from cairn.bot.dedupe import LocalDedupe, open_dedupe
from cairn.core.settings import load_settings


def test_the_first_claim_wins_and_later_ones_are_duplicates() -> None:
    store = LocalDedupe()
    assert store.claim("slack:event:Ev1", 60)
    assert not store.claim("slack:event:Ev1", 60)
    assert store.claim("slack:event:Ev2", 60)


def test_a_claim_expires_and_can_be_released() -> None:
    store = LocalDedupe()
    assert store.claim("k", 0.05)
    time.sleep(0.1)
    assert store.claim("k", 60)
    store.release("k")
    assert store.claim("k", 60)


def test_only_one_of_many_concurrent_claims_wins() -> None:
    store = LocalDedupe()
    wins: list[bool] = []
    barrier = threading.Barrier(8)

    def claim() -> None:
        barrier.wait()
        wins.append(store.claim("same", 60))

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(wins) == [False] * 7 + [True]


def test_values_are_kept_until_they_expire() -> None:
    store = LocalDedupe()
    store.put("part", "C1:1.0", 0.05)
    assert store.get("part") == "C1:1.0"
    time.sleep(0.1)
    assert store.get("part") is None


def test_the_store_stays_bounded() -> None:
    store = LocalDedupe(max_keys=100)
    for n in range(250):
        store.claim(f"k{n}", 60)
    assert len(store._expiry) <= 100
    assert not store.claim("k249", 60)  # the newest claims are the ones kept


def test_without_redis_the_store_is_in_process() -> None:
    assert isinstance(open_dedupe(load_settings()), LocalDedupe)
