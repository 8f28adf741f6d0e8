"""Answers as they are written, on a chat platform: a worker's stream pieces become a message
that grows (ADR 0027).

A frontend runs one :class:`StreamRelay`. It subscribes to its tenants' reply pieces
(:mod:`cairn.sessions.stream`), and for each reply it owns it opens a platform message at the
first text and updates it at a throttled rate (:attr:`StreamWriter.interval`), at most
:attr:`StreamWriter.max_updates` times per message, splitting across messages at the
platform's size. The writer is the platform's part: Slack streams or updates, Matrix edits.

Streaming is best effort on top of the outbox. What counts is the final reply, which the
frontend's delivery hands to :meth:`StreamRelay.final`: it edits the streamed messages into
the final text (deleting any left over, posting any more it needs) instead of posting new
ones. The messages a reply was streamed into are recorded in the database before more of it
is shown (:class:`~cairn.sessions.streamed.StreamedReplies`), so that a restarted frontend, or
another one, still edits them: one answer, complete, whatever was cut in between.

Frontends sharing Redis stream each reply once: the first to see a reply's first piece claims
it in the dedupe store and keeps the claim fresh while it streams; a final reply whose stream
another live frontend owns waits for it (:data:`BUSY`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

from cairn.bot.dedupe import Dedupe, claim_or_warn
from cairn.core.errors import first_line
from cairn.db import Database
from cairn.sessions.stream import ReplyStreams, StreamPiece, Subscription
from cairn.sessions.streamed import StreamedReplies

__all__ = [
    "BUSY",
    "LiveReply",
    "Refused",
    "RelayStats",
    "StreamRelay",
    "StreamWriter",
    "Throttled",
]

log = logging.getLogger(__name__)

# How long a frontend's claim on streaming a reply lasts without being refreshed.
OWNER_TTL = 10.0
OWNER_REFRESH = 3.0
# How long a posted reply's claim is kept, so that late pieces anywhere are not shown.
FINISHED_TTL = 60.0
# A reply streamed and never finished (its worker died and nobody retried) is forgotten after
# this long without a piece; its final reply, if one comes, still edits the recorded messages.
IDLE_SECONDS = 900.0
# Most messages one reply may open while it streams; the rest is posted with the final text.
MAX_MESSAGES = 8
_TICK = 0.05

Busy = Literal["busy"]
BUSY: Final[Busy] = "busy"


class Throttled(Exception):
    """The platform asks to slow down for ``seconds`` (Slack's 429, Matrix's M_LIMIT_EXCEEDED)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"rate limited for {seconds:.1f}s")
        self.seconds = seconds


class Refused(Exception):
    """The platform will not take this message (not allowed here, gone, malformed)."""


@dataclass
class LiveReply:
    """A reply being streamed: where it goes, its text so far and the messages showing it."""

    tenant: str
    cause: int
    channel: str
    thread: str
    user: str = ""
    agent: str = ""
    attempt: str = ""
    text: str = ""
    refs: list[str] = field(default_factory=list)
    shown: list[str | None] = field(default_factory=list)  # None: unknown (restarted)
    updates: list[int] = field(default_factory=list)
    closed: list[bool] = field(default_factory=list)  # in its final form (it may still change)
    next_at: float = 0.0  # monotonic time before which it is not updated again
    touched: float = field(default_factory=time.monotonic)
    refreshed: float = field(default_factory=time.monotonic)
    first_delta_at: float = 0.0  # epoch time of the first text piece
    calls: int = 0  # platform calls made for it
    dead: bool = False  # streaming gave up: the final reply shows it whole
    # The final reply is shown (or being shown): a piece still arriving, which the final text
    # overtook on its way, changes nothing (appended, it would show text after the answer).
    final: bool = False

    def restore(self, refs: list[str]) -> None:
        """Take over ``refs``, messages of this reply an earlier frontend opened (what they
        show is unknown)."""
        self.refs = list(refs)
        self.shown = [None] * len(refs)
        self.updates = [0] * len(refs)
        self.closed = [False] * len(refs)

    @classmethod
    def of(cls, piece: StreamPiece) -> LiveReply:
        """A new live reply for the reply ``piece`` belongs to."""
        return cls(
            piece.tenant,
            piece.cause,
            piece.channel,
            piece.thread,
            piece.user,
            piece.agent,
            piece.attempt,
        )


