"""The console frontend: a chat thread in the terminal, or a scripted one on standard input.

Each line is a message from the current user in the current thread, unless it starts with
``/`` (see ``/help``). Replies are read back from the outbox, so the console shows exactly what
a Slack or Matrix thread would receive, in-process or through Celery workers alike.
"""

from __future__ import annotations

import getpass
import json
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO, TypeVar

from sqlmodel import select

from cairn.bot.pipeline import Pipeline
from cairn.core.bounded import bounded_int
from cairn.core.errors import CairnError, InvalidInput, first_line
from cairn.core.gate import gated
from cairn.core.reactions import reaction_effect
from cairn.core.text import printable
from cairn.db import is_unavailable
from cairn.db.models import EventStatus, SessionEvent
from cairn.sessions.approvals import Approvals
from cairn.sessions.events import Attachment, ChatEvent, EventType, checked_name
from cairn.sessions.ingest import Admission
from cairn.sessions.outbox import Outbox
from cairn.sessions.stream import StreamPiece

__all__ = ["COMMANDS", "Console"]

_T = TypeVar("_T")

PLATFORM = "console"
CHANNEL = "console"

COMMANDS = """\
/thread NAME     switch to thread NAME (each thread is its own session)
/user NAME       speak as NAME from now on
/agent NAME      address agent NAME from now on ("ops: ..." addresses one message)
/react EMOJI     react to the bot's last message in this thread (e.g. /react +1, /react x)
/unreact EMOJI   remove that reaction again
/approve [N]     approve request N for a tool call (default: this thread's oldest open one)
/deny [N]        deny it: the tool does not run
/paste           start a multi-line message; /end sends it
/attach PATH [TEXT]  send the file at PATH (a log, a trace, a config), with TEXT if given
/help            this list
/quit            leave (end of input works too)"""


@dataclass
class _State:
    thread: str
    user: str
    agent: str | None  # None: routed ("ops: ..." or the default agent)
    last_bot_message: dict[str, str] = field(default_factory=dict)
    paste: list[str] | None = None


