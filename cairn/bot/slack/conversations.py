"""Whether a Slack conversation is public, as far as memory cares: what is learned in a private
one (a DM, a group DM, a private channel) stays there (see :class:`cairn.memory.Scope`).

Only a public channel is public. A message event says which kind of conversation it comes from
(``channel_type``); ``app_mention`` and reaction events do not, so ``conversations.info`` is
asked, and its answer kept per workspace and channel for ten minutes (a channel can be made
private, so never for ever). A direct message channel (``D...``) is private without a call.
Whatever goes wrong (an error, a missing scope, a rate limit, an answer that does not say)
counts as private: fail closed, with one log line, and asked again after half a minute.

The same answer names the channel ("#ops"), which a memory learned there shows where it is
recalled; a name is kept for a day, and dropped when Slack says the channel changed.
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
    "channel_name",
    "channel_type_of_command",
    "private_by_info",
    "private_by_type",
    "shared_outside",
]

log = logging.getLogger(__name__)

# How long an answer is kept, and how long a failed lookup counts as private before asking again.
KEEP_SECONDS = 600.0
RETRY_SECONDS = 30.0
# How long a channel's name is kept: names change rarely, and a rename drops the one kept.
NAME_SECONDS = 86400.0
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
        and not shared_outside(channel)
    )
    return not public


def shared_outside(channel: Mapping[str, Any]) -> bool:
    """Whether the ``channel`` object of a ``conversations.info`` answer is shared with another
    organisation (Slack Connect), or about to be: private to itself."""
    return bool(channel.get("is_ext_shared") or channel.get("is_pending_ext_shared"))


def channel_name(channel: Mapping[str, Any]) -> str:
    """How people name the conversation of a ``conversations.info`` answer: "#ops" for a
    channel, public or private; "" for a DM or a group DM, which have no name of their own."""
    name = channel.get("name")
    if not isinstance(name, str) or not name or channel.get("is_im") or channel.get("is_mpim"):
        return ""
    return f"#{name}"


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
    """A cache of "is it private?" answers in front of ``conversations.info``; thread-safe.

    Each answer says two things: whether the conversation is private, and whether it is shared
    with another organisation (Slack Connect: private to itself, see :func:`shared_outside`).
    Slack's events about a channel changing (made private or public, shared, unshared, its id
    changed) replace the answer at once (:meth:`changed`), not when it expires.
    """

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
        self._known: dict[tuple[str, str], tuple[float, bool, bool]] = {}
        self._names: dict[tuple[str, str], tuple[float, str]] = {}
        self._lock = threading.Lock()

    def private(
        self, team: str, channel: str, channel_type: object = None, shared: object = None
    ) -> bool:
        """Whether ``channel`` of workspace ``team`` is a private conversation.

        ``channel_type`` is what the event said of it (a message's ``channel_type``), and
        ``shared`` what its envelope said (``is_ext_shared_channel``), if they said anything;
        they are believed, and kept, over an earlier answer. Never raises: a lookup that fails
        counts as private.
        """
        return self._kind(team, channel, channel_type, shared)[0]

    def shared(self, team: str, channel: str, shared: object = None) -> bool:
        """Whether ``channel`` is shared with another organisation (``shared``: what the event
        said, if anything). Never raises: a lookup that fails counts as not shared, and the
        conversation as private."""
        return self._kind(team, channel, None, shared)[1]

    def name(self, team: str, channel: str) -> str:
        """What people call ``channel`` of workspace ``team`` ("#ops"): read from the answer
        :meth:`private` got, else asked of ``conversations.info``; "" for a DM, a group DM, or
        when Slack does not say (asked again after half a minute). Never raises."""
        if not channel or channel.startswith("D"):
            return ""
        with self._lock:
            known = self._names.get((team, channel))
        if known is None or known[0] <= self.clock():
            self._ask(team, channel, why="its name")  # keeps the name it reads
            with self._lock:
                known = self._names.get((team, channel))
        return known[1] if known is not None else ""

    def changed(self, team: str, channel: str, *, private: bool | None = None) -> None:
        """Slack said ``channel`` changed: made private or public (``private``), or shared,
        unshared, renamed or moved (None: asked again on the next message)."""
        if private is None:
            with self._lock:
                self._known.pop((team, channel), None)
                self._names.pop((team, channel), None)
            return
        with self._lock:
            known = self._known.get((team, channel))
        self._keep(team, channel, private, bool(known and known[2]), self.keep)

    def _kind(
        self, team: str, channel: str, channel_type: object, shared: object
    ) -> tuple[bool, bool]:
        """(private, shared) of ``channel``: what the event said, else what is known, else
        Slack's answer. Shared outside by any account (the envelope's or the last answer's)
        counts as shared, and a conversation shared outside is private whatever else says; an
        unshared channel's event (:meth:`changed`) is what makes it the team's again."""
        if not channel or channel.startswith("D"):
            return True, False  # a direct message (or nothing to go by)
        said = private_by_type(channel_type)
        envelope = shared is True
        with self._lock:
            known = self._known.get((team, channel))
        fresh = known is not None and known[0] > self.clock()
        keep = self.keep
        if fresh and known is not None:
            if said is None and (known[2] or not envelope):
                return known[1], known[2]  # nothing new: keep the answer's own expiry
            private, outside = (known[1] if said is None else said), known[2] or envelope
        elif said is not None:
            private, outside = said, envelope  # the event says it: no need to ask
        else:
            private, outside, keep = self._ask(team, channel)
            if said is not None and keep == self.keep:
                private = said  # the event's word is the newer
            outside = outside or envelope
        private = private or outside
        self._keep(team, channel, private, outside, keep)
        return private, outside

    def _keep(self, team: str, channel: str, private: bool, shared: bool, keep: float) -> None:
        until = self.clock() + keep
        with self._lock:
            _make_room(self._known, (team, channel))
            self._known[(team, channel)] = (until, private, shared)

    def _ask(self, team: str, channel: str, *, why: str = "") -> tuple[bool, bool, float]:
        """Slack's answer (private, shared) and how long to keep it; (True, False, retry) when
        there is none. The channel's name in it is kept (for a day; "" for half a minute when
        there is no answer). ``why`` says in a log line what else it was asked for."""
        info = self._info(team, channel, why)
        name, keep = (channel_name(info), NAME_SECONDS) if info else ("", self.retry)
        with self._lock:
            _make_room(self._names, (team, channel))
            self._names[(team, channel)] = (self.clock() + keep, name)
        if info is None:
            return True, False, self.retry
        return private_by_info(info), shared_outside(info), self.keep

    def _info(self, team: str, channel: str, why: str) -> dict[str, Any] | None:
        """The ``channel`` object ``conversations.info`` answers; None, with one log line,
        when there is none (then the conversation counts as private)."""
        client = self.workspaces.client(team)
        if client is None:
            log.warning(
                "no token for workspace %s: conversation %s counts as private", team, channel
            )
            return None
        try:
            response = client.conversations_info(channel=channel)
        except (SlackApiError, SlackClientError, OSError) as exc:
            error = exc.response.get("error") if isinstance(exc, SlackApiError) else exc
            log.warning(
                "conversations.info failed for %s in %s (%s%s): it counts as private",
                channel,
                team,
                error,
                f", asked for {why}" if why else "",
            )
            return None
        info = response.get("channel")
        if not isinstance(info, dict):
            log.warning(
                "conversations.info said nothing of %s in %s: it counts as private", channel, team
            )
            return None
        return info


def _make_room(known: dict[tuple[str, str], Any], key: tuple[str, str]) -> None:
    """Room in ``known`` (answers by workspace and channel, each a tuple that starts with its
    expiry) for ``key``: at MAX_CONVERSATIONS answers, the one that expires first goes."""
    if key not in known and len(known) >= MAX_CONVERSATIONS:
        first = min(known, key=lambda k: known[k][0])
        known.pop(first, None)