class StreamWriter(Protocol):
    """A platform's side of streaming: how a message opens, grows, ends and goes."""

    platform: str
    interval: float  # least seconds between two updates of one reply
    max_updates: int  # most updates of one message before its final edit

    def split(self, text: str) -> list[str]:
        """``text`` cut into parts that each fit one message."""
        ...

    def open(self, reply: LiveReply, text: str, *, final: bool) -> str:
        """Post a new message of ``reply`` showing ``text``; returns its reference. ``final``:
        it will not change again (post it plainly). Raises Throttled or Refused."""
        ...

    def update(
        self, reply: LiveReply, ref: str, text: str, *, shown: str | None, final: bool
    ) -> str:
        """Make message ``ref`` show ``text`` (it shows ``shown``; None: unknown), in its final
        form if ``final``; returns the message's reference from now on (it may change, e.g.
        when a Slack stream becomes a plain message). Raises Throttled or Refused."""
        ...

    def delete(self, reply: LiveReply, ref: str) -> None:
        """Remove message ``ref`` (a reply that ended shorter than it was streamed)."""
        ...

    def status(self, reply: LiveReply, text: str) -> None:
        """Say what the agent is doing now, where the platform shows such a thing."""
        ...


class RelayStats:
    """What a relay measured, for ``cairn bench stream``: bounded, oldest dropped."""

    def __init__(self, size: int = 20_000) -> None:
        self.first_visible_ms: deque[float] = deque(maxlen=size)
        self.delta_ms: deque[float] = deque(maxlen=size)
        self.calls_per_reply: deque[int] = deque(maxlen=size)


