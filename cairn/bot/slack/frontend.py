"""The Slack frontend: Cairn's Bolt app on Socket Mode or the HTTP Events API, plus /healthz.

With SLACK_APP_TOKEN the app connects through Socket Mode (no public URL needed); otherwise it
serves Slack's signed HTTP requests at ``/slack/events`` on CAIRN_HTTP_HOST:CAIRN_HTTP_PORT,
behind :mod:`cairn.bot.slack.http_guard`, which refuses what Slack could not have sent (400/401).
Either way the same port answers ``GET /healthz``: 200 when the socket (or HTTP server), the
ingest and delivery threads and the queue are alive, 503 with the failing checks otherwise.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import redis
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_bolt.oauth import OAuthFlow
from slack_sdk.errors import SlackApiError, SlackClientError
from waitress import wasyncore
from waitress.server import create_server

from cairn.bot.dedupe import open_dedupe
from cairn.bot.pipeline import Pipeline
from cairn.bot.slack.bolt_app import build_app, register
from cairn.bot.slack.delivery import Delivery
from cairn.bot.slack.http_guard import RequestGuard
from cairn.bot.slack.inbound import Inbound
from cairn.bot.slack.streaming import SlackWriter
from cairn.bot.slack.web import web_client
from cairn.bot.slack.workspaces import (
    BotIdentity,
    InstalledWorkspaces,
    SingleWorkspace,
    Workspaces,
    installation_flow,
)
from cairn.bot.spool import Spool, spool_folder
from cairn.bot.streaming import StreamRelay
from cairn.core.disk import disk_space
from cairn.core.errors import ConfigError
from cairn.core.settings import Settings

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

    from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore

__all__ = ["SlackFrontend"]

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
HEALTH_PATH = "/healthz"
# The largest request body served (413 above it); Slack's own payloads are far smaller.
MAX_BODY_BYTES = 4 * 1024 * 1024


class SlackFrontend:
    """Slack for ``cairn run``: receives events, posts the outbox, answers /healthz."""

    name = "slack"

    def __init__(self, pipeline: Pipeline, settings: Settings) -> None:
        """Connect the pieces; raises ConfigError when Slack rejects the bot token."""
        if not settings.slack.enabled:
            raise ConfigError("set SLACK_BOT_TOKEN (or SLACK_CLIENT_ID and SLACK_CLIENT_SECRET)")
        self.pipeline = pipeline
        self.settings = settings
        self.socket_mode = settings.slack.app_token is not None
        oauth_flow: OAuthFlow | None = None
        self.installations: SQLAlchemyInstallationStore | None = None
        self.workspaces: Workspaces
        if settings.slack.bot_token is not None:
            # One workspace: the bot token is the simple default even when OAuth is configured.
            self.client = web_client(settings, settings.slack.bot_token.get_secret_value())
            self.workspaces = SingleWorkspace(self.client, _identify(self.client))
        else:
            self.client = web_client(settings, None)
            self.installations, oauth_flow = installation_flow(
                settings, pipeline.rt.db, self.client
            )
            self.workspaces = InstalledWorkspaces(self.installations, settings)
        self.dedupe = open_dedupe(settings, pipeline.rt.redis)
        self.posted = Spool(spool_folder(settings, "slack-posted"))
        self.delivery = Delivery(
            pipeline.rt.db, self.workspaces, self.dedupe, settings, journal=self.posted
        )
        self.relay: StreamRelay | None = None
        if settings.slack.stream_mode != "off":
            writer = SlackWriter(self.workspaces, settings, self.delivery.no_status)
            self.relay = StreamRelay(
                pipeline.rt.streams,
                "slack:",
                writer,
                pipeline.rt.db,
                self.dedupe,
                prefix=True,
                speaks_for=settings.speaks_for,
            )
            self.delivery.relay = self.relay
        self.spool = Spool(spool_folder(settings, "slack"))
        self.inbound = Inbound(pipeline, self.workspaces, self.dedupe, self.delivery, self.spool)
        self.app = build_app(
            settings, self.client, socket_mode=self.socket_mode, oauth_flow=oauth_flow
        )
        register(
            self.app, pipeline.rt, self.inbound, status=self.status_text, on_revoked=self._revoked
        )
        self._events = SlackRequestHandler(self.app, path=EVENTS_PATH)
        # HTTP mode: what Slack could not have sent is answered 400/401 before Bolt sees it.
        self._guarded: RequestGuard | None = None
        if not self.socket_mode:
            secret = settings.slack.signing_secret
            assert secret is not None  # Settings require it without SLACK_APP_TOKEN
            self._guarded = RequestGuard(self._events, secret.get_secret_value())
        self._socket: SocketModeHandler | None = None
        self._server: Any = None
        self._revocation: str | None = None
        self.ready = threading.Event()

    # --- running -------------------------------------------------------------------------

    @property
    def http_port(self) -> int:
        """The port /healthz (and, in HTTP mode, /slack/events) is served on, once ready."""
        return int(self._server.effective_port) if self._server is not None else 0

    def run(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set; Socket Mode reconnects on its own."""
        self.inbound.start(stop)
        if self.relay is not None:
            self.relay.start(stop)
        self.delivery.start(stop)
        self._server = create_server(
            self._wsgi,
            host=self.settings.slack.http_host,
            port=self.settings.slack.http_port,
            threads=8,
            ident="cairn",
            clear_untrusted_proxy_headers=True,
            # Read before any signature check: anyone could send a gigabyte (waitress's default).
            max_request_body_size=MAX_BODY_BYTES,
            # poll(), not select(): select() fails for every connection once the process holds
            # a file descriptor numbered 1024 or more (MCP servers, sockets, stores), and the
            # HTTP endpoint then stops answering.
            asyncore_use_poll=True,
        )
        http = threading.Thread(target=self._server.run, name="slack-http", daemon=True)
        http.start()
        try:
            if self.socket_mode:
                assert self.settings.slack.app_token is not None
                self._socket = SocketModeHandler(
                    self.app, self.settings.slack.app_token.get_secret_value()
                )
                self._socket.connect()  # type: ignore[no-untyped-call]
            log.info(
                "Slack frontend up (%s), health on port %s",
                "Socket Mode" if self.socket_mode else f"HTTP {EVENTS_PATH}",
                self.http_port,
            )
            self.ready.set()
            stop.wait()
        finally:
            stop.set()
            if self._socket is not None:
                self._socket.close()  # type: ignore[no-untyped-call]
            self._stop_http(http)
            self.inbound.join(timeout=10)
            self.spool.close()
            self.delivery.join(timeout=10)
            if self.relay is not None:
                self.relay.join(timeout=5)
            self.posted.close()

    def _stop_http(self, http: threading.Thread) -> None:
        server = self._server
        # Close every socket from inside waitress's own loop, which then ends; closing them
        # from this thread would pull them out from under its select().
        if http.is_alive():
            try:
                server.trigger.pull_trigger(
                    lambda: wasyncore.close_all(server._map, ignore_all=True)
                )
            except OSError:  # the loop has already closed its sockets
                log.debug("waitress stopped on its own")
        http.join(timeout=5)
        server.task_dispatcher.shutdown(timeout=5)

    # --- health --------------------------------------------------------------------------

    def checks(self) -> dict[str, bool]:
        """Each thing /healthz looks at, and whether it is alive."""
        result = {
            "socket" if self.socket_mode else "http": self._transport_alive(),
            "ingest": self.inbound.healthy(),
            "delivery": self.delivery.healthy(),
            "dedupe": self.dedupe.healthy(),
            "token": self._revocation is None,
            "disk": not disk_space(self.settings.home_dir, self.settings.min_free_mb).low,
        }
        if self.pipeline.rt.redis is not None:
            result["queue"] = _ping(self.pipeline.rt.redis)
        return result

    def healthy(self) -> bool:
        """Whether Slack's events reach the pipeline and replies reach Slack right now."""
        return all(self.checks().values())

    def _transport_alive(self) -> bool:
        if not self.socket_mode:
            return self._server is not None
        return self._socket is not None and self._socket.client.is_connected()

    def status_text(self) -> str:
        """A few lines on how this frontend is doing (for ``/cairn status``)."""
        pending = self.pipeline.log.count_pending()
        unsent = self.delivery.outbox.count_pending()
        checks = self.checks()
        failing = [name for name, ok in checks.items() if not ok]
        mode = "Socket Mode" if self.socket_mode else "HTTP Events API"
        queue = "Celery on Redis" if self.settings.broker_url else "in-process"
        lines = [
            f"*Cairn* is {'healthy' if not failing else 'degraded: ' + ', '.join(failing)}",
            f"• Slack: {mode}; queue: {queue}; model: {self.settings.llm.provider}",
            f"• messages waiting for a worker: {pending}; replies waiting to be posted: {unsent}",
        ]
        return "\n".join(lines)

    def _revoked(self, team: str, why: str) -> None:
        if self.installations is not None and isinstance(self.workspaces, InstalledWorkspaces):
            # One workspace of many left: forget its tokens; the others carry on.
            log.warning("%s in workspace %s: its installation is deleted", why, team)
            self.installations.delete_all(enterprise_id=None, team_id=team)
            self.workspaces.forget(team)
            return
        log.error("%s in workspace %s: Cairn can no longer post there", why, team)
        self._revocation = f"{why} in workspace {team}"

    # --- HTTP ----------------------------------------------------------------------------

    def _wsgi(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == HEALTH_PATH and environ.get("REQUEST_METHOD") in {"GET", "HEAD"}:
            checks = self.checks()
            ok = all(checks.values())
            body = json.dumps({"ok": ok, "checks": checks}).encode()
            start_response(
                "200 OK" if ok else "503 Service Unavailable",
                [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
            )
            return [body]
        if path == EVENTS_PATH and self._guarded is not None:
            return self._guarded(environ, start_response)
        flow = self.app.oauth_flow
        if flow is not None and path in {flow.install_path, flow.redirect_uri_path}:
            return self._events(environ, start_response)
        body = b"Not Found"
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [body]


def _identify(client: Any) -> BotIdentity:
    try:
        me = client.auth_test()
    except SlackApiError as exc:
        raise ConfigError(
            f"SLACK_BOT_TOKEN: Slack refused the token ({exc.response.get('error')})"
        ) from None
    except (SlackClientError, OSError) as exc:
        raise ConfigError(f"SLACK_API_URL: cannot reach Slack's Web API: {exc}") from None
    return BotIdentity(
        user_id=str(me.get("user_id") or ""),
        bot_id=str(me.get("bot_id") or ""),
        team_id=str(me.get("team_id") or ""),
    )


def _ping(client: redis.Redis[bytes]) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
