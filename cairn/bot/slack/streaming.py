"""Slack's side of answers as they are written (ADR 0027).

Where Slack accepts it, a reply streams: ``chat.startStream`` at the first text, then
``chat.appendStream`` with what was written since (Slack renders the Markdown), and
``chat.stopStream`` when the message is complete. Where Slack refuses a stream (a workspace or
channel without it, an older Slack), the reply is posted once and grown with ``chat.update``
instead; the channel is remembered. A message whose text must change other than by growing
(the model started over) is stopped and then updated whole.

A message's reference says which of these it is: ``s:C:TS`` streams now, ``m:C:TS`` was
streamed (Markdown) and stopped, ``p:C:TS`` was posted (mrkdwn, as every other reply).

Calls go through a client that raises on a 429 instead of sleeping through it: the relay then
waits as long as Slack asked, while the text keeps growing, and shows it all at the next update.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from cairn.bot.slack.mrkdwn import split_message, to_mrkdwn
from cairn.bot.slack.web import web_client
from cairn.bot.slack.workspaces import Workspaces
from cairn.bot.streaming import LiveReply, Refused, Throttled
from cairn.core.settings import Settings

__all__ = ["STREAM_CHARS", "SlackWriter", "message_of"]

log = logging.getLogger(__name__)

# chat.startStream / appendStream / stopStream take at most this much Markdown per call.
STREAM_CHARS = 12_000
# Errors that mean "no streaming here": post and update instead.
_NO_STREAM = {
    "unknown_method",
    "not_allowed",
    "not_allowed_token_type",
    "missing_scope",
    "feature_not_enabled",
    "team_not_allowed",
    "restricted_action",
    "invalid_arguments",
    "streaming_not_allowed",
}
# Errors after which a message cannot be updated any more (deleted, or gone with its channel).
_GONE = {
    "message_not_found",
    "cant_update_message",
    "channel_not_found",
    "not_in_channel",
    "is_archived",
    "edit_window_closed",
}


def message_of(ref: str) -> str:
    """The ``channel:ts`` of a streamed message reference (what reactions point at)."""
    return ref.split(":", 1)[1] if ref[:2] in ("s:", "m:", "p:") else ref


def _parse(ref: str) -> tuple[str, str, str]:
    mode, channel, ts = ref.split(":", 2)
    return mode, channel, ts


class SlackWriter:
    """Opens, grows, stops and removes streamed Slack messages."""

    platform = "slack"

    def __init__(self, workspaces: Workspaces, settings: Settings, no_status: set[str]) -> None:
        """``no_status``: the channels where Slack refused the assistant status (the
        delivery's, which tries it first for every message)."""
        self.workspaces = workspaces
        self.settings = settings
        self.interval = settings.slack.stream_interval
        self.max_updates = settings.slack.stream_updates
        self.limit = min(settings.slack.message_chars, STREAM_CHARS)
        self._lock = threading.Lock()
        self._clients: dict[str, WebClient] = {}
        self._no_stream: set[str] = set()  # channels where Slack refused a stream
        self.no_status = no_status

    def split(self, text: str) -> list[str]:
        """``text`` in parts that fit one Slack message."""
        return split_message(text, self.limit)

    # --- the calls -------------------------------------------------------------------------

    def open(self, reply: LiveReply, text: str, *, final: bool) -> str:
        """A new message of ``reply`` showing ``text``; streamed unless ``final`` or refused."""
        client = self._client(reply.tenant)
        streams = self.settings.slack.stream_mode == "stream"
        if not final and streams and reply.channel not in self._no_stream:
            arguments: dict[str, Any] = {}
            if not reply.channel.startswith("D") and reply.user:
                # Outside a DM Slack wants to know whom the stream answers.
                arguments = {
                    "recipient_team_id": reply.tenant.removeprefix("slack:"),
                    "recipient_user_id": reply.user,
                }
            try:
                response = client.chat_startStream(
                    channel=reply.channel, thread_ts=reply.thread, markdown_text=text, **arguments
                )
                return f"s:{reply.channel}:{response['ts']}"
            except SlackApiError as exc:
                error = _error(exc)
                if error not in _NO_STREAM:
                    raise _translated(exc) from exc
                log.info("Slack will not stream in %s (%s): updating instead", reply.channel, error)
                with self._lock:
                    self._no_stream.add(reply.channel)
        try:
            response = client.chat_postMessage(
                channel=reply.channel,
                thread_ts=reply.thread,
                text=to_mrkdwn(text),
                unfurl_links=False,
                unfurl_media=False,
            )
        except SlackApiError as exc:
            raise _translated(exc) from exc
        return f"p:{reply.channel}:{response['ts']}"

    def update(
        self, reply: LiveReply, ref: str, text: str, *, shown: str | None, final: bool
    ) -> str:
        """Make ``ref`` show ``text``: append to a stream when it only grows, else update."""
        client = self._client(reply.tenant)
        mode, channel, ts = _parse(ref)
        try:
            if mode == "s":
                grows = shown is not None and text.startswith(shown)
                if grows and not final:
                    assert shown is not None
                    if text != shown:
                        client.chat_appendStream(
                            channel=channel, ts=ts, markdown_text=text[len(shown) :]
                        )
                    return ref
                if grows:
                    assert shown is not None
                    rest = text[len(shown) :]
                    _stop(client, channel, ts, rest)
                    return f"m:{channel}:{ts}"
                _stop(client, channel, ts, "", quiet=True)
                mode = "m"
            if mode == "m":
                client.chat_update(channel=channel, ts=ts, markdown_text=text)
            else:
                client.chat_update(channel=channel, ts=ts, text=to_mrkdwn(text))
        except SlackApiError as exc:
            raise _translated(exc) from exc
        return f"{mode}:{channel}:{ts}"

    def delete(self, reply: LiveReply, ref: str) -> None:
        """Remove ``ref`` (a reply that ended in fewer messages than it streamed)."""
        client = self._client(reply.tenant)
        mode, channel, ts = _parse(ref)
        try:
            if mode == "s":
                _stop(client, channel, ts, "", quiet=True)
            client.chat_delete(channel=channel, ts=ts)
        except SlackApiError as exc:
            raise _translated(exc) from exc

    def status(self, reply: LiveReply, text: str) -> None:
        """Show ``text`` as the thread's assistant status, where Slack allows one."""
        if reply.channel in self.no_status:
            return  # setStatus was refused here: the working reaction stays instead
        client = self._client(reply.tenant)
        client.assistant_threads_setStatus(
            channel_id=reply.channel, thread_ts=reply.thread, status=text
        )

    def _client(self, tenant: str) -> WebClient:
        shared = self.workspaces.client(tenant.removeprefix("slack:"))
        if shared is None:
            raise Refused(f"Cairn is not installed in {tenant}")
        token = str(shared.token)
        with self._lock:
            client = self._clients.get(token)
            if client is None:
                client = web_client(self.settings, token, timeout=10, wait_on_limits=False)
                self._clients[token] = client
        return client


def _stop(client: WebClient, channel: str, ts: str, rest: str, *, quiet: bool = False) -> None:
    """Stop the stream of ``ts``, appending ``rest``; ``quiet``: a stream already stopped (by
    an earlier frontend, or by Slack after its time limit) is no error."""
    try:
        if rest:
            client.chat_stopStream(channel=channel, ts=ts, markdown_text=rest)
        else:
            client.chat_stopStream(channel=channel, ts=ts)
    except SlackApiError as exc:
        if not quiet or _error(exc) == "ratelimited" or exc.response.status_code == 429:
            raise
        log.debug("stream %s was already stopped: %s", ts, _error(exc))


def _error(exc: SlackApiError) -> str:
    return str(exc.response.get("error") or exc)


def _translated(exc: SlackApiError) -> Exception:
    """Throttled for a 429, Refused for a message or channel that is gone, else ``exc``."""
    if exc.response.status_code == 429 or _error(exc) == "ratelimited":
        retry_after = exc.response.headers.get("Retry-After") or exc.response.headers.get(
            "retry-after"
        )
        try:
            seconds = float(retry_after) if retry_after else 1.0
        except ValueError:
            seconds = 1.0
        return Throttled(max(0.1, seconds))
    if _error(exc) in _GONE or _error(exc) in _NO_STREAM:
        return Refused(_error(exc))
    return exc
