"""Slack messages out: the outbox posted into the right threads, and "is thinking..." meanwhile.

One thread posts what workers wrote to the outbox, oldest first: replies, notices and errors go
to their thread as mrkdwn, split at Slack's message size; a request for approval is one message
with Approve and Deny buttons (:mod:`cairn.bot.slack.approval_blocks`); acknowledgements are
only marked sent.
Each posted message's ``channel:ts`` is recorded on its outbox row, which is what reactions
point at; later parts of a split reply are mapped to the first part in the dedupe store.

While a turn runs, the thread shows the assistant status (``assistant.threads.setStatus``); where
Slack refuses it (outside assistant threads) the message gets a reaction instead. Both are
cleared once everything the turn said is posted.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from cairn.bot.dedupe import Dedupe, claim_or_warn, release_quietly
from cairn.bot.slack.approval_blocks import request_blocks
from cairn.bot.slack.approval_clicks import close_request
from cairn.bot.slack.mrkdwn import split_message, to_mrkdwn
from cairn.bot.slack.streaming import message_of
from cairn.bot.slack.workspaces import Workspaces
from cairn.bot.spool import Spool, SpoolError
from cairn.bot.streaming import BUSY, Busy, StreamRelay, Throttled
from cairn.core.errors import first_line
from cairn.core.settings import Settings
from cairn.db import Database, is_unavailable
from cairn.db.models import OutboundMessage
from cairn.sessions.approvals import Approvals
from cairn.sessions.log import EventLog
from cairn.sessions.outbox import Outbox

__all__ = ["PART_TTL", "STATUS_TEXT", "Delivery", "part_key", "team_of"]

log = logging.getLogger(__name__)

STATUS_TEXT = "is thinking..."
# How long a later part of a split reply still maps to its first part for reactions.
PART_TTL = 90 * 86400.0
# Slack errors that no retry will fix: the row is given up at once.
_PERMANENT = {
    "channel_not_found",
    "not_in_channel",
    "is_archived",
    "msg_too_long",
    "no_text",
    "invalid_auth",
    "account_inactive",
    "token_revoked",
    "missing_scope",
}
_MAX_ATTEMPTS = 8
# The outbox kinds that answer a turn, and so end what was streamed of it.
_STREAMED = ("reply", "error")
# Outbox rows read per delivery round.
_BATCH = 100
# How long a frontend's claim on an outbox message lasts: long enough to post every part of it;
# if that frontend dies mid-post, another takes the message over after this.
_POST_CLAIM_TTL = 60.0


def team_of(tenant: str) -> str:
    """The Slack team id of a memory tenant (``slack:T123`` -> ``T123``)."""
    return tenant.removeprefix("slack:")


def part_key(tenant: str, message_ref: str) -> str:
    """The dedupe-store key mapping a later part of a split reply to the reply's first part."""
    return f"slack:part:{tenant}:{message_ref}"


@dataclass
class _Working:
    team: str
    channel: str
    thread: str
    ts: str
    event_row: int
    started: float = field(default_factory=time.monotonic)
    mode: str = ""  # "status" or "reaction", once shown


