"""Stand-ins for Slack on 127.0.0.1: the Web API, Socket Mode, and signed Events API requests.

:class:`SlackAPI` answers the Web API methods Cairn calls (``POST /api/<method>``, JSON or form
bodies, the token in ``Authorization``), keeps what a workspace would (posted messages with
their blocks, reactions, published views, statuses, ephemeral messages, its conversations),
records every call, and answers 429 with ``Retry-After``, drops the connection, or refuses with
Slack's error (``missing_scope``) on demand. ``conversations.replies`` is served as Slack serves
an app outside the Marketplace since 2025: pages of at most 15 messages, one request a minute per
workspace (429 beyond it).
``apps.connections.open`` hands out the URL of its :class:`SocketModeServer`, a websocket server
that sends envelopes the way Slack does and records the client's acknowledgements.
:func:`signed_headers` signs an HTTP request body with a signing secret, as Slack does, and
:func:`block_actions_payload` builds the interactivity payload of a button click.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self, cast
from urllib.parse import parse_qsl

from websockets.exceptions import ConnectionClosed
from websockets.sync.server import Server, ServerConnection, serve

from tests.support.loopback import BackgroundServer

__all__ = [
    "BOT_ID",
    "BOT_TOKEN",
    "BOT_USER",
    "Call",
    "SlackAPI",
    "SocketModeServer",
    "block_actions_payload",
    "event_payload",
    "signed_headers",
]

JSON = dict[str, Any]

BOT_TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-test-token"
BOT_USER = "UCAIRNBOT"
BOT_ID = "BCAIRN"
CLIENT_ID = "1111.2222"
CLIENT_SECRET = "oauth-client-secret"


@dataclass(frozen=True, slots=True)
class Call:
    """One Web API call as the stand-in received it."""

    method: str
    args: JSON
    token: str
    at: float
    status: int


@dataclass
class _Failure:
    status: int
    retry_after: int | None
    times: int
    drop: bool = False
    error: str = ""  # with status 200: Slack's ``{"ok": false, "error": ...}``


# The kinds of conversation add_channel knows, and the conversations.info fields of each, as
# Slack answers them (a private channel made since 2021 has a C id and is_channel true; one made
# before, a G id and is_group true; a DM has the short object of the old im type).
_CHANNEL_KINDS: dict[str, JSON] = {
    "public": {
        "is_channel": True,
        "is_group": False,
        "is_im": False,
        "is_mpim": False,
        "is_private": False,
    },
    "private": {
        "is_channel": True,
        "is_group": False,
        "is_im": False,
        "is_mpim": False,
        "is_private": True,
    },
    "group": {
        "is_channel": False,
        "is_group": True,
        "is_im": False,
        "is_mpim": False,
        "is_private": True,
    },
    "mpim": {
        "is_channel": False,
        "is_group": False,
        "is_im": False,
        "is_mpim": True,
        "is_private": True,
    },
    "im": {"is_im": True, "is_org_shared": False, "is_user_deleted": False, "priority": 0},
}


@dataclass
class Workspace:
    """What the stand-in keeps of a workspace: messages by channel, reactions, views."""

    messages: dict[str, list[JSON]] = field(default_factory=dict)
    reactions: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    views: dict[str, JSON] = field(default_factory=dict)
    statuses: list[tuple[str, str, str]] = field(default_factory=list)
    # What chat.postEphemeral showed one person: channel, user, text, thread_ts.
    ephemerals: list[JSON] = field(default_factory=list)


class SlackAPI(BackgroundServer):
    """A Web API stand-in; use as a context manager. ``base_url`` is what SLACK_API_URL takes."""

    def __init__(self, *, team: str = "T0001", assistant_channels: tuple[str, ...] = ()) -> None:
        self.team = team
        # setStatus works in direct-message channels (D...) and these; elsewhere it is refused.
        self.assistant_channels = set(assistant_channels)
        self.workspace = Workspace()
        self.socket: SocketModeServer | None = None
        self._lock = threading.Lock()
        self._calls: list[Call] = []
        self._failures: dict[str, list[_Failure]] = {}
        self._clock = itertools.count(1)
        self.responses: list[JSON] = []  # bodies POSTed to response_url (slash commands)
        # Bot tokens this workspace stand-in accepts: token -> (team, bot user, bot id).
        self.tokens: dict[str, tuple[str, str, str]] = {BOT_TOKEN: (team, BOT_USER, BOT_ID)}
        # People of the workspace by user id (users.info); unknown U... ids are plain members.
        self.users: dict[str, JSON] = {}
        # User groups by id (usergroups.users.list): their members' user ids.
        self.user_groups: dict[str, list[str]] = {}
        # Conversations by id (conversations.info); of the others, C... ids are public channels,
        # G... ids private groups and D... ids DMs, and the rest are not found.
        self.channels: dict[str, JSON] = {}
        # The OAuth app's credentials (oauth.v2.access checks them).
        self.client_id, self.client_secret = CLIENT_ID, CLIENT_SECRET
        # conversations.replies: the most messages a page holds, and the requests a workspace
        # may make a minute (None: any number), as for an app outside the Marketplace.
        self.history_page = 15
        self.history_per_minute: int | None = 1
        self._history_calls: dict[str, list[float]] = {}
        # Called with (method, arguments) after a call took effect, before it is answered.
        self.after_call: Callable[[str, JSON], None] | None = None
        # Shared files by id (files.info), and their bytes, served at url_private to a client
        # that sends a bot token (GET /files-pri/<id>/<name>); who downloaded which.
        self.files: dict[str, JSON] = {}
        self._file_bytes: dict[str, bytes] = {}
        self.downloads: list[tuple[str, str]] = []  # (file id, token)

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Serve on a free loopback port in a background thread."""
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._serve(httpd, "slack-api")
        return self

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def base_url(self) -> str:
        """The Web API base URL, for SLACK_API_URL."""
        return self.url + "/api/"

    @property
    def response_url(self) -> str:
        """A response_url for slash commands; what is POSTed there lands in ``responses``."""
        return self.url + "/respond/" + uuid.uuid4().hex

    # --- scripting -------------------------------------------------------------------------

    def fail(
        self, method: str, *, status: int = 429, retry_after: int | None = 1, times: int = 1
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with ``status`` (429: Retry-After)."""
        with self._lock:
            self._failures.setdefault(method, []).append(_Failure(status, retry_after, times))

    def refuse(self, method: str, error: str = "missing_scope", *, times: int = 1) -> None:
        """Answer the next ``times`` calls of ``method`` with ``{"ok": false, "error": error}``
        (HTTP 200, as Slack does; ``missing_scope`` names the scope it needed)."""
        with self._lock:
            self._failures.setdefault(method, []).append(_Failure(200, None, times, error=error))

    def drop(self, method: str, *, times: int = 1) -> None:
        """Close the connection without answering the next ``times`` calls of ``method``."""
        with self._lock:
            self._failures.setdefault(method, []).append(_Failure(0, None, times, drop=True))

    def add_user(self, user: str, **flags: Any) -> None:
        """A person of the workspace with users.info flags, e.g. ``is_admin=True`` (or of
        another organisation: ``team_id="T0OTHER"``)."""
        with self._lock:
            self.users[user] = {"id": user, "team_id": self.team, "name": user.lower(), **flags}

    def add_user_group(self, group: str, members: list[str]) -> None:
        """A user group (``S...``) and its members, for usergroups.users.list."""
        with self._lock:
            self.user_groups[group] = list(members)

    def add_channel(self, channel: str, kind: str, **fields: Any) -> None:
        """A conversation for conversations.info: ``kind`` is public, private (a private
        channel), group (a legacy private channel), mpim (a group DM) or im (a DM)."""
        with self._lock:
            self.channels[channel] = _conversation(channel, kind, self.team, **fields)

    def add_file(
        self,
        file_id: str,
        name: str,
        content: bytes,
        *,
        mimetype: str = "text/plain",
        **fields: Any,
    ) -> JSON:
        """A file shared in the workspace: the file object an event's ``files`` lists (and
        files.info returns), its bytes served at its ``url_private`` (``mode`` snippet for a
        long paste Slack turned into one)."""
        url = f"{self.url}/files-pri/{self.team}-{file_id}/{name}"
        file = {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": "text",
            "size": len(content),
            "mode": "hosted",
            "url_private": url,
            "url_private_download": url + "?download=1",
            **fields,
        }
        with self._lock:
            self.files[file_id] = file
            self._file_bytes[file_id] = content
        return file

    def _download(self, path: str, token: str) -> bytes | None:
        """The bytes at a ``url_private`` path, for a bot token of this stand-in."""
        file_id = path.removeprefix("/files-pri/").split("/", 1)[0].removeprefix(self.team + "-")
        with self._lock:
            self.downloads.append((file_id, token))
            if token not in self.tokens:
                return None
            return self._file_bytes.get(file_id)

    def _files_info(self, args: JSON) -> JSON:
        file = self.files.get(str(args.get("file")))
        return {"ok": True, "file": file} if file else {"ok": False, "error": "file_not_found"}

    def add_thread(self, channel: str, messages: list[JSON]) -> None:
        """Messages already in a channel (for conversations.replies), each with ``ts``."""
        with self._lock:
            self.workspace.messages.setdefault(channel, []).extend(messages)

    # --- what happened ---------------------------------------------------------------------

    def calls(self, method: str | None = None, *, ok_only: bool = True) -> list[Call]:
        """Recorded calls (of ``method``), oldest first; ``ok_only`` leaves out failed ones."""
        with self._lock:
            found = [c for c in self._calls if method is None or c.method == method]
        return [c for c in found if c.status == 200] if ok_only else found

    def ephemerals(self, user: str | None = None) -> list[JSON]:
        """What chat.postEphemeral showed (to ``user``), oldest first."""
        with self._lock:
            return [e for e in self.workspace.ephemerals if user is None or e["user"] == user]

    def posts(self, channel: str | None = None) -> list[JSON]:
        """Messages the bot posted (chat.postMessage), oldest first."""
        with self._lock:
            posted = [m for msgs in self.workspace.messages.values() for m in msgs]
        mine = [m for m in posted if m.get("bot_id")]
        mine.sort(key=lambda m: float(m["ts"]))
        return [m for m in mine if channel is None or m["channel"] == channel]

    def wait_for(self, condition: Any, timeout: float = 15.0, what: str = "condition") -> Any:
        """Poll ``condition()`` until it returns something truthy; fails the test on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(0.02)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")

    # --- the methods -----------------------------------------------------------------------

    def _ts(self) -> str:
        return f"{1_800_000_000 + next(self._clock)}.000100"

    def _history_wait(self, method: str, token: str) -> float:
        """Seconds until the workspace of ``token`` may call ``method`` again (0: now), as
        Slack's per-minute limit on reading threads counts; a call allowed is counted."""
        if method != "conversations.replies" or self.history_per_minute is None:
            return 0.0
        team = self.tokens.get(token, ("", "", ""))[0]
        now = time.monotonic()
        with self._lock:
            recent = [t for t in self._history_calls.get(team, []) if now - t < 60.0]
            if len(recent) >= self.history_per_minute:
                self._history_calls[team] = recent
                return 60.0 - (now - recent[0])
            self._history_calls[team] = [*recent, now]
        return 0.0

    def _failure(self, method: str) -> _Failure | None:
        with self._lock:
            queue = self._failures.get(method) or []
            if not queue:
                return None
            failure = queue[0]
            failure.times -= 1
            if failure.times <= 0:
                queue.pop(0)
            return failure

    def _record(self, call: Call) -> None:
        with self._lock:
            self._calls.append(call)

    def answer(self, method: str, args: JSON, token: str) -> JSON:
        """The JSON body Slack would answer ``method`` with."""
        if method == "apps.connections.open":
            if not token.startswith("xapp-"):
                return {"ok": False, "error": "not_allowed_token_type"}
            if self.socket is None:
                return {"ok": False, "error": "socket_mode_not_enabled"}
            return {"ok": True, "url": self.socket.url}
        if method == "oauth.v2.access":
            return self._oauth_v2_access(args, token)
        if token not in self.tokens:
            return {"ok": False, "error": "invalid_auth"}
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None:
            return {"ok": False, "error": "unknown_method"}
        team, bot_user, bot_id = self.tokens[token]
        answer = cast(JSON, handler({**args, "_team": team, "_bot": (bot_user, bot_id)}))
        if self.after_call is not None:
            self.after_call(method, args)  # done, and not yet answered: a crash can come now
        return answer

    def _oauth_v2_access(self, args: JSON, credentials: str) -> JSON:
        """Exchange ``code-<TEAM>`` for a new bot token of workspace TEAM."""
        if credentials != f"{self.client_id}:{self.client_secret}":
            return {"ok": False, "error": "invalid_client_id"}
        code = str(args.get("code") or "")
        if not code.startswith("code-"):
            return {"ok": False, "error": "invalid_code"}
        team = code.removeprefix("code-")
        token, bot_user, bot_id = f"xoxb-{team}", f"U{team}BOT", f"B{team}"
        with self._lock:
            self.tokens[token] = (team, bot_user, bot_id)
        return {
            "ok": True,
            "app_id": "ACAIRN",
            "authed_user": {"id": f"U{team}ADMIN"},
            "scope": "app_mentions:read,chat:write",
            "token_type": "bot",
            "access_token": token,
            "bot_user_id": bot_user,
            "team": {"id": team, "name": f"Workspace {team}"},
            "enterprise": None,
            "is_enterprise_install": False,
        }

    def _auth_test(self, args: JSON) -> JSON:
        bot_user, bot_id = args["_bot"]
        return {
            "ok": True,
            "url": "https://cairn-test.slack.com/",
            "team": "Cairn Test",
            "user": "cairn",
            "team_id": args["_team"],
            "user_id": bot_user,
            "bot_id": bot_id,
            "is_enterprise_install": False,
        }

    def _chat_postMessage(self, args: JSON) -> JSON:
        channel, text = str(args.get("channel") or ""), str(args.get("text") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not text and not args.get("blocks"):
            return {"ok": False, "error": "no_text"}
        if len(text) > 40000:
            return {"ok": False, "error": "msg_too_long"}
        bot_user, bot_id = args["_bot"]
        message = {
            "type": "message",
            "team": args["_team"],
            "channel": channel,
            "user": bot_user,
            "bot_id": bot_id,
            "text": text,
            "ts": self._ts(),
        }
        if args.get("thread_ts"):
            message["thread_ts"] = str(args["thread_ts"])
        if args.get("blocks"):
            message["blocks"] = _blocks(args["blocks"])
        with self._lock:
            self.workspace.messages.setdefault(channel, []).append(message)
        return {"ok": True, "channel": channel, "ts": message["ts"], "message": message}

    def _chat_postEphemeral(self, args: JSON) -> JSON:
        channel, user = str(args.get("channel") or ""), str(args.get("user") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not user:
            return {"ok": False, "error": "user_not_found"}
        if not args.get("text") and not args.get("blocks"):
            return {"ok": False, "error": "no_text"}
        shown = {
            "channel": channel,
            "user": user,
            "text": str(args.get("text") or ""),
            "thread_ts": str(args.get("thread_ts") or ""),
        }
        with self._lock:
            self.workspace.ephemerals.append(shown)
        return {"ok": True, "message_ts": self._ts()}

    # chat.startStream / appendStream / stopStream: a message whose Markdown grows while it
    # is "streaming"; chat.update and chat.delete act on any message of the bot.

    def _chat_startStream(self, args: JSON) -> JSON:
        channel = str(args.get("channel") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not args.get("thread_ts"):
            return {"ok": False, "error": "invalid_arguments"}
        if not channel.startswith("D") and not (
            args.get("recipient_user_id") and args.get("recipient_team_id")
        ):
            # Slack wants to know whom a stream outside a DM answers.
            return {"ok": False, "error": "invalid_arguments"}
        text = str(args.get("markdown_text") or "")
        if len(text) > 12000:
            return {"ok": False, "error": "msg_too_long"}
        bot_user, bot_id = args["_bot"]
        message = {
            "type": "message",
            "team": args["_team"],
            "channel": channel,
            "user": bot_user,
            "bot_id": bot_id,
            "text": text,
            "ts": self._ts(),
            "thread_ts": str(args["thread_ts"]),
            "streaming": True,
            "markdown": True,
        }
        with self._lock:
            self.workspace.messages.setdefault(channel, []).append(message)
        return {"ok": True, "channel": channel, "ts": message["ts"]}

    def _chat_appendStream(self, args: JSON) -> JSON:
        return self._grow(args, stop=False)

    def _chat_stopStream(self, args: JSON) -> JSON:
        return self._grow(args, stop=True)

    def _grow(self, args: JSON, *, stop: bool) -> JSON:
        text = str(args.get("markdown_text") or "")
        if len(text) > 12000:
            return {"ok": False, "error": "msg_too_long"}
        with self._lock:
            message = self._message(args)
            if message is None:
                return {"ok": False, "error": "message_not_found"}
            if not message.get("streaming"):
                return {"ok": False, "error": "message_not_in_streaming_state"}
            message["text"] += text
            if stop:
                message["streaming"] = False
        return {"ok": True, "channel": message["channel"], "ts": message["ts"]}

    def _chat_update(self, args: JSON) -> JSON:
        text = args.get("markdown_text")
        with self._lock:
            message = self._message(args)
            if message is None:
                return {"ok": False, "error": "message_not_found"}
            if message.get("streaming"):
                return {"ok": False, "error": "message_is_streaming"}
            message["text"] = str(text if text is not None else args.get("text") or "")
            message["markdown"] = text is not None
            if "blocks" in args:
                message["blocks"] = _blocks(args["blocks"])
            message["edited"] = int(message.get("edited", 0)) + 1
        return {"ok": True, "channel": message["channel"], "ts": message["ts"]}

    def _chat_delete(self, args: JSON) -> JSON:
        with self._lock:
            message = self._message(args)
            if message is None:
                return {"ok": False, "error": "message_not_found"}
            self.workspace.messages[message["channel"]].remove(message)
        return {"ok": True, "channel": message["channel"], "ts": message["ts"]}

    def _message(self, args: JSON) -> JSON | None:
        """The bot's message ``args`` name by channel and ts (the caller holds the lock)."""
        channel, ts = str(args.get("channel") or ""), str(args.get("ts") or "")
        for message in self.workspace.messages.get(channel, []):
            if message["ts"] == ts and message.get("bot_id"):
                return message
        return None

    def _users_info(self, args: JSON) -> JSON:
        user = str(args.get("user") or "")
        with self._lock:
            known = self.users.get(user)
        if known is None and not user.startswith(("U", "W")):
            return {"ok": False, "error": "user_not_found"}
        profile: JSON = {
            "id": user,
            "team_id": args["_team"],
            "name": user.lower(),
            "deleted": False,
            "is_admin": False,
            "is_owner": False,
            "is_primary_owner": False,
            "is_restricted": False,
            "is_ultra_restricted": False,
            "is_bot": False,
            **(known or {}),
        }
        return {"ok": True, "user": profile}

    def _usergroups_users_list(self, args: JSON) -> JSON:
        group = str(args.get("usergroup") or "")
        with self._lock:
            members = self.user_groups.get(group)
        if members is None:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": list(members)}

    def _conversations_info(self, args: JSON) -> JSON:
        channel = str(args.get("channel") or "")
        with self._lock:
            known = self.channels.get(channel)
        if known is None:
            kind = {"C": "public", "G": "group", "D": "im"}.get(channel[:1])
            if kind is None:
                return {"ok": False, "error": "channel_not_found"}
            known = _conversation(channel, kind, args["_team"])
        return {"ok": True, "channel": known}

    def _conversations_replies(self, args: JSON) -> JSON:
        channel, ts = str(args.get("channel")), str(args.get("ts"))
        with self._lock:
            messages = list(self.workspace.messages.get(channel, []))
        thread = [m for m in messages if m["ts"] == ts or m.get("thread_ts") == ts]
        thread.sort(key=lambda m: float(m["ts"]))
        if not thread:
            return {"ok": False, "error": "thread_not_found"}
        if args.get("oldest"):
            thread = [m for m in thread if float(m["ts"]) > float(args["oldest"])]
        if args.get("latest"):
            thread = [m for m in thread if float(m["ts"]) < float(args["latest"])]
        # Slack caps limit at the page size (15 for an app outside the Marketplace).
        limit = min(int(args.get("limit") or self.history_page), self.history_page)
        start = int(args.get("cursor") or 0)
        page = thread[start : start + limit]
        more = start + limit < len(thread)
        answer: JSON = {"ok": True, "messages": page, "has_more": more}
        answer["response_metadata"] = {"next_cursor": str(start + limit) if more else ""}
        return answer

    def _reactions_add(self, args: JSON) -> JSON:
        key = (str(args.get("channel")), str(args.get("timestamp")))
        with self._lock:
            names = self.workspace.reactions.setdefault(key, [])
            if args.get("name") in names:
                return {"ok": False, "error": "already_reacted"}
            names.append(str(args.get("name")))
        return {"ok": True}

    def _reactions_remove(self, args: JSON) -> JSON:
        key = (str(args.get("channel")), str(args.get("timestamp")))
        with self._lock:
            names = self.workspace.reactions.get(key, [])
            if args.get("name") not in names:
                return {"ok": False, "error": "no_reaction"}
            names.remove(str(args.get("name")))
        return {"ok": True}

    def _assistant_threads_setStatus(self, args: JSON) -> JSON:
        channel = str(args.get("channel_id") or "")
        if not (channel.startswith("D") or channel in self.assistant_channels):
            return {"ok": False, "error": "not_allowed"}
        with self._lock:
            self.workspace.statuses.append(
                (channel, str(args.get("thread_ts")), str(args.get("status")))
            )
        return {"ok": True}

    def _assistant_threads_setSuggestedPrompts(self, args: JSON) -> JSON:
        return {"ok": True}

    def _views_publish(self, args: JSON) -> JSON:
        view = args.get("view")
        if isinstance(view, str):
            view = json.loads(view)
        with self._lock:
            self.workspace.views[str(args.get("user_id"))] = cast(JSON, view)
        return {"ok": True, "view": {"id": "V" + uuid.uuid4().hex[:8], **cast(JSON, view)}}


def _blocks(blocks: Any) -> list[JSON]:
    """Block Kit blocks as slack_sdk sends them: a JSON string in a form, a list in JSON."""
    return cast(list[JSON], json.loads(blocks) if isinstance(blocks, str) else blocks)


# The scope a missing_scope refusal names, by method.
_SCOPE_OF = {"conversations.info": "channels:read,groups:read,mpim:read,im:read"}


def _conversation(channel: str, kind: str, team: str, **fields: Any) -> JSON:
    """The ``channel`` object conversations.info answers for a conversation of ``kind``."""
    if kind not in _CHANNEL_KINDS:
        raise ValueError(f"unknown conversation kind {kind!r}: one of {sorted(_CHANNEL_KINDS)}")
    if kind == "im":
        base: JSON = {"id": channel, "created": 1_700_000_000, "user": "UANN"}
    else:
        name = fields.pop("name", None) or channel.lower()
        base = {
            "id": channel,
            "name": name,
            "name_normalized": name,
            "created": 1_700_000_000,
            "is_archived": False,
            "is_general": False,
            "is_shared": False,
            "is_ext_shared": False,
            "is_org_shared": False,
            "is_member": True,
            "context_team_id": team,
        }
    return {**base, **_CHANNEL_KINDS[kind], **fields}


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: SlackAPI

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up are part of the tests


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def owner(self) -> SlackAPI:
        return cast(_HTTPServer, self.server).owner

    def do_GET(self) -> None:
        if self.path.startswith("/files-pri/"):
            token = (self.headers.get("authorization") or "").removeprefix("Bearer ").strip()
            content = self.owner._download(self.path.partition("?")[0], token)
            if content is None:  # Slack answers a login page, not the file
                self._send(302, b"", "text/html", {"Location": "/login"})
            else:
                self._send(200, content, "application/octet-stream")
            return
        # slack_sdk reads some methods (users.info) with GET and the arguments in the query.
        self.do_POST()

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        path, _, query = self.path.partition("?")
        if path.startswith("/respond/"):
            with self.owner._lock:
                self.owner.responses.append(json.loads(raw or b"{}"))
            self._send(200, b"ok", "text/plain")
            return
        if not path.startswith("/api/"):
            self._send(404, b"not found", "text/plain")
            return
        method = path.removeprefix("/api/")
        args: JSON = dict(parse_qsl(query))
        if "json" in (self.headers.get("content-type") or ""):
            args.update(json.loads(raw or b"{}"))
        else:
            args.update(parse_qsl(raw.decode()))
        auth = self.headers.get("authorization") or ""
        if auth.startswith("Basic "):
            token = base64.b64decode(auth.removeprefix("Basic ")).decode()
        else:
            token = auth.removeprefix("Bearer ").strip() or str(args.pop("token", ""))
        failure = self.owner._failure(method)
        if failure is not None:
            self.owner._record(Call(method, args, token, time.monotonic(), failure.status))
            if failure.drop:
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(2)
                return
            headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after else {}
            error = "ratelimited" if failure.status == 429 else "internal_error"
            refusal: JSON = {"ok": False, "error": failure.error or error}
            if failure.error == "missing_scope":
                refusal.update(needed=_SCOPE_OF.get(method, ""), provided="chat:write")
            body = json.dumps(refusal).encode()
            self._send(failure.status, body, "application/json", headers)
            return
        wait = self.owner._history_wait(method, token)
        if wait > 0:
            self.owner._record(Call(method, args, token, time.monotonic(), 429))
            body = json.dumps({"ok": False, "error": "ratelimited"}).encode()
            headers = {"Retry-After": str(max(1, round(wait)))}
            self._send(429, body, "application/json", headers)
            return
        answer = self.owner.answer(method, args, token)
        self.owner._record(Call(method, args, token, time.monotonic(), 200))
        self._send(200, json.dumps(answer).encode(), "application/json")

    def _send(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class SocketModeServer:
    """Slack's Socket Mode end on loopback: sends envelopes, records acknowledgements."""

    def __init__(self) -> None:
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._connections: list[ServerConnection] = []
        self.acks: dict[str, float] = {}  # envelope id -> when the ack arrived
        self.sent: dict[str, float] = {}  # envelope id -> when it was sent

    def start(self) -> Self:
        """Listen on a free loopback port."""
        self._server = serve(self._handle, "127.0.0.1", 0)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="socket-mode", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close every connection and stop listening."""
        if self._server is not None:
            self._server.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The ``ws://`` URL apps.connections.open hands out."""
        assert self._server is not None
        port = self._server.socket.getsockname()[1]
        return f"ws://127.0.0.1:{port}/link/?ticket={uuid.uuid4().hex}"

    def connected(self) -> int:
        """How many clients are connected."""
        with self._lock:
            return len(self._connections)

    def _handle(self, connection: ServerConnection) -> None:
        with self._lock:
            self._connections.append(connection)
        try:
            hello = {"type": "hello", "num_connections": 1, "debug_info": {"host": "test"}}
            connection.send(json.dumps(hello))
            for raw in connection:
                message = json.loads(raw)
                envelope = message.get("envelope_id")
                if envelope:
                    with self._lock:
                        self.acks.setdefault(envelope, time.monotonic())
        except ConnectionClosed:
            pass
        finally:
            with self._lock:
                self._connections.remove(connection)

    def send(self, payload: JSON, *, kind: str = "events_api", retry_attempt: int = 0) -> str:
        """Send ``payload`` in an envelope to every connected client; returns its envelope id.

        A retry of an earlier envelope carries the same payload with a higher ``retry_attempt``.
        """
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": retry_attempt,
            "retry_reason": "timeout" if retry_attempt else "",
            "payload": payload,
        }
        with self._lock:
            connections = list(self._connections)
            self.sent[envelope_id] = time.monotonic()
        if not connections:
            raise AssertionError("no Socket Mode client is connected")
        for connection in connections:
            connection.send(json.dumps(envelope))
        return envelope_id

    def ack_delay(self, envelope_id: str, timeout: float = 5.0) -> float:
        """Seconds between sending the envelope and its acknowledgement (waits for it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if envelope_id in self.acks:
                    return self.acks[envelope_id] - self.sent[envelope_id]
            time.sleep(0.01)
        raise AssertionError(f"envelope {envelope_id} was not acknowledged within {timeout}s")


_event_ids = itertools.count(1)


def event_payload(
    event: JSON, *, team: str = "T0001", event_id: str | None = None, shared: bool = False
) -> JSON:
    """An Events API ``event_callback`` around ``event``, as Slack sends it (``shared``: in a
    channel shared with another organisation)."""
    return {
        "token": "legacy-verification-token",
        "team_id": team,
        "api_app_id": "ACAIRN",
        "event": event,
        "type": "event_callback",
        "event_id": event_id or f"Ev{next(_event_ids):08d}",
        "event_time": int(time.time()),
        "authorizations": [
            {"team_id": team, "user_id": BOT_USER, "is_bot": True, "is_enterprise_install": False}
        ],
        "is_ext_shared_channel": shared,
    }


_action_clock = itertools.count(1)


def block_actions_payload(
    message: JSON,
    action_id: str,
    value: str,
    *,
    user: str = "UANN",
    team: str = "T0001",
    action_ts: str | None = None,
) -> JSON:
    """The ``block_actions`` payload Slack sends when ``user`` clicks the button ``action_id``
    (with ``value``) on the bot's ``message`` (as the stand-in keeps it)."""
    ts = action_ts or f"{1_700_000_000 + next(_action_clock)}.{next(_action_clock):06d}"
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team},
        "api_app_id": "ACAIRN",
        "token": "legacy-verification-token",
        "container": {
            "type": "message",
            "message_ts": message["ts"],
            "channel_id": message["channel"],
            "is_ephemeral": False,
            **({"thread_ts": message["thread_ts"]} if message.get("thread_ts") else {}),
        },
        "trigger_id": f"{next(_action_clock)}.1.abcdef",
        "team": {"id": team, "domain": "cairn-test"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": message["channel"], "name": message["channel"].lower()},
        "message": message,
        "state": {"values": {}},
        "response_url": f"https://hooks.slack.com/actions/{team}/1/x",
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "cairn_approval",
                "text": {"type": "plain_text", "text": action_id, "emoji": True},
                "value": value,
                "action_ts": ts,
            }
        ],
    }


def signed_headers(secret: str, body: bytes, *, timestamp: int | None = None) -> dict[str, str]:
    """The headers Slack signs a request body with (``v0`` HMAC-SHA256 of ``v0:ts:body``)."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    base = b"v0:" + ts.encode() + b":" + body
    signature = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature,
    }


@contextlib.contextmanager
def slack_stand_ins(team: str = "T0001") -> Iterator[SlackAPI]:
    """A Web API stand-in with a Socket Mode server behind apps.connections.open."""
    with SlackAPI(team=team) as api, SocketModeServer() as socket:
        api.socket = socket
        yield api
