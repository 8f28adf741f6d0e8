"""Cairn's Bolt app: the listeners for Slack's events, actions and the /cairn command.

The app is transport-free, as Bolt intends: the Socket Mode handler and the HTTP adapter in
:mod:`cairn.bot.slack.frontend` both feed it. Message and reaction events, and clicks on the
Approve and Deny buttons of a request for approval, are written to the spool by a listener
middleware, before Bolt acknowledges them (see :mod:`cairn.bot.slack.inbound`). The slash
command acknowledges at once and answers through a lazy listener; App Home buttons
acknowledge, act and redraw.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from slack_bolt import Ack, App, BoltContext, Respond
from slack_bolt.error import BoltError
from slack_bolt.oauth import OAuthFlow
from slack_bolt.response import BoltResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from cairn.bot.departed import erase_departed
from cairn.bot.slack.approval_blocks import APPROVAL_BLOCK
from cairn.bot.slack.conversations import channel_type_of_command
from cairn.bot.slack.home import (
    CONFIRM_ACTION,
    RETRACT_ACTION,
    confirm_memory,
    home_view,
    retract_memory,
)
from cairn.bot.slack.inbound import CHANNEL_CHANGES, Inbound, tenant_of
from cairn.bot.slack.slash import run_command
from cairn.bot.spool import SpoolError
from cairn.core.bounded import bounded_int
from cairn.core.errors import ConfigError, InvalidInput
from cairn.core.gate import gated
from cairn.core.settings import Settings
from cairn.memory.vouching import Confirmer
from cairn.runtime import Runtime

__all__ = ["SUGGESTED_PROMPTS", "build_app", "register"]

log = logging.getLogger(__name__)

SUGGESTED_PROMPTS = [
    {"title": "What do you remember?", "message": "What do you remember about our deploys?"},
    {"title": "Remember a fact", "message": "Remember that deploys are frozen on Fridays."},
]


def build_app(
    settings: Settings,
    client: WebClient,
    *,
    socket_mode: bool,
    oauth_flow: OAuthFlow | None = None,
) -> App:
    """A Bolt app on ``client``; verifies request signatures unless it runs in Socket Mode.

    With ``oauth_flow`` the app serves the install flow and authorizes each request with the
    token its workspace installed. Raises ConfigError when Slack rejects the bot token (Bolt
    checks it with auth.test).
    """
    secret = settings.slack.signing_secret
    bolt_log = logging.getLogger("cairn.bot.slack.bolt")
    bolt_log.addFilter(_quiet_token_warning)
    try:
        return App(
            client=client,
            signing_secret=secret.get_secret_value() if secret else "",
            request_verification_enabled=not socket_mode,
            logger=bolt_log,
            name="cairn",
            oauth_flow=oauth_flow,
        )
    except BoltError as exc:
        raise ConfigError(f"SLACK_BOT_TOKEN: Slack refused the token: {exc}") from None


def _quiet_token_warning(record: logging.LogRecord) -> bool:
    # Bolt also reads SLACK_BOT_TOKEN itself and warns that the client's token wins; it is the
    # same token, so the warning says nothing.
    return "`token` will be unused" not in record.getMessage()


def register(
    app: App,
    rt: Runtime,
    inbound: Inbound,
    *,
    status: Callable[[], str],
    on_revoked: Callable[[str, str], None],
) -> None:
    """Attach Cairn's listeners to ``app``."""

    def spool_before_ack(body: dict[str, Any], next: Callable[[], None]) -> BoltResponse | None:
        # Runs before Bolt acknowledges: an event is on disk when Slack hears 200, or Slack
        # hears 503 and sends it again.
        try:
            inbound.submit(body)
        except SpoolError as exc:
            log.error("not acknowledging Slack event %s: %s", body.get("event_id"), exc)
            return BoltResponse(status=503, body="")
        next()
        return None

    def spooled() -> None:
        """Nothing left to do: the spool's thread takes the event in."""

    for name in ("app_mention", "message", "reaction_added", "reaction_removed"):
        app.event(name, middleware=[spool_before_ack])(spooled)

    @app.event(re.compile(f"^({'|'.join(CHANNEL_CHANGES)})$"))
    def channel_changed(body: dict[str, Any]) -> None:
        """A channel was shared, unshared, renamed, moved or archived: what memory takes it
        for is asked again (no spool: losing one only waits for the cache to expire)."""
        inbound.channel_changed(body)

    @app.action({"block_id": APPROVAL_BLOCK}, middleware=[spool_before_ack])
    def approval_button(ack: Ack) -> None:
        """Approve or Deny on a request: spooled by the middleware, taken in by the ingest
        thread (:mod:`cairn.bot.slack.approval_clicks`); acknowledged once on disk."""
        ack()

    @app.event("user_change")
    def user_changed(event: dict[str, Any], context: BoltContext) -> None:
        """A person's account changed: one deleted is erased with CAIRN_ERASE_DEPARTED."""
        user = event.get("user") or {}
        if user.get("deleted") is True and user.get("id"):
            team = context.team_id or str(user.get("team_id") or "")
            erase_departed(rt, tenant_of(team), str(user["id"]))

    @app.event("app_home_opened")
    def home_opened(event: dict[str, Any], context: BoltContext, client: WebClient) -> None:
        if event.get("tab", "home") != "home":
            return
        _publish_home(rt, client, context.team_id or "", str(event.get("user") or ""))

    @app.event("app_uninstalled")
    def uninstalled(context: BoltContext) -> None:
        on_revoked(context.team_id or "", "Cairn was uninstalled")

    @app.event("tokens_revoked")
    def revoked(event: dict[str, Any], context: BoltContext) -> None:
        bots = (event.get("tokens") or {}).get("bot") or []
        if bots:
            on_revoked(context.team_id or "", "the bot token was revoked")

    @app.event("assistant_thread_started")
    def assistant_started(event: dict[str, Any], client: WebClient) -> None:
        thread = event.get("assistant_thread") or {}
        try:
            client.assistant_threads_setSuggestedPrompts(
                channel_id=str(thread.get("channel_id")),
                thread_ts=str(thread.get("thread_ts")),
                prompts=SUGGESTED_PROMPTS,
            )
        except (SlackApiError, SlackClientError, OSError) as exc:
            log.warning("could not set suggested prompts: %s", exc)

    @app.event("assistant_thread_context_changed")
    def assistant_context(event: dict[str, Any]) -> None:
        """Nothing to do: a thread's session does not depend on the channel being viewed."""

    @app.action(re.compile(f"^({CONFIRM_ACTION}|{RETRACT_ACTION})$"))
    def home_button(
        ack: Ack, body: dict[str, Any], action: dict[str, Any], client: WebClient
    ) -> None:
        ack()
        team = str((body.get("team") or {}).get("id") or (body.get("user") or {}).get("team_id"))
        user = str((body.get("user") or {}).get("id") or "")
        try:
            memory_id = bounded_int(str(action.get("value")), "a memory id")
        except InvalidInput as exc:
            log.warning("ignored an App Home button: %s", exc)
            return
        person = inbound.people.person(team, user)
        if action.get("action_id") == CONFIRM_ACTION:
            by = Confirmer(
                user,
                outsider=person.outsider,
                steward=person.admin
                or person.steward
                or user in rt.settings.admins
                or user in rt.settings.stewards,
            )
            said = confirm_memory(rt, tenant_of(team), memory_id, by)
        else:  # workspace admins may retract
            said = retract_memory(rt, tenant_of(team), memory_id, user, admin=person.admin)
        log.info("App Home: %s", said)
        _publish_home(rt, client, team, user)

    def command_ack(ack: Ack) -> None:
        ack()  # within Slack's 3 seconds; the answer follows through response_url

    def command_run(command: dict[str, Any], respond: Respond, context: BoltContext) -> None:
        team = str(command.get("team_id") or context.team_id or "")
        channel = str(command.get("channel_id") or "")
        answer = run_command(
            rt,
            tenant=tenant_of(team),
            channel=channel,
            user=str(command.get("user_id") or ""),
            text=str(command.get("text") or ""),
            status=status,
            # "directmessage", "privategroup" and "mpdm-..." say so; other names are asked.
            private=inbound.conversations.private(
                team, channel, channel_type_of_command(command.get("channel_name"))
            ),
            conversation=inbound.conversations.name(team, channel),
        )
        respond(text=gated(answer), response_type="ephemeral")  # a webhook, not the WebClient

    app.command("/cairn")(ack=command_ack, lazy=[command_run])


def _publish_home(rt: Runtime, client: WebClient, team: str, user: str) -> None:
    if not team or not user:
        return
    try:
        client.views_publish(user_id=user, view=home_view(rt, tenant_of(team), user))
    except (SlackApiError, SlackClientError, OSError) as exc:
        log.warning("could not publish the App Home of %s: %s", user, exc)