class Delivery:
    """Posts the Slack outbox and keeps the "working" indicators."""

    def __init__(
        self,
        db: Database,
        workspaces: Workspaces,
        dedupe: Dedupe,
        settings: Settings,
        journal: Spool | None = None,
    ) -> None:
        """``journal`` notes each part posted until the outbox records it (see
        :meth:`_journal_posted`); without one, a crash at that moment may post it twice."""
        self.db = db
        self.workspaces = workspaces
        self.dedupe = dedupe
        self.settings = settings
        self.outbox = Outbox(db, "slack", settings)
        self.log = EventLog(db)
        self.interval = 0.1
        self._lock = threading.Lock()
        self._working: dict[int, _Working] = {}
        self.no_status: set[str] = set()  # channels where setStatus is refused
        self._posted: dict[int, list[str]] = {}  # outbox id -> ts of the parts posted so far
        self._not_before: dict[int, float] = {}
        self._thread: threading.Thread | None = None
        self.last_round: float = time.monotonic()
        self._outage_said = 0.0  # when a database outage was last logged
        self._journal = journal
        # Answers as they are written: the relay that streams this frontend's replies, whose
        # final text edits the streamed messages (set by the frontend; None: no streaming).
        self.relay: StreamRelay | None = None
        if journal is not None:
            self._recall_posted()

    # --- the thread ------------------------------------------------------------------------

    def start(self, stop: threading.Event) -> None:
        """Post and settle until ``stop`` is set."""
        self._thread = threading.Thread(
            target=self._run, args=(stop,), name="slack-delivery", daemon=True
        )
        self._thread.start()

    def join(self, timeout: float) -> None:
        """Wait for the delivery thread to end."""
        if self._thread is not None:
            self._thread.join(timeout)

    def healthy(self) -> bool:
        """The delivery thread runs and has finished a round recently."""
        alive = self._thread is not None and self._thread.is_alive()
        return alive and time.monotonic() - self.last_round < 120

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            try:
                self.deliver()
                self.settle()
            except Exception as exc:
                if is_unavailable(exc):
                    if self._outage_said + 30 < time.monotonic():  # one line, not a flood
                        self._outage_said = time.monotonic()
                        log.warning("Slack delivery waits for the database: %s", first_line(exc))
                    continue  # not a finished round: /healthz says so if it lasts
                log.exception("Slack delivery round failed")
            self.last_round = time.monotonic()

    # --- posting the outbox ------------------------------------------------------------------

    def deliver(self) -> int:
        """Post every pending Slack outbox message that is due; returns how many were posted."""
        posted = 0
        now = time.monotonic()
        rows = self.outbox.pending(limit=_BATCH)
        if len(rows) < _BATCH:  # all of them: what is noted as posted and not pending is done
            for stale in self._posted.keys() - {row.id for row in rows}:
                self._forget(stale)
        for row in rows:
            assert row.id is not None
            if self._not_before.get(row.id, 0.0) > now:
                continue
            if row.kind == "ack":
                self.outbox.mark_sent(row.id, None)  # feedback acknowledgements stay quiet
                continue
            if not self._claim(row.id):
                break  # another frontend is posting it: keep the order, look again shortly
            if self._post(row):
                posted += 1
                continue
            self._unclaim(row.id)
            if row.id in self._not_before:
                break  # Slack is unreachable or limiting us: keep the order, try later
        return posted

    def _claim(self, outbound_id: int) -> bool:
        """Whether this frontend may post the message: frontends sharing Redis post it once."""
        return claim_or_warn(self.dedupe, f"slack:outbox:{outbound_id}", _POST_CLAIM_TTL)

    def _unclaim(self, outbound_id: int) -> None:
        release_quietly(self.dedupe, f"slack:outbox:{outbound_id}")

    def _post(self, row: OutboundMessage) -> bool:
        assert row.id is not None
        client = self.workspaces.client(team_of(row.tenant_id))
        if client is None:
            log.warning("outbox #%s is for %s, where Cairn is not installed", row.id, row.tenant_id)
            self.outbox.mark_failed(row.id, "not installed in this workspace", give_up=True)
            return False
        done = self._posted.setdefault(row.id, [])
        try:
            streamed = self._finish_stream(row)
            if streamed == BUSY:  # the frontend streaming it posts it in a moment
                self._not_before[row.id] = time.monotonic() + 0.5
                return False
            if streamed is not None:
                done[:] = [message_of(ref).split(":", 1)[1] for ref in streamed]
            else:
                self._post_parts(client, row, done)
        except Throttled as exc:
            log.info("Slack asks to slow down posting outbox #%s: %s", row.id, exc)
            self.outbox.mark_failed(row.id, "ratelimited", give_up=False)
            self._not_before[row.id] = time.monotonic() + exc.seconds
            return False
        except SlackApiError as exc:
            error = str(exc.response.get("error") or exc)
            give_up = error in _PERMANENT or row.attempts + 1 >= _MAX_ATTEMPTS
            log.warning("chat.postMessage failed for outbox #%s: %s", row.id, error)
            self.outbox.mark_failed(row.id, error, give_up=give_up)
            if give_up:
                self._forget(row.id)
            else:
                self._not_before[row.id] = time.monotonic() + min(60.0, 2.0**row.attempts)
            return False
        except (SlackClientError, OSError) as exc:
            log.warning("Slack unreachable posting outbox #%s: %s", row.id, exc)
            self.outbox.mark_failed(row.id, str(exc), give_up=False)
            self._not_before[row.id] = time.monotonic() + min(60.0, 2.0**row.attempts)
            return False
        first = f"{row.channel}:{done[0]}"
        self.outbox.mark_sent(row.id, first)
        for ts in done[1:]:
            self.dedupe.put(part_key(row.tenant_id, f"{row.channel}:{ts}"), first, PART_TTL)
        self._forget(row.id)
        if self.relay is not None and row.kind in _STREAMED:
            self.relay.done(row.tenant_id, row.cause_event_id)
        if row.kind == "notice":
            self._close_decided(client, row)
        return True

    def _close_decided(self, client: WebClient, notice: OutboundMessage) -> None:
        """When ``notice`` tells a decision on a request for approval, make sure the request
        shows it and has no buttons left: a click closes its request at once, but a request
        that expired unanswered (or whose closing failed) is closed here."""
        approvals = Approvals(self.db)
        try:
            decided = approvals.request_decided_in(notice)
            approval = (
                approvals.get(int(decided.request.data.get("approval", 0))) if decided else None
            )
        except Exception as exc:  # a courtesy: the notice is posted already
            log.warning(
                "could not look up the request notice #%s decides: %s", notice.id, first_line(exc)
            )
            return
        if decided is not None and approval is not None:
            close_request(client, decided.request, approval, self.settings)

    def _finish_stream(self, row: OutboundMessage) -> list[str] | Busy | None:
        """Edit the messages ``row``'s reply was streamed into to its final text; None when it
        was not streamed (post it), BUSY when another frontend streams it right now."""
        if self.relay is None or row.kind not in _STREAMED:
            return None
        return self.relay.final(
            row.tenant_id, row.cause_event_id, row.channel, row.thread_ref, row.text
        )

    def _post_parts(self, client: WebClient, row: OutboundMessage, done: list[str]) -> None:
        """Post the parts of ``row`` not yet posted (``done`` holds their ts), in order."""
        assert row.id is not None
        if row.kind == "approval":
            self._post_request(client, row, done)
            return
        parts = split_message(to_mrkdwn(row.text), self.settings.slack.message_chars)
        for part in parts[len(done) :]:
            response = client.chat_postMessage(
                channel=row.channel,
                thread_ts=row.thread_ref,
                text=part,
                unfurl_links=False,
                unfurl_media=False,
            )
            done.append(str(response["ts"]))
            self._journal_posted(row.id, done[-1])

    def _post_request(self, client: WebClient, row: OutboundMessage, done: list[str]) -> None:
        """Post a request for approval as one message with its buttons; its plain text is
        what notifications show."""
        assert row.id is not None
        if done:
            return
        response = client.chat_postMessage(
            channel=row.channel,
            thread_ts=row.thread_ref,
            text=to_mrkdwn(row.text),
            blocks=request_blocks(row.data, self.settings),
            unfurl_links=False,
            unfurl_media=False,
        )
        done.append(str(response["ts"]))
        self._journal_posted(row.id, done[-1])

    def _forget(self, outbound_id: int) -> None:
        self._posted.pop(outbound_id, None)
        self._not_before.pop(outbound_id, None)
        if not self._posted and self._journal is not None:
            self._journal.done()  # every part it names is recorded in the outbox now

    def _journal_posted(self, outbound_id: int, ts: str) -> None:
        """Note on disk that a part is on Slack before the outbox can say so.

        Slack has no idempotency key: if this process dies between posting and recording
        (the database may be down for long), the next one must not post the part again.
        """
        if self._journal is None:
            return
        try:
            self._journal.append({"id": outbound_id, "ts": ts}, take=False)
        except SpoolError as exc:
            log.warning("could not note outbox #%s as posted: %s", outbound_id, exc)

    def _recall_posted(self) -> None:
        """Take in what an earlier process noted as posted and never recorded."""
        assert self._journal is not None
        while (entry := self._journal.take(timeout=0)) is not None:
            self._posted.setdefault(int(entry.payload["id"]), []).append(str(entry.payload["ts"]))

    def say(self, tenant: str, channel: str, thread: str, text: str) -> None:
        """Post ``text`` into a thread at once, outside the outbox (refusals of bad input)."""
        client = self.workspaces.client(team_of(tenant))
        if client is None:
            return
        try:
            client.chat_postMessage(channel=channel, thread_ts=thread, text=to_mrkdwn(text))
        except (SlackApiError, SlackClientError, OSError) as exc:
            log.warning("could not post to %s: %s", channel, exc)

    # --- "is thinking..." --------------------------------------------------------------------

    def working(
        self, team: str, channel: str, thread: str, ts: str, *, event_row: int | None
    ) -> None:
        """Show that the bot works on message ``ts`` until the turn's replies are posted."""
        if event_row is None:
            return
        item = _Working(team, channel, thread, ts, event_row)
        item.mode = self._show(item)
        # Registered only once shown, so that settle() never clears before it is there.
        with self._lock:
            self._working[event_row] = item

    def _show(self, item: _Working) -> str:
        client = self.workspaces.client(item.team)
        if client is None:
            return ""
        if item.channel not in self.no_status:
            try:
                client.assistant_threads_setStatus(
                    channel_id=item.channel, thread_ts=item.thread, status=STATUS_TEXT
                )
                return "status"
            except SlackApiError as exc:
                # Not an assistant thread (or no assistant:write): say it with a reaction.
                log.debug("no assistant status in %s: %s", item.channel, exc.response.get("error"))
                self.no_status.add(item.channel)
            except (SlackClientError, OSError) as exc:
                log.warning("could not set the assistant status: %s", exc)
        try:
            client.reactions_add(
                channel=item.channel, timestamp=item.ts, name=self.settings.slack.working_emoji
            )
            return "reaction"
        except (SlackApiError, SlackClientError, OSError) as exc:
            log.warning("could not add the working reaction: %s", exc)
            return ""

    def settle(self) -> None:
        """Clear the indicator of every turn that is done and whose messages are all posted."""
        with self._lock:
            items = list(self._working.values())
        if not items:
            return
        pending = self.log.still_pending(i.event_row for i in items)
        timeout = self.settings.reply_timeout * 2
        for item in items:
            stale = time.monotonic() - item.started > timeout
            if item.event_row in pending and not stale:
                continue
            if self.outbox.pending(cause=item.event_row, limit=1) and not stale:
                continue
            with self._lock:
                self._working.pop(item.event_row, None)
            self._clear(item)

    def busy(self) -> int:
        """How many turns still show a working indicator."""
        with self._lock:
            return len(self._working)

    def _clear(self, item: _Working) -> None:
        client = self.workspaces.client(item.team)
        if client is None:
            return
        try:
            if item.mode == "status":
                client.assistant_threads_setStatus(
                    channel_id=item.channel, thread_ts=item.thread, status=""
                )
            elif item.mode == "reaction":
                client.reactions_remove(
                    channel=item.channel, timestamp=item.ts, name=self.settings.slack.working_emoji
                )
        except (SlackApiError, SlackClientError, OSError) as exc:
            log.debug("could not clear the working indicator: %s", exc)
