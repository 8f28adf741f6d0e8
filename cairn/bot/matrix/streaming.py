"""Matrix's side of answers as they are written (ADR 0027): the first text of a reply is a
message in its thread, and each update an ``m.replace`` edit of it.

An edit's ``m.new_content`` is the whole message as a reply posted at once would be (Markdown
body, HTML ``formatted_body``, the mention of whom it answers); its own body is the same text
behind ``"* "``, the fallback the spec asks for, and it mentions nobody, so an edit notifies no
one again. The thread relation stays on the original event (an edit may not change it), and
reactions point at the original. ``room_send`` encrypts in encrypted rooms, edits too, leaving
the relation in the clear for the homeserver to aggregate.

The relay runs in a thread of its own while matrix-nio lives on the frontend's event loop: each
call is handed to that loop and waited for. A 429 is not slept through there (the client does
that for everything else): the call ends with :class:`~cairn.bot.streaming.Throttled`, and the
relay waits as long as the homeserver asked while the text keeps growing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Coroutine
from typing import Any, TypeVar

from nio import (
    AsyncClient,
    ErrorResponse,
    LocalProtocolError,
    RoomRedactResponse,
    RoomSendResponse,
    SendRetryError,
)

from cairn.bot.matrix.account import PLATFORM
from cairn.bot.matrix.records import Cause, EventRecords
from cairn.bot.matrix.render import message_content, replacement, split_text
from cairn.bot.streaming import LiveReply, Refused, Throttled
from cairn.core.settings import Settings

__all__ = ["MatrixWriter", "edit_content", "stream_txn_id"]

log = logging.getLogger(__name__)

# Longest wait for one call on the loop; past it the relay tries again later.
CALL_SECONDS = 30.0
# Error codes after which the same call cannot succeed.
_REFUSED = frozenset({"M_FORBIDDEN", "M_NOT_FOUND", "M_BAD_JSON", "M_TOO_LARGE", "M_UNKNOWN_TOKEN"})
_DEFAULT_RETRY_MS = 5000
# Most bytes of an edit's content: encrypted (base64, a third more) and in its envelope it must
# stay under Matrix's 64 KiB per event.
EDIT_BYTES = 40_000
_CAUSES_KEPT = 1000

T = TypeVar("T")

# Set inside the writer's own calls: a 429 then ends the call instead of being slept through.
_STREAMING: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "cairn_matrix_streaming", default=False
)


class _RateLimited(Exception):
    def __init__(self, retry_after_ms: int) -> None:
        super().__init__(f"rate limited for {retry_after_ms} ms")
        self.retry_after_ms = retry_after_ms


def stream_txn_id(cause: int, index: int) -> str:
    """The transaction id of part ``index`` of the streamed reply to ``cause``: the same after
    a restart, so that the homeserver drops a send it already took (and answers its event id)
    instead of showing a second message."""
    return f"cairn-stream-{cause}-{index}"


def edit_content(event_id: str, text: str, mentions: tuple[str, ...] = ()) -> dict[str, Any]:
    """The content of an ``m.replace`` edit making ``event_id`` show ``text``.

    ``m.new_content`` is the message as :func:`message_content` renders it, without the thread
    relation (the original keeps it); ``mentions`` go there, and the edit itself mentions no
    one, so that nobody is notified again by each edit. The fallback for clients without edits
    is the same text behind ``"* "``, shortened when the edit would not fit an event (it holds
    the text twice, and encrypted it grows by a third).
    """
    edit = replacement(event_id, message_content(text, mentions=mentions))
    if _json_bytes(edit) > EDIT_BYTES:
        edit.pop("format", None)
        edit.pop("formatted_body", None)
    keep = len(text)
    while _json_bytes(edit) > EDIT_BYTES and keep > 0:
        keep = keep * 3 // 4
        edit["body"] = "* " + text[:keep] + "…"
    return edit


def _json_bytes(content: dict[str, Any]) -> int:
    return len(json.dumps(content, ensure_ascii=False).encode("utf-8", "surrogatepass"))


class MatrixWriter:
    """Opens, edits and redacts streamed Matrix messages of one bot account.

    Usable once :meth:`bind` gave it the client and its loop; never call it on that loop.
    """

    platform = PLATFORM

    def __init__(self, settings: Settings, records: EventRecords) -> None:
        self.interval = settings.matrix.stream_interval
        self.max_updates = settings.matrix.stream_edits
        self.max_bytes = settings.matrix.message_bytes
        self.records = records
        self._client: AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._causes: OrderedDict[int, Cause] = OrderedDict()
        self._txn_ids: set[str] = set()  # sent by this process

    def bind(self, client: AsyncClient, loop: asyncio.AbstractEventLoop) -> None:
        """Send through ``client``, whose requests run on ``loop``."""
        client.add_response_callback(self._on_error, ErrorResponse)
        self._client, self._loop = client, loop

    def unbind(self) -> None:
        """The loop is ending: calls from now on fail at once."""
        self._client, self._loop = None, None

    def split(self, text: str) -> list[str]:
        """``text`` in parts that fit one message, cut as a reply posted at once is."""
        return split_text(text, self.max_bytes)

    # --- the calls -------------------------------------------------------------------------

    def open(self, reply: LiveReply, text: str, *, final: bool) -> str:
        """Post ``text`` in the reply's thread as the delivery would; returns its event id.

        Raises Throttled, Refused (not in the room, forbidden) or a connection error."""
        client = self._bound()
        if reply.channel not in client.rooms:
            raise Refused(f"the bot is not in {reply.channel}")
        cause = self._cause(reply)
        content = message_content(
            text,
            thread_root=reply.thread or None,
            in_reply_to=cause.reply_to,
            mentions=(cause.user,) if cause.user else (),
        )
        txn_id = stream_txn_id(reply.cause, len(reply.refs))
        with self._lock:
            if txn_id in self._txn_ids:  # a part posted anew (its message was deleted)
                txn_id += f"-{len(self._txn_ids)}"
            self._txn_ids.add(txn_id)
        return self._send(reply.channel, content, txn_id)

    def update(
        self, reply: LiveReply, ref: str, text: str, *, shown: str | None, final: bool
    ) -> str:
        """Edit message ``ref`` to show ``text`` whole (every edit carries the whole text, the
        final one too); returns ``ref``, which reactions keep pointing at."""
        if shown == text:
            return ref  # already what it shows (a Matrix message needs no closing edit)
        cause = self._cause(reply)
        content = edit_content(ref, text, (cause.user,) if cause.user else ())
        self._send(reply.channel, content, None)
        return ref

    def delete(self, reply: LiveReply, ref: str) -> None:
        """Redact message ``ref`` (the final answer needs fewer messages than were streamed)."""
        client = self._bound()
        response = self._call(client.room_redact(reply.channel, ref))
        if not isinstance(response, RoomRedactResponse):
            raise _translated(response)

    def status(self, reply: LiveReply, text: str) -> None:
        """Nothing: the bot is already shown typing while a worker answers."""

    # --- on the loop -----------------------------------------------------------------------

    def _send(self, room_id: str, content: dict[str, Any], txn_id: str | None) -> str:
        client = self._bound()
        response = self._call(
            client.room_send(
                room_id,
                "m.room.message",
                content,
                tx_id=txn_id,
                ignore_unverified_devices=True,  # as the delivery does
            )
        )
        if not isinstance(response, RoomSendResponse):
            raise _translated(response)
        return str(response.event_id)

    def _call(self, call: Coroutine[Any, Any, T]) -> T:
        """Run ``call`` on the client's loop and wait for it; translates what it raises."""
        loop = self._loop
        if loop is None or loop.is_closed():
            call.close()
            raise ConnectionError("the Matrix client is not running")
        future = asyncio.run_coroutine_threadsafe(_streaming(call), loop)
        try:
            return future.result(CALL_SECONDS)
        except concurrent.futures.TimeoutError:
            future.cancel()  # a late send would show stale text after newer edits
            raise TimeoutError(f"a Matrix call took over {CALL_SECONDS:.0f}s") from None
        except _RateLimited as exc:
            raise Throttled(max(0.1, exc.retry_after_ms / 1000)) from exc
        except (LocalProtocolError, SendRetryError) as exc:
            raise Refused(str(exc)) from exc

    def _bound(self) -> AsyncClient:
        client = self._client
        if client is None:
            raise ConnectionError("the Matrix client is not running")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None and running is self._loop:
            raise RuntimeError("MatrixWriter called on the client's own loop (it would block it)")
        return client

    def _cause(self, reply: LiveReply) -> Cause:
        """What the reply answers (read once per reply; a database read)."""
        with self._lock:
            cause = self._causes.get(reply.cause)
        if cause is None:
            cause = self.records.cause_of(reply.cause, reply.channel)
            with self._lock:
                self._causes[reply.cause] = cause
                while len(self._causes) > _CAUSES_KEPT:
                    self._causes.popitem(last=False)
        return cause

    async def _on_error(self, response: ErrorResponse) -> None:
        """Ends a call of this writer at a 429, which the client would otherwise sleep
        through (and send, late, text that newer edits already replaced)."""
        if _STREAMING.get() and response.status_code in ("M_LIMIT_EXCEEDED", 429, "429"):
            raise _RateLimited(int(response.retry_after_ms or _DEFAULT_RETRY_MS))


async def _streaming(call: Coroutine[Any, Any, T]) -> T:
    """``call``, marked as the writer's (its own task: the mark stays with it)."""
    _STREAMING.set(True)
    return await call


def _translated(response: ErrorResponse) -> Exception:
    """Refused for an error that will not pass, else an exception to try again after."""
    code = str(response.status_code or "")
    if code in _REFUSED:
        return Refused(f"{code}: {response.message}")
    return ConnectionError(f"Matrix answered {code or 'an error'}: {response.message}")
