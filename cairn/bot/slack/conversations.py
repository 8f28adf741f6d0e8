"""Whether a Slack conversation is public, as far as memory cares: what is learned in a private
one (a DM, a group DM, a private channel) stays there (see :class:`cairn.memory.Scope`).

Only a public channel is public. A message event says which kind of conversation it comes from
(``channel_type``); ``app_mention`` and reaction events do not, so ``conversations.info`` is
asked, and its answer kept per workspace and channel for ten minutes (a channel can be made
private, so never for ever). A direct message channel (``D...``) is private without a call.
Whatever goes wrong (an error, a missing scope, a rate limit, an answer that does not say)
counts as private: fail closed, with one log line, and asked again after half a minute.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from slack_sdk.errors import SlackApiError, SlackClientError

from cairn.bot.slack.workspaces import Workspaces

__all__ = [
    "KEEP_SECONDS",
    "Conversations",
    "channel_type_of_command",
    "private_by_info",
    "private_by_type",
]

log = logging.getLogger(__name__)

# How long an answer is kept, and how long a failed lookup counts as private before asking again.
KEEP_SECONDS = 600.0
RETRY_SECONDS = 30.0
# The most conversations kept; the answers that expire first go first.
MAX_CONVERSATIONS = 5000

# The ``channel_type`` of message events: "channel" is a public channel, "group" a private
# one, "im" a direct message and "mpim" a group direct message ("app_home": the bot's DM tab).
_PUBLIC_TYPE = "channel"
_KNOWN_TYPES = frozenset({"channel", "group", "im", "mpim", "app_home"})
# The ``channel_name`` a slash command carries in a private conversation, and its channel type.
_COMMAND_NAMES = {"directmessage": "im", "privategroup": "group"}


def private_by_type(channel_type: object) -> bool | None:
    """Whether a message event's ``channel_type`` is a private conversation; None when it does
    not say (absent or unknown): then ask :meth:`Conversations.private`."""
    if not isinstance(channel_type, str) or channel_type not in _KNOWN_TYPES:
        return None
    return channel_type != _PUBLIC_TYPE


def private_by_info(channel: Mapping[str, Any]) -> bool:
    """Whether the ``channel`` object of a ``conversations.info`` answer is private.

    Public only when Slack says all of it: a channel (``is_channel``), not private, not a DM,
    group DM or legacy private group. A field that is missing counts against publicity.
    """
    public = (
        channel.get("is_channel") is True
        and channel.get("is_private") is False
        and not channel.get("is_im")
        and not channel.get("is_mpim")
        and not channel.get("is_group")
    )
    return not public


def channel_type_of_command(channel_name: object) -> str | None:
    """The ``channel_type`` a slash command's ``channel_name`` reveals: ``im`` for
    "directmessage", ``group`` for "privategroup", ``mpim`` for "mpdm-..."; None otherwise (a
    channel's own name says nothing of whether it is private)."""
    if not isinstance(channel_name, str):
        return None
    if channel_name.startswith("mpdm-"):
        return "mpim"
    return _COMMAND_NAMES.get(channel_name)


class Conversations:
    """A cache of "is it private?" answers in front of ``conversations.info``; thread-safe."""

    def __init__(
        self,
        workspaces: Workspaces,
        *,
        keep: float = KEEP_SECONDS,
        retry: float = RETRY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.workspaces = workspaces
        self.keep = keep
        self.retry = retry
        self.clock = clock
        self._known: dict[tuple[str, str], tuple[float, bool]] = {}
        self._lock = threading.Lock()

    def private(self, team: str, channel: str, channel_type: object = None) -> bool:
        """Whether ``channel`` of workspace ``team`` is a private conversation.

        ``channel_type`` is what the event said of it (a message's ``channel_type``), if it
        said anything; it is believed, and kept, over an earlier answer. Never raises: a
        lookup that fails counts as private.
        """
        if not channel or channel.startswith("D"):
            return True  # a direct message (or nothing to go by)
        said = private_by_type(channel_type)
        if said is not None:
            self._keep(team, channel, said, self.keep)
            return said
        now = self.clock()
        with self._lock:
            known = self._known.get((team, channel))
        if known is not None and known[0] > now:
            return known[1]
        private, keep = self._ask(team, channel)
        self._keep(team, channel, private, keep)
        return private

    def _keep(self, team: str, channel: str, private: bool, keep: float) -> None:
        until = self.clock() + keep
        with self._lock:
            if (team, channel) not in self._known and len(self._known) >= MAX_CONVERSATIONS:
                first = min(self._known, key=lambda k: self._known[k][0])
                self._known.pop(first, None)
            self._known[(team, channel)] = (until, private)

    def _ask(self, team: str, channel: str) -> tuple[bool, float]:
        """Slack's answer and how long to keep it; (True, retry) when there is none."""
        client = self.workspaces.client(team)
        if client is None:
            log.warning(
                "no token for workspace %s: conversation %s counts as private", team, channel
            )
            return True, self.retry
        try:
            response = client.conversations_info(channel=channel)
        except (SlackApiError, SlackClientError, OSError) as exc:
            why = exc.response.get("error") if isinstance(exc, SlackApiError) else exc
            log.warning(
                "conversations.info failed for %s in %s (%s): it counts as private",
                channel,
                team,
                why,
            )
            return True, self.retry
        info = response.get("channel")
        if not isinstance(info, dict):
            log.warning(
                "conversations.info said nothing of %s in %s: it counts as private", channel, team
            )
            return True, self.retry
        return private_by_info(info), self.keep
