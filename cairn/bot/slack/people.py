"""Who a Slack user is, as far as memory cares: a guest, a workspace admin, a steward (a member
of a user group CAIRN_STEWARDS names), or neither.

``users.info`` answers it; the answers are cached per workspace and user for a while, so a busy
thread costs one Web API call per person, not one per message. When Slack cannot answer, the
person is taken for an ordinary member (neither trusted with admin rights nor marked a guest)
and asked about again soon.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from cairn.bot.slack.workspaces import Workspaces

__all__ = ["People", "Person", "is_user_group"]

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
    # A member of a user group CAIRN_STEWARDS names ("S0614TZR7"): their confirmation alone
    # makes a doubtful memory count, as an admin's does.
    steward: bool = False

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
        stewards: Iterable[str] = (),
        keep: float = KEEP_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.workspaces = workspaces
        self.keep = keep
        self.clock = clock
        # The user groups among CAIRN_STEWARDS (the rest are user ids, checked by the worker).
        self.steward_groups = tuple(sorted({s for s in stewards if is_user_group(s)}))
        self._known: dict[tuple[str, str], tuple[float, Person]] = {}
        self._groups: dict[tuple[str, str], tuple[float, frozenset[str]]] = {}
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
        found = Person.from_user(profile, team)
        if not self.steward_groups or found.outsider:
            return found, self.keep  # a guest, bot or outsider is no steward, whatever group
        groups = [self._members(client, team, group) for group in self.steward_groups]
        steward = any(user in members for _, members in groups)
        # Kept no longer than the group lists it was read from (a refused one: soon asked again).
        keep = min([self.keep, *(until - self.clock() for until, _ in groups)])
        return replace(found, steward=steward), max(keep, 0.0)

    def _members(self, client: WebClient, team: str, group: str) -> tuple[float, frozenset[str]]:
        """Until when the answer holds, and the members of user group ``group`` of ``team``, as
        ``usergroups.users.list`` says (scope ``usergroups:read``; cached like people). A group
        Slack will not list has no members (logged), and is asked about again soon."""
        key = (team, group)
        now = self.clock()
        with self._lock:
            known = self._groups.get(key)
        if known is not None and known[0] > now:
            return known
        keep, members = self.keep, frozenset[str]()
        try:
            listed = client.usergroups_users_list(usergroup=group).get("users") or ()
            members = frozenset(str(u) for u in listed)
        except (SlackApiError, SlackClientError, OSError) as exc:
            log.warning(
                "cannot list the steward user group %s in %s (the app needs the "
                "usergroups:read scope): %s; its members count as ordinary members until then",
                group,
                team,
                exc,
            )
            keep = RETRY_SECONDS
        with self._lock:
            self._groups[key] = (now + keep, members)
        return now + keep, members


def is_user_group(name: str) -> bool:
    """Whether a CAIRN_STEWARDS entry is a Slack user group id ("S0614TZR7"), not a user."""
    return _USER_GROUP.fullmatch(name) is not None


_USER_GROUP = re.compile(r"S[A-Z0-9]{6,}")