class Console:
    """One console conversation, writing bot output to ``out`` (text, or JSON lines)."""

    def __init__(
        self,
        pipeline: Pipeline,
        *,
        out: TextIO = sys.stdout,
        err: TextIO = sys.stderr,
        as_json: bool = False,
        interactive: bool = False,
        thread: str = "main",
        user: str | None = None,
        agent: str | None = None,
        stream: bool = False,
    ) -> None:
        self.pipeline = pipeline
        self.rt = pipeline.rt
        self.outbox = Outbox(self.rt.db, PLATFORM)  # the console speaks for every agent
        self.out, self.err = out, err
        self.as_json = as_json
        self.interactive = interactive
        self.state = _State(thread, user or _login_name(), agent)
        # Answers as they are written: on a terminal (or with --stream), and as "delta"
        # objects in JSON only with --stream, so that scripts reading replies see no change.
        streaming = stream if as_json else (stream or interactive)
        self._pieces = self.rt.streams.subscribe(self.tenant) if streaming else None
        self._streamed: dict[int, str] = {}  # cause -> the text shown as it was written
        self._thinking_shown = False
        # Output comes from this thread and from the one that shows what a previous run left
        # pending (docs/adr/0037): one line at a time.
        self._writing = threading.RLock()
        self._done = threading.Event()
        # Replies still owed: the events whose answer was not shown yet (their wait timed out,
        # or a previous run left them pending), with their thread when known. /quit and the
        # end of input wait for them (CAIRN_QUIT_TIMEOUT).
        self._owed: dict[int, str | None] = {}
        self._owed_lock = threading.Lock()
        self.abandoned = 0  # replies given up on at the end (shown by the next run)

    @property
    def tenant(self) -> str:
        """The console's tenant (CAIRN_CONSOLE_TENANT)."""
        return self.rt.settings.console_tenant

    # --- the loop -----------------------------------------------------------------------

    def run(self, lines: Iterable[str]) -> int:
        """Handle ``lines`` until /quit or the end; returns the process exit code."""
        self._deliver_leftovers()
        follower = self._follow_recovered()
        failures = 0
        if self.interactive:
            self._hint(
                f"Cairn console: thread '{self.state.thread}', you are "
                f"{self.state.user}. /help lists commands, /quit leaves."
            )
            self._prompt()
        for raw in lines:
            line = raw.rstrip("\n")
            try:
                if not self.handle(line):
                    break
            except CairnError as exc:
                failures += 1
                self._emit("error", str(exc))
            self._show_owed_ready()
            if self.interactive:
                self._prompt()
        if self.state.paste is not None:
            self._emit("error", "input ended inside /paste; that message was not sent")
            failures += 1
        if follower is not None:
            self._done.set()
            follower.join()
        if not self._settle():
            failures += 1
        return 1 if failures and not self.interactive else 0

    def handle(self, line: str) -> bool:
        """Handle one line; returns False when the conversation should end."""
        if self.state.paste is not None:
            if line.strip() == "/end":
                text, self.state.paste = "\n".join(self.state.paste), None
                self.say(text)
            else:
                self.state.paste.append(line)
            return True
        stripped = line.strip()
        if not stripped:
            return True
        if stripped.startswith("/") and not stripped.startswith("//"):
            return self._command(stripped)
        self.say(stripped.removeprefix("/"))
        return True

    def _command(self, line: str) -> bool:
        name, _, arg = line[1:].partition(" ")
        arg = arg.strip()
        if name in {"quit", "exit"}:
            return False
        if name == "help":
            self._hint(COMMANDS)
        elif name == "attach":
            if not arg:
                raise CairnError("/attach needs a file, e.g. /attach /var/log/app.log")
            path, _, text = arg.partition(" ")
            self.say(text.strip(), attachments=(self._attachment(path),))
        elif name == "paste":
            self.state.paste = []
            self._hint("pasting: end with /end on a line of its own")
        elif name in {"thread", "user", "agent"}:
            if not arg:
                raise CairnError(f"/{name} needs a name, e.g. /{name} ops")
            # Refused before it is used: the previous name stays, and the conversation goes on.
            setattr(self.state, name, checked_name(name, arg))
            self._hint(f"{name} is now {arg}")
        elif name in {"react", "unreact"}:
            if not arg:
                raise CairnError(f"/{name} needs an emoji, e.g. /{name} +1")
            self.react(arg, removed=name == "unreact")
        elif name in {"approve", "deny"}:
            self.decide(name, arg)
        else:
            raise CairnError(f"unknown command /{name}; /help lists the commands")
        return True

    # --- messages and reactions ---------------------------------------------------------

    def say(self, text: str, attachments: tuple[Attachment, ...] = ()) -> None:
        """Send ``text`` (and ``attachments``) as the current user and print what the bot
        answers."""
        event = self._event(text=text, agent=self.state.agent, attachments=attachments)
        result = self._patiently(lambda: self.pipeline.accept(event))
        if result.admission is Admission.QUEUED:
            self._await(result.event_row)

    def _attachment(self, path: str) -> Attachment:
        """The file at ``path``, read unless it is larger than CAIRN_ATTACHMENT_MAX_BYTES (the
        pipeline refuses it then, with the reason); CairnError when it can't be read."""
        file = Path(path).expanduser()
        if file.is_dir():
            raise CairnError(f"{path} is a folder; /attach takes a file")
        try:
            size = file.stat().st_size
            too_large = size > self.rt.settings.attachment_max_bytes
            data = None if too_large else file.read_bytes()
        except OSError as exc:
            raise CairnError(f"can't read {path}: {exc.strerror or exc}") from None
        return Attachment(file.name, size=size, data=data)

    def _event(self, **fields: Any) -> ChatEvent:
        """A ChatEvent of the current user in the current thread of this console."""
        return ChatEvent(
            platform=PLATFORM,
            tenant=self.tenant,
            channel=CHANNEL,
            thread=self.state.thread,
            user=self.state.user,
            event_id=uuid.uuid4().hex,
            # The console is one conversation, the operator's own: what is said there is the
            # console tenant's workspace memory (Slack DMs and private rooms stay private).
            private=False,
            conversation=f"console thread {self.state.thread}",
            **fields,
        )

    def react(self, emoji: str, *, removed: bool = False) -> None:
        """React to (or un-react from) the bot's last message in this thread."""
        target = self.state.last_bot_message.get(self.state.thread)
        if target is None:
            raise CairnError("there is no bot message in this thread to react to yet")
        event = self._event(
            type=EventType.REACTION_REMOVED if removed else EventType.REACTION_ADDED,
            reaction=emoji,
            target_id=target,
        )
        name = event.reaction or ""  # the short name, as the worker sees it
        result = self._patiently(lambda: self.pipeline.accept(event))
        effect = reaction_effect(name, self.rt.settings)
        if result.admission is not Admission.QUEUED:
            self._emit(
                "reaction",
                f":{name}: {result.admission.value}",
                emoji=name,
                effect=effect,
                status=result.admission.value,
            )
            return
        acks = self._await(result.event_row, quiet_kinds={"ack"})
        status = "handled" if effect else "ignored"
        text = acks[0] if acks else f":{name}: {status}"
        self._emit("reaction", text, emoji=name, effect=effect, status=status, removed=removed)

    def decide(self, decision: str, number: str = "") -> None:
        """Approve or deny request ``number`` for a held tool call (this thread's oldest open
        one when empty), and print what came of it.

        The console is the operator's own terminal: its user counts as an admin, so anyone
        CAIRN_MCP_APPROVERS or a server's ``approvers`` name by "admins" may decide here; a
        list of people is checked against the current /user.
        """
        if number:
            try:
                number = str(bounded_int(number, "a request number"))
            except InvalidInput as exc:
                example = f"/{decision} takes a request number, e.g. /{decision} 3"
                raise InvalidInput(f"{example}: {exc}") from None
        else:
            waiting = self._patiently(
                lambda: Approvals(self.rt.db).open_in(self.tenant, CHANNEL, self.state.thread)
            )
            if not waiting:
                raise CairnError("no request in this thread is waiting for a decision")
            number = str(waiting[0].id)
        event = self._event(
            type=EventType.DECISION, decision=decision, target_id=number, admin=True
        )
        result = self._patiently(lambda: self.pipeline.accept(event))
        if result.admission is Admission.DUPLICATE:
            self._emit("decision", f"request #{number}: already taken", status="duplicate")
            return
        if result.answer:
            self._emit("decision", result.answer, approval=int(number), status="refused")
        if result.event_row is not None:
            self._await(result.event_row)

    def _await(self, event_row: int | None, quiet_kinds: set[str] | None = None) -> list[str]:
        """Wait until the event is handled, then print its outbound messages."""
        if event_row is None:
            return []
        started = time.monotonic()
        deadline = started + self.rt.settings.reply_timeout
        delay, status_shown = 0.02, False
        while True:
            if self._patiently(lambda: self._handled(event_row)):
                break
            if not status_shown and time.monotonic() - started > 0.3:
                status_shown = True
                if event_row not in self._streamed:
                    self._thinking(shown=True)
            if time.monotonic() > deadline:
                self._thinking(shown=False)
                with self._owed_lock:
                    self._owed[event_row] = self.state.thread
                raise CairnError(
                    f"no answer within {self.rt.settings.reply_timeout:.0f}s "
                    "(CAIRN_REPLY_TIMEOUT); is a worker running? It will be shown when it comes."
                )
            self._follow(event_row, delay)
            delay = min(delay * 1.5, 0.25)
        self._follow(event_row, 0.0)  # what was written just before the end
        self._thinking(shown=False)
        return self._deliver(cause=event_row, quiet_kinds=quiet_kinds or set())

    def _follow(self, cause: int | Iterable[int], wait: float) -> None:
        """Show the pieces of ``cause``'s answer (or of several causes') written so far,
        waiting up to ``wait`` for the first; without a subscription, just wait."""
        if self._pieces is None:
            time.sleep(wait)
            return
        causes = {cause} if isinstance(cause, int) else set(cause)
        piece = self._pieces.get(wait)
        while piece is not None:
            if piece.cause in causes:
                self._show_piece(piece)
            piece = self._pieces.get(0.0)

    def _show_piece(self, piece: StreamPiece) -> None:
        if piece.kind == "end":
            return
        piece = replace(piece, text=gated(piece.text))
        shown = self._streamed.get(piece.cause)
        if self.as_json:
            if piece.kind == "text":
                self._streamed[piece.cause] = (shown or "") + piece.text
                self._emit("delta", piece.text, cause=piece.cause)
            elif shown is not None:  # a restart matters only once something was shown
                self._streamed.pop(piece.cause)
                self._emit("delta", "", cause=piece.cause, restart=True)
            return
        if piece.kind == "restart":
            if shown:
                self.out.write("\n  (starting over)\n")
                self.out.flush()
            self._streamed.pop(piece.cause, None)
            return
        if shown is None:
            self._thinking(shown=False)
            self.out.write(printable(f"{self.state.agent or 'cairn'}> "))
            shown = ""
        self.out.write(printable(piece.text))
        self.out.flush()
        self._streamed[piece.cause] = shown + piece.text

    def _ready(self, causes: Iterable[int]) -> list[int]:
        """Those of ``causes`` that have been handled."""
        return self._patiently(lambda: [c for c in causes if self._handled(c)])

    def _handled(self, event_row: int) -> bool:
        row = self.pipeline.log.event(event_row)
        return row is not None and row.status != EventStatus.PENDING

    def _patiently(self, work: Callable[[], _T]) -> _T:
        """Run ``work``; while the database is unavailable, say so once and try again.

        What ``work`` does must be safe to repeat (an event with the same id is logged once).
        Other errors are raised as they are.
        """
        delay, since = 0.25, 0.0
        while True:
            try:
                result = work()
            except Exception as exc:
                if not is_unavailable(exc):
                    raise
                if not since:
                    since = time.monotonic()
                    self._status(
                        f"the database is unavailable ({first_line(exc)}); "
                        "waiting for it, nothing you typed is lost"
                    )
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            if since:
                self._status(f"the database is back after {time.monotonic() - since:.0f}s")
            return result

    def _deliver(self, *, cause: int | None, quiet_kinds: set[str]) -> list[str]:
        return self._patiently(lambda: self._deliver_now(cause, quiet_kinds))

    def _deliver_now(self, cause: int | None, quiet_kinds: set[str]) -> list[str]:
        quiet: list[str] = []
        for reply in self.outbox.replies(tenant=self.tenant, cause=cause, limit=1000):
            assert reply.outbound_id is not None
            ref = f"console:{reply.outbound_id}"
            if not self.outbox.mark_sent(reply.outbound_id, ref):
                continue  # another console showed it
            if reply.kind in quiet_kinds:
                quiet.append(reply.text)
                continue
            if reply.kind != "ack":
                self.state.last_bot_message[reply.thread] = ref
            streamed = self._streamed.pop(cause, None) if cause is not None else None
            if streamed is not None and not self.as_json:
                self.out.write("\n")  # the streamed answer's line ends here
                self.out.flush()
                if reply.kind == "reply" and streamed.strip() == reply.text.strip():
                    continue  # shown already, as it was written
            failed = reply.kind == "error"  # the bot's apology is still a reply
            extra: dict[str, Any] = {"failed": True} if failed else {}
            text = reply.text
            if reply.kind == "approval":
                number = reply.data.get("approval")
                extra["approval"] = number
                text += f" Answer with /approve {number} or /deny {number}."
            self._emit(
                "reply" if failed else reply.kind,
                text,
                id=reply.outbound_id,
                thread=reply.thread,
                agent=reply.agent,
                **extra,
            )
        return quiet

    def _deliver_leftovers(self) -> None:
        """Show replies that a previous run produced but never printed."""
        self._deliver(cause=None, quiet_kinds=set())

    def _follow_recovered(self) -> threading.Thread | None:
        """Show the replies to what a previous run took in and did not finish (the pipeline
        queued it again at start) as soon as each is handled, while this console runs, from a
        thread of its own; None when nothing was left pending."""
        left = self._patiently(self._pending_causes)
        if not left:
            return None
        follower = threading.Thread(
            target=self._show_when_handled, args=(left,), name="console-recovered", daemon=True
        )
        follower.start()
        return follower

    def _pending_causes(self) -> list[int]:
        with self.rt.db.session() as s:
            rows = s.exec(
                select(SessionEvent.id).where(
                    SessionEvent.tenant_id == self.tenant,
                    SessionEvent.status == EventStatus.PENDING,
                )
            ).all()
        return [int(r) for r in rows if r is not None]

    def _show_when_handled(self, causes: list[int]) -> None:
        """Show each recovered cause's replies once it is handled, until the console ends;
        those not shown by then are left in ``_owed`` for :meth:`_settle`."""
        with self._owed_lock:
            self._owed.update(dict.fromkeys(causes))
        while not self._done.is_set():
            with self._owed_lock:
                recovered = [c for c in causes if c in self._owed]
            if not recovered:
                return
            for cause in self._ready(recovered):
                with self._owed_lock:
                    self._owed.pop(cause, None)
                self._deliver(cause=cause, quiet_kinds=set())
            self._done.wait(0.1)

    def _show_owed_ready(self) -> None:
        """Show the replies owed whose events have been handled since (between two lines)."""
        with self._owed_lock:
            owed = list(self._owed)
        if not owed:
            return
        for cause in self._ready(owed):
            with self._owed_lock:
                self._owed.pop(cause, None)
            self._deliver(cause=cause, quiet_kinds=set())

    def _settle(self) -> bool:
        """At /quit or the end of input: wait up to CAIRN_QUIT_TIMEOUT for the replies still
        owed, showing each as it comes; False (after saying so, and counting them in
        ``abandoned``) when some did not come in time or Ctrl-C cut the wait short.

        A reply given up on is not lost: it stays in the outbox (or its message pending),
        and the next ``cairn chat`` shows it.
        """
        with self._owed_lock:
            owed = dict(self._owed)
        if not owed:
            return True
        limit = self.rt.settings.quit_timeout
        self._status(
            f"waiting up to {limit:g}s (CAIRN_QUIT_TIMEOUT) for {_replies(len(owed))} "
            "still owed" + (": Ctrl-C leaves now" if self.interactive else "")
        )
        deadline = time.monotonic() + limit
        try:
            while owed and time.monotonic() < deadline:
                for cause in self._ready(owed):
                    self._follow(cause, 0.0)
                    del owed[cause]
                    self._deliver(cause=cause, quiet_kinds=set())
                if owed:
                    self._follow(owed, min(0.1, max(0.0, deadline - time.monotonic())))
        except KeyboardInterrupt:
            pass
        self._thinking(shown=False)
        if not owed:
            return True
        self.abandoned = len(owed)
        threads = sorted({t for t in owed.values() if t is not None})
        where = f" in thread {', '.join(threads)}" if threads else ""
        self._emit(
            "error",
            f"gave up after {limit:g}s (CAIRN_QUIT_TIMEOUT) waiting for "
            f"{_replies(len(owed))}{where}; leaving without "
            f"{'it' if len(owed) == 1 else 'them'}: the next `cairn chat` shows "
            f"{'it' if len(owed) == 1 else 'them'}",
            owed=sorted(owed),
        )
        return False

    # --- output -------------------------------------------------------------------------

    def _emit(self, kind: str, text: str, **fields: Any) -> None:
        text = gated(text)  # the console is a platform too: nothing shown skips the gate
        with self._writing:
            self._write(kind, text, fields)

    def _write(self, kind: str, text: str, fields: dict[str, Any]) -> None:
        if self.as_json:
            record = {"type": kind, "text": text, "thread": self.state.thread, **fields}
            self.out.write(printable(json.dumps(record, ensure_ascii=False)) + "\n")
        elif kind == "reply":
            self.out.write(printable(f"{fields.get('agent') or 'cairn'}> {text}") + "\n")
        elif kind == "error":
            self.err.write(printable(f"error: {text}") + "\n")
        else:
            self.out.write(printable(f"  [{kind}] {text}") + "\n")
        self.out.flush()

    def _status(self, text: str) -> None:
        """A line about Cairn itself, on standard error (scripts read standard output)."""
        self.err.write(f"cairn: {text}\n")
        self.err.flush()

    def _hint(self, text: str) -> None:
        if self.interactive and not self.as_json:
            self.err.write(text + "\n")
            self.err.flush()

    def _prompt(self) -> None:
        if not self.as_json:
            pasting = self.state.paste is not None
            self.err.write("... " if pasting else f"{self.state.user}@{self.state.thread}> ")
            self.err.flush()

    def _thinking(self, shown: bool) -> None:
        """Show (or clear) a status line while the bot works, on a terminal only."""
        if self.interactive and not self.as_json and shown != self._thinking_shown:
            self._thinking_shown = shown
            self.err.write("  (thinking...)" if shown else "\r\033[K")
            self.err.flush()


def _replies(count: int) -> str:
    return "1 reply" if count == 1 else f"{count} replies"


def _login_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "you"
