"""Decisions on requests for approval, from Slack: a click on Approve or Deny taken in, and the
answer each decision gets (docs/adr/0031).

A click is spooled before Bolt acknowledges it, like a message event, and taken in by the
ingest thread (:mod:`cairn.bot.slack.inbound`), which holds it while the database is down: a
click Slack saw acknowledged is counted, once, as soon as it can be. The person is told
privately (``chat.postEphemeral``) what the pipeline refuses (not theirs to decide, decided or
expired already), and when their click has to wait for the database. Once a request is closed
its message loses its buttons for a line saying who decided; the worker posts what came of it.
The approve and deny reactions on a request get the same answers (:meth:`ApprovalClicks.answer`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from cairn.bot.pipeline import Pipeline
from cairn.bot.slack.approval_blocks import DECISION_OF_ACTION, decided_blocks
from cairn.bot.slack.conversations import Conversations
from cairn.bot.slack.mrkdwn import to_mrkdwn
from cairn.bot.slack.people import People
from cairn.bot.slack.workspaces import PLATFORM, Workspaces, tenant_of
from cairn.core.bounded import bounded_int
from cairn.core.errors import InvalidInput, QueueError, first_line
from cairn.core.settings import Settings
from cairn.db import is_unavailable
from cairn.db.models import ApprovalStatus, OutboundMessage, ToolApproval
from cairn.sessions.approvals import Approvals
from cairn.sessions.events import ChatEvent, EventType
from cairn.sessions.ingest import Admission, Ingested
from cairn.sessions.outbox import message_at

__all__ = ["ApprovalClicks", "BadClick", "Click", "click_key", "close_request", "read_click"]

log = logging.getLogger(__name__)


class BadClick(ValueError):
    """A block action Cairn can't take as a decision; the message says why, for the person."""


@dataclass(frozen=True, slots=True)
class Click:
    """One click on a request's button, as the interactivity payload tells it."""

    team: str
    channel: str
    user: str
    thread: str  # the thread the request is in (the request's own ts outside threads)
    message_ts: str  # the request message
    action_id: str
    value: str
    action_ts: str

    @property
    def event_id(self) -> str:
        """This click's own id: Slack gives each click its ``action_ts``, per person."""
        return f"click:{self.user}:{self.action_ts}"


def click_key(body: dict[str, Any]) -> str:
    """The dedupe key of a block action payload: the same click delivered twice has one."""
    user = _field(body.get("user"), "id")
    actions = body.get("actions") or [{}]
    action_ts = _field(actions[0], "action_ts")
    return f"slack:click:{_team(body)}:{user}:{action_ts}"


def read_click(body: dict[str, Any]) -> Click:
    """The click in a ``block_actions`` payload; raises BadClick when it does not say who
    clicked which request where."""
    actions = body.get("actions") or []
    action = actions[0] if actions and isinstance(actions[0], dict) else {}
    message, container = _object(body, "message"), _object(body, "container")
    message_ts = str(message.get("ts") or container.get("message_ts") or "")
    click = Click(
        team=_team(body),
        channel=_field(body.get("channel"), "id") or str(container.get("channel_id") or ""),
        user=_field(body.get("user"), "id"),
        thread=str(message.get("thread_ts") or container.get("thread_ts") or message_ts),
        message_ts=message_ts,
        action_id=str(action.get("action_id") or ""),
        value=str(action.get("value") or ""),
        action_ts=str(action.get("action_ts") or ""),
    )
    if not (click.team and click.channel and click.user and click.message_ts):
        raise BadClick("this click does not say who clicked which message where")
    if click.action_id not in DECISION_OF_ACTION:
        raise BadClick(f"Cairn has no button {click.action_id[:60]!r}; nothing was decided.")
    try:
        bounded_int(click.value, "a request number")
    except InvalidInput as exc:
        raise BadClick(
            f"this button does not name a request for approval ({exc}); nothing was decided."
        ) from None
    if not click.action_ts:
        raise BadClick("this click has no time of its own; nothing was decided.")
    return click