class StreamRelay:
    """Shows the replies of ``tenant`` (every tenant starting so, with ``prefix``) as written."""

    def __init__(
        self,
        streams: ReplyStreams,
        tenant: str,
        writer: StreamWriter,
        db: Database,
        dedupe: Dedupe,
        *,
        prefix: bool = False,
        speaks_for: Callable[[str], bool] | None = None,
        stats: RelayStats | None = None,
    ) -> None:
        """``speaks_for(agent)`` says whether this frontend posts the replies of ``agent`` (an
        agent with a bot identity of its own is streamed by its own frontend); None: all."""
        self.streams = streams
        self.tenant = tenant
        self.prefix = prefix
        self.writer = writer
        self.registry = StreamedReplies(db)
        self.dedupe = dedupe
        self.speaks_for = speaks_for
        self.stats = stats
        self._lock = threading.RLock()
        self._live: dict[int, LiveReply] = {}
        self._others: dict[int, float] = {}  # replies another frontend streams -> when asked
        self._finished: dict[int, float] = {}  # replies already final -> when
        self._channel_at: dict[str, float] = {}  # channel -> when it may be updated again
        self._subscription: Subscription | None = None
        self._thread: threading.Thread | None = None

    # --- the thread ------------------------------------------------------------------------

    def start(self, stop: threading.Event) -> None:
        """Subscribe now (nothing published from here on is missed) and relay until ``stop``."""
        self._subscription = self.streams.subscribe(self.tenant, prefix=self.prefix)
        self._thread = threading.Thread(
            target=self._run, args=(stop,), name=f"stream-{self.writer.platform}", daemon=True
        )
        self._thread.start()

    def join(self, timeout: float) -> None:
        """Wait for the relay thread to end."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self, stop: threading.Event) -> None:
        assert self._subscription is not None
        try:
            while not stop.is_set():
                piece = self._subscription.get(timeout=_TICK)
                try:
                    if piece is not None:
                        self.take(piece)
                    self.flush_due()
                except Exception:  # streaming is a courtesy: it never stops the frontend
                    log.exception("streaming a reply failed")
        finally:
            self._subscription.close()

    # --- pieces in -------------------------------------------------------------------------

    def take(self, piece: StreamPiece) -> None:
        """Fold ``piece`` into its reply; its first text is shown at once."""
        now = time.monotonic()
        if piece.kind == "text" and self.stats is not None and piece.at:
            self.stats.delta_ms.append(max(0.0, (time.time() - piece.at) * 1000))
        with self._lock:
            live = self._live.get(piece.cause)
            if live is None:
                live = self._adopt(piece)
                if live is None:
                    return
            live.touched = now
            if live.final:
                return
            if piece.attempt != live.attempt:  # the turn runs again (its worker died)
                live.attempt, live.text = piece.attempt, ""
            if piece.kind == "text":
                live.text += piece.text
                if not live.first_delta_at:
                    live.first_delta_at = piece.at or time.time()
            elif piece.kind == "restart":
                live.text = ""
            elif piece.kind == "status" and not live.dead:
                self._status(live, piece.text)
            if piece.kind == "text" and not live.refs and not live.dead:
                live.next_at = 0.0  # the first text shows at once
            self._flush(live, now)

    def _adopt(self, piece: StreamPiece) -> LiveReply | None:
        """Start streaming the reply of ``piece`` if no other frontend does; None if not ours."""
        if piece.cause in self._finished or piece.kind not in ("text", "status"):
            return None
        if self.speaks_for is not None and not self.speaks_for(piece.agent):
            return None
        asked = self._others.get(piece.cause)
        if asked is not None and time.monotonic() - asked < OWNER_TTL:
            return None  # another frontend streams it; ask again once its claim could lapse
        if not claim_or_warn(self.dedupe, self._owner_key(piece.tenant, piece.cause), OWNER_TTL):
            self._others[piece.cause] = time.monotonic()
            return None
        live = LiveReply.of(piece)
        try:
            refs = self.registry.refs(piece.cause)  # an earlier frontend's messages of it
        except Exception as exc:
            log.warning("answers will not stream for now (database: %s)", first_line(exc))
            live.dead = True
            refs = []
        live.restore(refs)
        self._live[piece.cause] = live
        return live

    def flush_due(self) -> None:
        """Show what the replies whose throttle has passed wrote since; keep claims fresh;
        forget replies long idle."""
        now = time.monotonic()
        with self._lock:
            for live in list(self._live.values()):
                if now - live.touched > IDLE_SECONDS:
                    self._live.pop(live.cause, None)
                    continue
                if now - live.refreshed > OWNER_REFRESH:
                    live.refreshed = now
                    self._refresh_claim(live)
                self._flush(live, now)
            for cause in [c for c, t in self._others.items() if now - t > OWNER_TTL]:
                self._others.pop(cause, None)
            for cause in [c for c, t in self._finished.items() if now - t > IDLE_SECONDS]:
                self._finished.pop(cause, None)
            for channel in [c for c, t in self._channel_at.items() if t < now]:
                self._channel_at.pop(channel, None)

    # --- showing ---------------------------------------------------------------------------

    def _flush(self, live: LiveReply, now: float) -> None:
        if live.dead or live.final or not live.text.strip():
            return
        # The platform's limits are per channel (Slack: about a message a second), so replies
        # streaming side by side in one channel share its pace; a reply's first message is
        # not held back (it is the one message a reply would post anyway).
        paced = self._channel_at.get(live.channel, 0.0) if live.refs else 0.0
        if now < max(live.next_at, paced):
            return
        try:
            changed = self._show(live, live.text, final=False)
        except Throttled as exc:
            live.next_at = now + exc.seconds
            self._channel_at[live.channel] = now + exc.seconds
            log.info("the platform asks to slow down: %s", exc)
            return
        except Refused as exc:
            log.info("reply %s will not stream here: %s", live.cause, exc)
            live.dead = True
            return
        except Exception as exc:  # unreachable for a moment: try again a little later
            live.next_at = now + 2 * self.writer.interval
            log.debug("a streamed update failed: %s", first_line(exc))
            return
        if changed:
            live.next_at = now + self.writer.interval
            self._channel_at[live.channel] = now + self.writer.interval / 2

    def _show(self, live: LiveReply, text: str, *, final: bool) -> bool:
        """Make the reply's messages show ``text``; returns whether any platform call was
        made. Raises what the writer raises (Refused only from opening a message)."""
        parts = self.writer.split(text)
        called = False
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            if index >= len(live.refs):
                if not final and len(live.refs) >= MAX_MESSAGES:
                    return called
                self._open(live, part, final=final or not last)
                called = True
                continue
            close = final or not last
            if live.shown[index] == part and (live.closed[index] or not close):
                continue
            if not final and live.updates[index] >= self.writer.max_updates:
                continue
            try:
                ref = self.writer.update(
                    live,
                    live.refs[index],
                    part,
                    shown=live.shown[index],
                    final=close,
                )
            except Refused:
                if not final:
                    raise
                # The message is gone (deleted by someone): the final part is posted anew.
                ref = self._post(live, part)
            self._count(live)
            called = True
            if ref != live.refs[index]:
                live.refs[index] = ref
                self._record(live)
            live.shown[index] = part
            live.updates[index] += 1
            live.closed[index] = close
        if final:
            for ref in live.refs[len(parts) :]:
                try:
                    self.writer.delete(live, ref)
                    self._count(live)
                except Refused:
                    pass  # already gone
            del live.refs[len(parts) :]
        return called

    def _open(self, live: LiveReply, text: str, *, final: bool) -> None:
        ref = self._post(live, text, final=final)
        live.refs.append(ref)
        live.shown.append(text)
        live.updates.append(0)
        live.closed.append(final)
        try:
            self._record(live)
        except Exception as exc:
            if final:  # the delivery records the reply; a crash now may repeat this part
                log.warning("could not record a streamed message: %s", first_line(exc))
                return
            # Not recorded, the message could outlive a restart as a second answer: take it
            # back and let the final reply come whole.
            log.warning("stopped streaming reply %s (database: %s)", live.cause, first_line(exc))
            live.dead = True
            try:
                self.writer.delete(live, ref)
            except Exception as undo:
                log.warning("could not take back a streamed message: %s", first_line(undo))
            for column in (live.refs, live.shown, live.updates, live.closed):
                column.pop()

    def _post(self, live: LiveReply, text: str, *, final: bool = True) -> str:
        if live.calls == 0 and self.stats is not None and live.first_delta_at:
            self.stats.first_visible_ms.append(max(0.0, (time.time() - live.first_delta_at) * 1000))
        ref = self.writer.open(live, text, final=final)
        self._count(live)
        return ref

    def _count(self, live: LiveReply) -> None:
        live.calls += 1

    def _record(self, live: LiveReply) -> None:
        self.registry.record(live.cause, live.tenant, self.writer.platform, live.refs)

    def _status(self, live: LiveReply, text: str) -> None:
        try:
            self.writer.status(live, text)
        except Exception as exc:  # a status is a courtesy
            log.debug("could not show the status: %s", first_line(exc))

    # --- the final reply -------------------------------------------------------------------

    def final(
        self, tenant: str, cause: int, channel: str, thread: str, text: str
    ) -> list[str] | Busy | None:
        """Show the final ``text`` of the reply to ``cause`` in the messages it was streamed
        into; returns their references (the first is what reactions point at), None when it
        was not streamed (post it as usual), or BUSY when another frontend streams it now.

        Raises what the writer raises (Throttled: try again after that long).
        """
        with self._lock:
            live = self._live.get(cause)
            if live is None:
                if cause in self._finished:  # claimed here before, to be posted whole
                    return None
                refs = self.registry.refs(cause)
                # Another frontend may be opening its first message of this reply right now
                # (claimed, not yet recorded): the claim, not the record, says who shows it.
                owned = claim_or_warn(self.dedupe, self._owner_key(tenant, cause), OWNER_TTL)
                if not owned:
                    return BUSY
                if not refs:
                    # Posted whole: a piece still on its way, here or at another frontend,
                    # must not open a second message (the claim is held until done()).
                    self._finished[cause] = time.monotonic()
                    return None
                live = LiveReply(tenant, cause, channel, thread)
                live.restore(refs)
                self._live[cause] = live
            if not live.refs:
                self._live.pop(cause, None)
                self._finished[cause] = time.monotonic()
                return None
            live.text, live.final = text, True
            self._show(live, text, final=True)
            return list(live.refs)

    def done(self, tenant: str, cause: int) -> None:
        """The final reply to ``cause`` is posted and recorded: forget its stream."""
        with self._lock:
            live = self._live.pop(cause, None)
            self._finished[cause] = time.monotonic()
            if self.stats is not None and live is not None and live.calls:
                self.stats.calls_per_reply.append(live.calls)
        try:
            self.registry.forget(cause)
        except Exception as exc:  # a row left behind only costs a lookup
            log.debug("could not forget streamed reply %s: %s", cause, first_line(exc))
        # Kept a while rather than released: a piece another frontend receives late must not
        # open a message for a reply that is already posted.
        try:
            self.dedupe.put(self._owner_key(tenant, cause), "done", FINISHED_TTL)
        except Exception as exc:
            log.debug("could not mark streamed reply %s done: %s", cause, first_line(exc))

    def streaming(self) -> Iterable[int]:
        """The causes of the replies this relay streams now."""
        with self._lock:
            return list(self._live)

    # --- ownership -------------------------------------------------------------------------

    def _owner_key(self, tenant: str, cause: int) -> str:
        return f"stream:{self.writer.platform}:{tenant}:{cause}"

    def _refresh_claim(self, live: LiveReply) -> None:
        try:
            self.dedupe.put(self._owner_key(live.tenant, live.cause), "1", OWNER_TTL)
        except Exception as exc:
            log.debug("could not refresh a stream claim: %s", first_line(exc))
