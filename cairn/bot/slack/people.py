"""Who a Slack user is, as far as memory cares: a guest, a workspace admin, or neither.

``users.info`` answers it; the answers are cached per workspace and user for a while, so a busy
thread costs one Web API call per person, not one per message. When Slack cannot answer, the
person is taken for an ordinary member (neither trusted with admin rights nor marked a guest)
and asked about again soon.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError, SlackClientError

from cairn.bot.slack.workspaces import Workspaces

__all__ = ["People", "Person"]

log = logging.getLogger(__name__)

# How long an answer of users.info is kept, and how long a failure waits before asking again.
KEEP_SECONDS = 600.0
RETRY_SECONDS = 30.0
# The most people kept; the oldest answers go first.
MAX_PEOPLE = 5000


@dataclass(frozen=True, slots=True)
class Person:
    """What memory needs to know of a Slack user."""

    guest: bool = False  # a multi- or single-channel guest (is_restricted, is_ultra_restricted)
    admin: bool = False  # a workspace admin or owner (is_admin, is_owner, is_primary_owner)
    bot: bool = False
    # Of another organisation (a Slack Connect channel): their team is not this workspace,
    # nor of its Enterprise Grid.
    external: bool = False

    @property
    def outsider(self) -> bool:
        """A guest, a bot or someone of another organisation: not a full member, whose
        confirmation of a memory does not count."""
        return self.guest or self.bot or self.external

    @classmethod
    def from_user(cls, user: dict[str, Any], team: str = "") -> Person:
        """The person described by a ``users.info`` ``user`` object, asked in ``team``."""
        theirs = str(user.get("team_id") or "")
        grid = user.get("enterprise_user") or {}
        same_grid = (
            isinstance(grid, dict)
            and bool(grid.get("enterprise_id"))
            and team in (grid.get("teams") or [])
        )
        return cls(
            guest=bool(user.get("is_restricted") or user.get("is_ultra_restricted")),
            admin=bool(
                user.get("is_admin") or user.get("is_owner") or user.get("is_primary_owner")
            ),
            bot=bool(user.get("is_bot")),
            external=bool(
                user.get("is_stranger") or (team and theirs and theirs != team and not same_grid)
            ),
        )


class People:
    """A cache of :class:`Person` answers in front of ``users.info``; safe across threads."""

    def __init__(
        self,
        workspaces: Workspaces,
        *,
        keep: float = KEEP_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.workspaces = workspaces
        self.keep = keep
        self.clock = clock
        self._known: dict[tuple[str, str], tuple[float, Person]] = {}
        self._lock = threading.Lock()

    def person(self, team: str, user: str) -> Person:
        """What Slack says of ``user`` in workspace ``team`` (cached)."""
        key = (team, user)
        now = self.clock()
        with self._lock:
            known = self._known.get(key)
        if known is not None and known[0] > now:
            return known[1]
        found, keep = self._ask(team, user)
        with self._lock:
            if len(self._known) >= MAX_PEOPLE:
                oldest = min(self._known, key=lambda k: self._known[k][0])
                self._known.pop(oldest, None)
            self._known[key] = (now + keep, found)
        return found

    def _ask(self, team: str, user: str) -> tuple[Person, float]:
        client = self.workspaces.client(team)
        if client is None or not user:
            return Person(), RETRY_SECONDS
        try:
            response = client.users_info(user=user)
        except (SlackApiError, SlackClientError, OSError) as exc:
            log.warning("users.info failed for %s in %s: %s", user, team, exc)
            return Person(), RETRY_SECONDS
        profile = response.get("user")
        if not isinstance(profile, dict):
            return Person(), RETRY_SECONDS
        return Person.from_user(profile, team), self.keep
