"""Slack events in: normalised to ChatEvents, deduped, and handed to the pipeline in order.

Slack never sends an event again once it is acknowledged, so before Bolt acknowledges one, its
listener middleware claims the event id and writes the event to a local spool on disk
(:mod:`cairn.bot.spool`); if that fails, the event is not acknowledged and Slack retries it.
The acknowledgement never waits for the database or the Web API. One thread then takes the
events from the spool in arrival order and decides, for each message, whether it belongs to a
session (a mention, a direct message, or a later message in a thread the bot was mentioned in)
and whether the bot should answer it. While the database is down, that thread holds the event
and tries it again until it is logged; the events behind it wait their turn, so nothing
acknowledged is lost and the order is kept. Every event says whether its conversation is
private (:mod:`cairn.bot.slack.conversations`), so that what is learned there stays there.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

import redis
from slack_sdk.errors import SlackApiError, SlackClientError

from cairn.bot.dedupe import Dedupe
from cairn.bot.pipeline import Pipeline
from cairn.bot.slack.approval_clicks import ApprovalClicks, click_key
from cairn.bot.slack.backfill import TIERS, ThreadReader
from cairn.bot.slack.conversations import Conversations
from cairn.bot.slack.delivery import Delivery, part_key
from cairn.bot.slack.files import shared_files
from cairn.bot.slack.mrkdwn import from_slack
from cairn.bot.slack.people import People
from cairn.bot.slack.workspaces import PLATFORM, BotIdentity, Workspaces, tenant_of
from cairn.bot.spool import Spool, Spooled
from cairn.core.errors import InvalidInput, QueueError, first_line
from cairn.db import is_unavailable
from cairn.sessions.events import Attachment, ChatEvent, EventType
from cairn.sessions.ingest import Admission, Ingested

__all__ = ["CHANNEL_CHANGES", "PLATFORM", "BotIdentity", "Inbound", "tenant_of"]

log = logging.getLogger(__name__)

# Message subtypes that are someone saying something; edits, joins and the like are not.
_SPOKEN_SUBTYPES = {None, "thread_broadcast", "file_share", "me_message", "bot_message"}
# The message subtypes that say a channel was made private or public, and which it now is.
_CONVERTED = {"channel_convert_to_private": True, "channel_convert_to_public": False}
# The events that say a channel changed what it is (see Inbound.channel_changed).
CHANNEL_CHANGES = (
    "channel_shared",
    "channel_unshared",
    "channel_rename",
    "channel_id_changed",
    "channel_archive",
    "group_rename",
    "group_archive",
)
# An event waiting longer than this means the ingest thread is stuck: /healthz says so.
_STUCK_SECONDS = 60.0
# The longest wait between two tries of an event while the database is down.
_RETRY_CEILING = 5.0
_OTHER_MENTION = re.compile(r"<@[UW][A-Z0-9]+>")


class Inbound:
    """The queue between Bolt's listeners and the pipeline, and the thread that drains it."""

    def __init__(
        self,
        pipeline: Pipeline,
        workspaces: Workspaces,
        dedupe: Dedupe,
        delivery: Delivery,
        spool: Spool,
    ) -> None:
        self.pipeline = pipeline
        self.settings = delivery.settings  # the frontend's: its identity may be one agent's own
        self.workspaces = workspaces
        self.dedupe = dedupe
        self.delivery = delivery
        self.spool = spool
        self.people = People(workspaces, stewards=self.settings.stewards)
        self.conversations = Conversations(workspaces)
        self.clicks = ApprovalClicks(
            pipeline, workspaces, self.people, self.conversations, self.settings
        )
        self.threads = ThreadReader(TIERS[self.settings.slack.history_tier])
        self._oldest: float | None = None
        self._thread: threading.Thread | None = None
        # The dedupe keys the event in hand has claimed: trying it again must not find them
        # taken (by itself) and drop it. None: the event was replayed from an earlier process,
        # whose claims may stand for work it never finished; the event log's keys decide.
        self._claims: set[str] | None = set()

    # --- the listener side (Bolt's threads, before the ack) -----------------------------

    def submit(self, body: dict[str, Any]) -> bool:
        """Spool an Events API or block actions payload durably; False (and nothing spooled)
        if it was seen.

        Slack's retries of one delivery, over HTTP or Socket Mode, carry the same event id;
        a click delivered twice, the same user and ``action_ts``. Raises SpoolError when the
        payload can't be written: it must not be acknowledged then (its claim is released,
        so Slack's retry is taken).
        """
        if body.get("type") == "block_actions":
            key = click_key(body)
        else:
            event_id = str(body.get("event_id") or "")
            key = f"slack:event:{event_id}" if event_id else ""
        if key and not self._claim(key):
            log.debug("dropping a delivery seen before (%s)", key)
            return False
        try:
            self.spool.append({"body": body})
        except Exception:
            if key:
                self._release(key)
            raise
        return True

    def _claim(self, key: str) -> bool:
        """Whether ``key`` is claimed here first; with the store down, the database decides."""
        try:
            return self.dedupe.claim(key, self.settings.dedupe_ttl)
        except redis.RedisError as exc:
            log.warning("dedupe store unavailable, relying on the database: %s", exc)
            return True

    def _release(self, key: str) -> None:
        try:
            self.dedupe.release(key)
        except redis.RedisError as exc:
            log.warning("dedupe store unavailable, could not release %s: %s", key, exc)

    def _first(self, key: str) -> bool:
        """Whether the event in hand is the first to claim ``key`` (see ``_claims``)."""
        if self._claims is None or key in self._claims:
            return True
        if not self._claim(key):
            return False
        self._claims.add(key)
        return True

    # --- the ingest thread ---------------------------------------------------------------

    def start(self, stop: threading.Event) -> None:
        """Start the thread that hands spooled events to the pipeline until ``stop`` is set."""
        self._thread = threading.Thread(
            target=self._run, args=(stop,), name="slack-inbound", daemon=True
        )
        self._thread.start()

    def join(self, timeout: float) -> None:
        """Wait for the ingest thread to end."""
        if self._thread is not None:
            self._thread.join(timeout)

    def healthy(self) -> bool:
        """The ingest thread runs and no event has waited for it too long."""
        if self._thread is None or not self._thread.is_alive():
            return False
        oldest = self._oldest
        return oldest is None or time.monotonic() - oldest < _STUCK_SECONDS

    def idle(self) -> bool:
        """Nothing spooled and nothing being handled (for tests and orderly shutdown)."""
        return self.spool.pending() == 0 and self._oldest is None

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            record = self.spool.take(timeout=0.1)
            if record is None:
                continue
            self._oldest = time.monotonic()
            try:
                if self._take_in(record, stop):
                    self.spool.done(record)
            finally:
                self._oldest = None

    def _take_in(self, record: Spooled, stop: threading.Event) -> bool:
        """Hand one spooled event to the pipeline, trying again while the database is down.

        Returns False only when ``stop`` came first: the event stays in the spool, and the
        next process replays it.
        """
        body = record.payload.get("body")
        if not isinstance(body, dict):
            log.error("dropping a spooled record without an event body")
            return True
        self._claims = None if record.replayed else set()
        tries = 0
        while True:
            try:
                self.handle(body)
            except Exception as exc:
                if not is_unavailable(exc):
                    log.exception("could not take in Slack event %s", body.get("event_id"))
                    return True  # the event itself is at fault: trying again can't help
                tries += 1
                delay = min(0.25 * 2 ** min(tries - 1, 5), _RETRY_CEILING)
                if tries == 1 or tries % 10 == 0:
                    log.warning(
                        "database unavailable; holding Slack event %s (%d behind it) and "
                        "trying again in %.1fs: %s",
                        body.get("event_id"),
                        self.spool.pending(),
                        delay,
                        first_line(exc),
                    )
                if stop.wait(delay):
                    return False
                continue
            if tries:
                log.info("database back: Slack event %s taken in", body.get("event_id"))
            return True

    def handle(self, body: dict[str, Any]) -> None:
        """Take in one Events API or block actions payload (in the ingest thread)."""
        if body.get("type") == "block_actions":
            self.clicks.take(body)
            return
        event = body.get("event")
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            return  # not an event as Slack sends it: nothing to take in
        kind = event["type"]
        subtype = event.get("subtype")
        if kind == "message" and isinstance(subtype, str) and subtype in _CONVERTED:
            self.channel_changed(body)
        elif kind in {"app_mention", "message"}:
            self._message(body, event)
        elif kind in {"reaction_added", "reaction_removed"}:
            self._reaction(body, event, removed=kind == "reaction_removed")

    def channel_changed(self, body: dict[str, Any]) -> None:
        """A channel was made private or public, shared with another organisation or no
        longer, renamed, moved to a new id or archived: memory's view of it changes at once."""
        event = body.get("event")
        if not isinstance(event, dict):
            return
        team = _team(body, event)
        made = _CONVERTED.get(str(event.get("subtype") or ""))
        channels = [event.get("channel"), event.get("old_channel_id"), event.get("new_channel_id")]
        for channel in channels:
            if isinstance(channel, dict):  # channel_rename names it in an object
                channel = channel.get("id")
            if team and isinstance(channel, str) and channel:
                log.info(
                    "Slack channel %s changed (%s)", channel, event.get("subtype") or event["type"]
                )
                self.conversations.changed(team, channel, private=made)

    # --- messages ------------------------------------------------------------------------

    def _message(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        subtype = event.get("subtype")
        spoken = isinstance(subtype, str | None) and subtype in _SPOKEN_SUBTYPES
        if not spoken or event.get("hidden"):
            return
        team = _team(body, event)
        me = self.workspaces.identity(team) if team else None
        if me is None or not self._from_someone_else(event, me):
            return  # not installed there, or the bot itself (or another bot) speaking
        channel, ts = str(event.get("channel") or ""), str(event.get("ts") or "")
        if not (channel and ts):
            return
        tenant = tenant_of(team)
        thread = str(event.get("thread_ts") or ts)
        raw_text = str(event.get("text") or "")
        mentioned = event["type"] == "app_mention" or f"<@{me.user_id}>" in raw_text
        direct = event.get("channel_type") == "im" or channel.startswith("D")
        text = from_slack(raw_text, drop_user=me.user_id)
        listed = event.get("files") or None  # a file_share message: uploads and snippets
        if mentioned or direct:
            addressed = True
            text = text or ("" if listed else "help")  # a bare mention asks what it can do
        elif thread == ts or not self.settings.slack.follow_threads:
            return  # channel chatter outside the bot's threads is none of its business
        elif (owner := self._thread_agent(tenant, channel, thread)) is None:
            return
        else:
            # A follow-up without a mention is for the agent the thread began with; another
            # agent's own identity (or the shared one) only logs it as context.
            addressed = self._clearly_asked(text) and self.settings.speaks_for(owner)
        # app_mention and message deliver one message twice, under two event ids. The bot's
        # user id is in the key: agents with identities of their own each see the message.
        if not self._first(f"slack:message:{me.user_id}:{tenant}:{channel}:{ts}"):
            return
        # What is said in a DM, a group DM or a private channel is remembered there only.
        # Shared with another organisation (Slack Connect): private to itself, and the
        # workspace's memories are not recalled there.
        shared = body.get("is_ext_shared_channel")
        private = self.conversations.private(team, channel, event.get("channel_type"), shared)
        isolated = self.conversations.shared(team, channel, shared)
        if mentioned and thread != ts and not direct:
            self._backfill(me, channel, thread, before=ts, private=private)
        user = str(event.get("user") or event.get("bot_id") or "")
        # Another bot, or a guest, may be heard but not believed without a person's word.
        untrusted = _is_bot(event) or (
            bool(event.get("user")) and self.people.person(team, user).outsider
        )
        client = self.workspaces.client(team) if listed else None
        files: tuple[Attachment, ...] = ()
        if client is not None:
            files = shared_files(
                client,
                listed,
                max_bytes=self.settings.attachment_max_bytes,
                api_url=self.settings.slack.api_url,
            )
        chat = ChatEvent(
            platform=PLATFORM,
            tenant=tenant,
            channel=channel,
            thread=thread,
            user=user,
            text=text,
            attachments=files,
            event_id=str(body.get("event_id") or ""),
            message_id=ts,
            mentions=tuple(m.strip("<@>") for m in _OTHER_MENTION.findall(raw_text)),
            addressed=addressed,
            agent=self.settings.identity_agent if addressed else None,
            untrusted=untrusted,
            private=private,
            isolated=isolated,
            # Only what is addressed to the bot writes memories: chatter costs no lookup.
            conversation=self.conversations.name(team, channel) if addressed else "",
            raw=event,
        )
        result = self._accept(chat)
        if result is not None and result.admission is Admission.QUEUED and addressed:
            self.delivery.working(team, channel, thread, ts, event_row=result.event_row)

    def _from_someone_else(self, event: dict[str, Any], me: BotIdentity) -> bool:
        """False for the bot's own messages, and for other bots' unless they are allowed."""
        if event.get("user") == me.user_id or (me.bot_id and event.get("bot_id") == me.bot_id):
            return False
        return not _is_bot(event) or self.settings.slack.allow_bots

    def _clearly_asked(self, text: str) -> bool:
        """Whether a thread message without a mention asks the bot (CAIRN_SLACK_ANSWER_...)."""
        mode = self.settings.slack.answer_without_mention
        if mode != "questions":
            return mode == "always"
        if _OTHER_MENTION.search(text):
            return False  # speaking to someone else
        agent = self.settings.agent.casefold()
        named = text.casefold().startswith((agent + ",", agent + ":", agent + " "))
        return named or text.rstrip().endswith("?")

    def _thread_agent(self, tenant: str, channel: str, thread: str) -> str | None:
        """The agent of the thread's session, or None when the thread is not a session."""
        return self.pipeline.log.thread_agent(tenant, channel, thread)

    def _backfill(
        self, me: BotIdentity, channel: str, thread: str, *, before: str, private: bool
    ) -> None:
        """Log the thread's earlier messages (conversations.replies) as context, once;
        ``private``: whether the channel is a private conversation.

        Within Slack's limits (:mod:`cairn.bot.slack.backfill`): when the workspace's budget
        is spent the mention goes on with what could be read now, perhaps nothing.
        """
        tenant = tenant_of(me.team_id)
        if self.settings.slack.follow_threads and self._thread_agent(tenant, channel, thread):
            return  # the session has followed the thread since the bot was first mentioned
        client = self.workspaces.client(me.team_id)
        if client is None:
            return
        try:
            messages = self.threads.read(client, me.team_id, channel, thread, before=before)
        except (SlackApiError, SlackClientError, OSError) as exc:
            log.warning("could not read the thread %s in %s: %s", thread, channel, exc)
            return
        for message in messages:
            ts = str(message.get("ts") or "")
            if not ts or not self._from_someone_else(message, me):
                continue
            subtype = message.get("subtype")
            if not isinstance(subtype, str | None) or subtype not in _SPOKEN_SUBTYPES:
                continue  # (a subtype Slack would not send, a list say, is not someone speaking)
            text = from_slack(str(message.get("text") or ""), drop_user=me.user_id)
            if not text:
                continue
            self._accept(
                ChatEvent(
                    platform=PLATFORM,
                    tenant=tenant,
                    channel=channel,
                    thread=thread,
                    user=str(message.get("user") or message.get("bot_id") or "unknown"),
                    text=text[: self.settings.max_message_chars],
                    message_id=ts,
                    addressed=False,
                    private=private,
                )
            )

    # --- reactions -----------------------------------------------------------------------

    def _reaction(self, body: dict[str, Any], event: dict[str, Any], *, removed: bool) -> None:
        item = event.get("item")
        if not isinstance(item, dict):
            return  # Slack's reaction events always name the item they are on
        user = str(event.get("user") or "")
        team = _team(body, event)
        me = self.workspaces.identity(team) if team else None
        if me is None or item.get("type") != "message" or not user or user == me.user_id:
            return
        channel, ts = str(item.get("channel") or ""), str(item.get("ts") or "")
        if not (channel and ts):
            return
        tenant = tenant_of(team)
        target = f"{channel}:{ts}"
        try:
            target = self.dedupe.get(part_key(tenant, target)) or target
        except redis.RedisError as exc:
            log.warning("dedupe store unavailable, reading the reaction as is: %s", exc)
        result = self._accept(
            ChatEvent(
                platform=PLATFORM,
                tenant=tenant,
                channel=channel,
                thread=ts,
                user=user,
                type=EventType.REACTION_REMOVED if removed else EventType.REACTION_ADDED,
                event_id=str(body.get("event_id") or ""),
                reaction=str(event.get("reaction") or ""),
                target_id=target,
                # Only an added reaction needs these: a removal undoes what was recorded.
                admin=not removed and self.people.person(team, user).admin,
                steward=not removed and self.people.person(team, user).steward,
                untrusted=not removed and self.people.person(team, user).outsider,
                # The memories on the message are read where it was posted.
                private=self.conversations.private(team, channel),
                isolated=self.conversations.shared(team, channel),
                raw=event,
            )
        )
        if result is not None and not removed:
            # On a request for approval, the reaction was a decision: answered as a click is.
            self.clicks.answer(team, channel, user, ts, result)

    # --- into the pipeline ---------------------------------------------------------------

    def _accept(self, chat: ChatEvent) -> Ingested | None:
        """Hand ``chat`` to the pipeline; a refused message is answered in its thread.

        Raises what the pipeline raises when the database is unavailable: the ingest thread
        tries the whole event again.
        """
        try:
            return self.pipeline.accept(chat)
        except InvalidInput as exc:
            if chat.type is EventType.MESSAGE and chat.addressed:
                self.delivery.say(
                    chat.tenant, chat.channel, chat.thread, f"Sorry, I can't take that: {exc}"
                )
            return None
        except QueueError as exc:
            # The event is logged; Pipeline.recover re-queues it when the broker is back.
            log.error("queue unavailable, event kept for later: %s", exc)
            return None


def _is_bot(event: dict[str, Any]) -> bool:
    return bool(event.get("bot_id")) or event.get("subtype") == "bot_message"


def _team(body: dict[str, Any], event: dict[str, Any]) -> str:
    return str(body.get("team_id") or event.get("team") or "")