class ApprovalClicks:
    """Takes clicks in as DECISION events and tells each person what became of theirs."""

    def __init__(
        self,
        pipeline: Pipeline,
        workspaces: Workspaces,
        people: People,
        conversations: Conversations,
        settings: Settings,
    ) -> None:
        self.pipeline = pipeline
        self.workspaces = workspaces
        self.people = people
        self.conversations = conversations
        self.settings = settings
        # Clicks whose person was told they wait for the database (told once per click).
        self._waiting: set[str] = set()

    def take(self, body: dict[str, Any]) -> None:
        """Take in one ``block_actions`` payload (in the ingest thread).

        Raises what the pipeline raises while the database is unavailable, after telling the
        person their click waits: the ingest thread tries the click again.
        """
        try:
            click = read_click(body)
        except BadClick as exc:
            log.warning("ignored a Slack block action: %s", exc)
            user = _field(body.get("user"), "id")
            channel = _field(body.get("channel"), "id")
            message = _object(body, "message")
            thread = str(message.get("thread_ts") or message.get("ts") or "")
            self.tell(_team(body), channel, user, thread, f"Sorry, {exc}")
            return
        event = ChatEvent(
            platform=PLATFORM,
            tenant=tenant_of(click.team),
            channel=click.channel,
            thread=click.thread,
            user=click.user,
            type=EventType.DECISION,
            decision=DECISION_OF_ACTION[click.action_id],
            target_id=click.value,
            event_id=click.event_id,
            # The request's own message is where it is decided (docs/adr/0037).
            message_id=click.message_ts,
            admin=self.people.person(click.team, click.user).admin,
            private=self.conversations.private(click.team, click.channel),
            raw=body,
        )
        try:
            result = self.pipeline.accept(event)
        except InvalidInput as exc:
            self.tell(click.team, click.channel, click.user, click.thread, f"Sorry, {exc}")
            return
        except QueueError as exc:
            log.error("queue unavailable, decision kept for later: %s", exc)
            self.tell(
                click.team,
                click.channel,
                click.user,
                click.thread,
                f"Your decision on request #{click.value} is recorded; Cairn's queue is "
                "unavailable, so it takes effect when the queue is back.",
            )
            return
        except Exception as exc:
            if is_unavailable(exc) and click.event_id not in self._waiting:
                self._waiting.add(click.event_id)
                self.tell(
                    click.team,
                    click.channel,
                    click.user,
                    click.thread,
                    f"Cairn's database is unavailable right now: your click on request "
                    f"#{click.value} is kept and counts as soon as it is back. No need to "
                    "click again.",
                )
            raise
        self._waiting.discard(click.event_id)
        self.answer(
            click.team, click.channel, click.user, click.message_ts, result, thread=click.thread
        )

    def answer(
        self,
        team: str,
        channel: str,
        user: str,
        request_ts: str,
        result: Ingested,
        *,
        thread: str | None = None,
    ) -> None:
        """When the message ``request_ts`` is a request for approval and ``result`` is what
        became of a decision on it: tell ``user`` privately why it was refused, if it was (in
        ``thread``, else the request's), and show on the message that the request is closed,
        once it is. Any other message or result: nothing.

        Never raises for the database: the decision is recorded already, and a blip here only
        leaves the buttons in place until the next decision.
        """
        if result.admission not in {Admission.QUEUED, Admission.REFUSED}:
            return
        try:
            request = message_at(self.pipeline.rt.db, tenant_of(team), f"{channel}:{request_ts}")
            if result.admission is Admission.REFUSED and result.answer:
                # Told even when the message clicked is not a request (docs/adr/0037).
                where = thread or (request.thread_ref if request is not None else request_ts)
                self.tell(team, channel, user, where, result.answer)
            if request is None or request.kind != "approval":
                return
            self._close(team, request)
        except Exception as exc:
            if not is_unavailable(exc):
                raise
            log.warning("could not answer a decision on %s: %s", request_ts, first_line(exc))

    def tell(self, team: str, channel: str, user: str, thread: str, text: str) -> None:
        """Show ``text`` to ``user`` alone, in ``thread`` of ``channel`` (where both are known)."""
        client = self.workspaces.client(team) if team else None
        if client is None or not (channel and user):
            return
        try:
            client.chat_postEphemeral(
                channel=channel, user=user, text=to_mrkdwn(text), thread_ts=thread or None
            )
        except (SlackApiError, SlackClientError, OSError) as exc:
            log.warning("could not tell %s privately in %s: %s", user, channel, exc)

    def _close(self, team: str, request: OutboundMessage) -> None:
        """Replace the buttons of ``request`` (its outbox row) by who decided it, once it is
        decided."""
        approval = Approvals(self.pipeline.rt.db).get(int(request.data.get("approval", 0)))
        client = self.workspaces.client(team)
        if approval is not None and client is not None:
            close_request(client, request, approval, self.settings)


def close_request(
    client: WebClient, request: OutboundMessage, approval: ToolApproval, settings: Settings
) -> None:
    """Replace the buttons of ``request`` (its outbox row) by what became of ``approval``
    (who approved or denied it, or its expiry); nothing while it is pending. A courtesy (the
    worker's notice says it too), so a failure is only logged."""
    if approval.status == ApprovalStatus.PENDING:
        return
    if approval.status == ApprovalStatus.EXPIRED:
        outcome = ":hourglass: Expired unanswered; it did not run."
    elif approval.status == ApprovalStatus.DENIED:
        outcome = f":x: Denied by <@{approval.decided_by}>"
    else:
        outcome = f":white_check_mark: Approved by <@{approval.decided_by}>"
    ts = (request.message_ref or ":").split(":", 1)[1]
    if not ts:
        return
    try:
        client.chat_update(
            channel=request.channel,
            ts=ts,
            text=to_mrkdwn(request.text),
            blocks=decided_blocks(request.data, settings, outcome),
        )
    except (SlackApiError, SlackClientError, OSError) as exc:
        log.warning("could not close request #%s on Slack: %s", approval.id, exc)


def _team(body: dict[str, Any]) -> str:
    return _field(body.get("team"), "id") or _field(body.get("user"), "team_id")


def _object(body: dict[str, Any], name: str) -> dict[str, Any]:
    """The object ``body[name]``, or an empty one when it is missing or not an object."""
    found = body.get(name)
    return found if isinstance(found, dict) else {}


def _field(part: object, name: str) -> str:
    """``part[name]`` as text when ``part`` is an object of the payload, else ""."""
    return str(part.get(name) or "") if isinstance(part, dict) else ""
