"""Reading a thread's earlier messages (``conversations.replies``) within Slack's rate limits.

Since May 29, 2025, a commercially distributed Slack app that is not approved for the Slack
Marketplace gets ``conversations.history`` and ``conversations.replies`` at Tier 1: one request
a minute per workspace, at most 15 messages a request. Marketplace apps and a customer's own
internal apps keep Tier 3 (50+ requests a minute, pages of up to 1000 messages).
CAIRN_SLACK_HISTORY_TIER says which Cairn is: ``limited`` (the default) or ``marketplace``.

A mention never waits for this budget: the answer matters more than the context. When a
workspace's budget is spent, or Slack answered 429 and its ``Retry-After`` has not passed, the
thread is not read (or read only as far as the budget goes) and the mention is answered with the
context the session already has; the skip is logged at info. What was read is remembered per
thread, so a thread is never read twice: a later read asks only for messages newer than the
newest one seen. The budget and the memory are this process's own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from cairn.bot.slack.web import GatedWebClient

__all__ = ["TIERS", "HistoryTier", "ThreadReader"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HistoryTier:
    """How often a workspace's threads may be read, and how many messages a read returns."""

    per_minute: float
    burst: int
    page: int


TIERS: dict[str, HistoryTier] = {
    # Tier 1 with pages of 15, for apps outside the Marketplace since 2025.
    "limited": HistoryTier(per_minute=1, burst=1, page=15),
    # Tier 3 ("50+ per minute, sporadic bursts are welcome"); 200 is the page Slack recommends.
    "marketplace": HistoryTier(per_minute=50, burst=5, page=200),
}

# The most earlier messages read for one thread.
MAX_MESSAGES = 200
# How long what was read of a thread is remembered, and how many threads at most.
_REMEMBER_SECONDS = 86400.0
_REMEMBER_THREADS = 10_000
# The wait assumed when Slack answers 429 without a usable Retry-After.
_DEFAULT_RETRY_AFTER = 60.0


@dataclass(slots=True)
class _Budget:
    tokens: float
    at: float
    blocked_until: float = 0.0


class ThreadReader:
    """Reads threads for backfill under a per-workspace budget, remembering what it read."""

    def __init__(self, tier: HistoryTier, clock: Callable[[], float] = time.monotonic) -> None:
        self.tier = tier
        self._clock = clock
        self._lock = threading.Lock()
        self._budgets: dict[str, _Budget] = {}
        # (team, channel, thread) -> (newest ts read, when it was read)
        self._seen: OrderedDict[tuple[str, str, str], tuple[str, float]] = OrderedDict()

    def read(
        self, client: WebClient, team: str, channel: str, thread: str, *, before: str
    ) -> list[dict[str, Any]]:
        """The thread's messages older than ``before`` not read before, as far as the
        workspace's budget allows now (perhaps none); never waits for the budget.

        Raises SlackApiError (other than a rate limit), SlackClientError or OSError when the
        first request fails; a later page that fails ends the read with what came before.
        """
        key = (team, channel, thread)
        oldest = self._newest_seen(key)
        messages: list[dict[str, Any]] = []
        cursor: str | None = None
        while len(messages) < MAX_MESSAGES:
            if not self._take(team):
                log.info(
                    "Slack history budget of %s spent: thread %s in %s read %s",
                    team,
                    thread,
                    channel,
                    "in part" if messages else "not at all",
                )
                break
            try:
                response = _without_rate_limit_retries(client).conversations_replies(
                    channel=channel,
                    ts=thread,
                    limit=min(self.tier.page, MAX_MESSAGES - len(messages)),
                    cursor=cursor,
                    oldest=oldest,
                    latest=before,
                )
            except SlackApiError as exc:
                if exc.response.status_code != 429:
                    if messages:
                        break
                    raise
                self._block(team, exc)
                break
            except Exception:
                if messages:
                    break
                raise
            messages.extend(response.get("messages") or [])
            cursor = (response.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                break
        fresh = [m for m in messages if _newer(m, oldest) and not _newer(m, before, inclusive=True)]
        self._remember(key, fresh)
        return fresh[:MAX_MESSAGES]

    def _take(self, team: str) -> bool:
        """Spend one request of ``team``'s budget, if there is one to spend now."""
        now = self._clock()
        with self._lock:
            budget = self._budgets.setdefault(team, _Budget(tokens=self.tier.burst, at=now))
            if now < budget.blocked_until:
                return False
            rate = self.tier.per_minute / 60.0
            budget.tokens = min(self.tier.burst, budget.tokens + (now - budget.at) * rate)
            budget.at = now
            if budget.tokens < 1:
                return False
            budget.tokens -= 1
            return True

    def _block(self, team: str, exc: SlackApiError) -> None:
        """Stop reading ``team``'s threads until Slack's Retry-After has passed."""
        try:
            wait = float(exc.response.headers.get("Retry-After") or _DEFAULT_RETRY_AFTER)
        except (TypeError, ValueError):
            wait = _DEFAULT_RETRY_AFTER
        now = self._clock()
        with self._lock:
            budget = self._budgets.setdefault(team, _Budget(tokens=0, at=now))
            already = now < budget.blocked_until
            budget.blocked_until = max(budget.blocked_until, now + wait)
            budget.tokens = 0
        if not already:
            log.warning(
                "Slack rate-limited conversations.replies in %s: threads there are not read "
                "for %.0fs (answers go on without their earlier messages)",
                team,
                wait,
            )

    def _newest_seen(self, key: tuple[str, str, str]) -> str | None:
        now = self._clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is None or now - seen[1] > _REMEMBER_SECONDS:
                self._seen.pop(key, None)
                return None
            return seen[0]

    def _remember(self, key: tuple[str, str, str], messages: list[dict[str, Any]]) -> None:
        """Remember the newest message read of the thread (only threads read at all)."""
        stamps = [str(m["ts"]) for m in messages if m.get("ts")]
        if not stamps:
            return
        newest = max(stamps, key=float)
        with self._lock:
            previous = self._seen.pop(key, None)
            if previous is not None and float(previous[0]) > float(newest):
                newest = previous[0]
            self._seen[key] = (newest, self._clock())
            while len(self._seen) > _REMEMBER_THREADS:
                self._seen.popitem(last=False)


def _newer(message: dict[str, Any], than: str | None, *, inclusive: bool = False) -> bool:
    """Whether ``message`` is newer than the ts ``than`` (None: anything is)."""
    ts = str(message.get("ts") or "")
    if not ts:
        return False
    if than is None:
        return True
    return float(ts) >= float(than) if inclusive else float(ts) > float(than)


def _without_rate_limit_retries(client: WebClient) -> WebClient:
    """``client`` minus its 429 retry handler: a rate-limited read must not sleep in the
    ingest thread for Slack's Retry-After (other retries stay)."""
    return GatedWebClient(
        token=client.token,
        base_url=client.base_url,
        timeout=client.timeout,
        ssl=client.ssl,
        proxy=client.proxy,
        headers=client.headers,
        retry_handlers=[
            h for h in client.retry_handlers if not isinstance(h, RateLimitErrorRetryHandler)
        ],
    )
