"""``cairn bench secrets``: does a credential said to the bot survive anywhere?

A corpus (``secrets_corpus.json``: credentials of many kinds and languages, some split over two
messages, and honest ops texts worded close to them) is told to the bot on a scratch runtime,
each entry in a thread of its own in a public channel (the worst case: team memory), by a few
people in turn: the first message as "remember ...", the second as is, through the real ingest
and turn. Each first message is also sent as a memo from agent cairn to agent review, whose
inbox is then listed as ``cairn memo list`` lists it; then every session is ended (learnings
extracted) and the memories exported to a file, as the commands do.

Every trace the run left is then searched for each entry's secret strings (case-sensitive; also
their NFC form, their JSON-escaped form and, in bytes, their UTF-8): memory (rows, audit,
index outbox), the session log (events, context checkpoints, artifacts, telemetry, dead
letters, tool approvals, memos, receipts, and the inbox listing), replies (the outbox and
streamed replies), the export, every log line of any level, and every byte of every file left
in the scratch CAIRN_HOME once the runtime is closed (so freed SQLite pages count too).

Figures: ``cases`` (secret entries), ``held`` (none of whose strings was found anywhere),
``leaked`` (per place, the entries found there), ``honest`` and ``honest_masked`` (honest
entries whose stored text holds the masking marker, or whose memory was refused for holding a
secret). Targets: at least 95% held, at most 2% of honest entries masked.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click
from sqlmodel import SQLModel, select

from cairn.bench.corpus import corpus_items, corpus_option
from cairn.bench.logcapture import captured_logs
from cairn.bench.scratch import PEOPLE, TENANT, said_in_public, scratch_runtime
from cairn.core.errors import InvalidInput
from cairn.core.secrets import SECRET_MARK
from cairn.db.models import (
    AgentSession,
    Artifact,
    ContextArtifact,
    ContextCheckpoint,
    ContextTelemetry,
    DeadLetter,
    EventKind,
    MemoReceipt,
    MemoRow,
    MemoryAudit,
    MemoryOutbox,
    MemoryRow,
    OutboundMessage,
    Reaction,
    SessionEvent,
    StreamedReply,
    ToolApproval,
)
from cairn.memory.portable import export_memories
from cairn.memos.box import MemoBox
from cairn.runtime import Runtime
from cairn.workers.session_end import end_session

__all__ = ["PLACES", "Entry", "Leak", "SecretsFigures", "load_corpus", "run_secrets"]

CORPUS = "secrets_corpus.json"
EXPORT = "export.jsonl"  # in the scratch CAIRN_HOME
PLACES = ("memory", "session_log", "replies", "export", "logs", "files")
SENDER, RECIPIENT = "cairn", "review"  # the memo's agents
# What the bot says when it refuses or masks a secret (checked_memory's refusal, the turn's
# notice of a removal): an honest text answered so was taken for a secret.
SAID_SECRET = "looks like a secret"  # noqa: S105 (words of a refusal, not a password)
SHORTEST_SECRET = 4  # a shorter string would be found everywhere
_ZEROS = re.compile(rb"\x00{2,}")
_DB_PLACES: dict[str, tuple[type[SQLModel], ...]] = {
    "memory": (MemoryRow, MemoryAudit, MemoryOutbox),
    "session_log": (
        SessionEvent,
        ContextCheckpoint,
        ContextArtifact,
        Artifact,
        ContextTelemetry,
        DeadLetter,
        ToolApproval,
        Reaction,
        MemoRow,
        MemoReceipt,
    ),
    "replies": (OutboundMessage, StreamedReply),
}


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of the corpus: one or two messages said in one thread, and (kind "secret")
    the strings that must not survive them: the credential, or its parts when it is split."""

    id: str
    kind: str
    cls: str
    lang: str
    messages: tuple[str, ...]
    secret: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Leak:
    """A secret entry found after the run: in which places, and (place "files") which files."""

    entry: Entry
    places: tuple[str, ...]
    files: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Masked:
    """An honest entry taken for a secret: its messages as stored, and what the bot said."""

    entry: Entry
    stored: tuple[str, ...]


@dataclass
class SecretsFigures:
    """What ``cairn bench secrets --json`` prints, and the entries the text report lists."""

    cases: int
    held: int
    leaked: dict[str, int]
    honest: int
    honest_masked: int
    leaks: list[Leak] = field(default_factory=list)
    masked: list[Masked] = field(default_factory=list)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        """Exactly the figures of the issue, in its order."""
        return {
            "cases": self.cases,
            "held": self.held,
            "leaked": dict(self.leaked),
            "honest": self.honest,
            "honest_masked": self.honest_masked,
        }


def load_corpus(path: Path | None = None) -> list[Entry]:
    """The corpus at ``path``, or the one shipped with Cairn.

    Raises InvalidInput, naming the entry (its id, else its index) and what is wrong, when the
    file is not a JSON list or an entry is malformed: a missing or repeated id, a kind other
    than secret or honest, no class or lang, not 1 or 2 messages, a secret entry without secret
    strings (or one shorter than 4 characters, with a NUL, or in none of its messages), an
    honest entry with some.
    """
    data, where = corpus_items(CORPUS, path)
    seen: set[str] = set()
    return [_entry(item, i, where, seen) for i, item in enumerate(data)]


def _entry(item: Any, index: int, where: str, seen: set[str]) -> Entry:
    name = item.get("id") if isinstance(item, dict) else None
    label = f"entry {name!r}" if isinstance(name, str) and name.strip() else f"entry {index}"

    def bad(why: str) -> InvalidInput:
        return InvalidInput(f"{where}, {label}: {why}")

    if not isinstance(item, dict):
        raise bad("is not a JSON object")
    if not isinstance(name, str) or not name.strip():
        raise bad('needs an "id", a non-empty string')
    if name in seen:
        raise bad("has the id of an earlier entry")
    seen.add(name)
    kind = item.get("kind")
    if kind not in {"secret", "honest"}:
        raise bad('needs "kind": "secret" or "honest"')
    for key in ("class", "lang"):
        if not isinstance(item.get(key), str) or not item[key].strip():
            raise bad(f'needs "{key}", a non-empty string')
    messages = item.get("messages")
    if not (
        isinstance(messages, list)
        and 1 <= len(messages) <= 2
        and all(isinstance(m, str) and m.strip() for m in messages)
    ):
        raise bad('needs "messages": a list of 1 or 2 non-empty strings')
    secret = item.get("secret")
    if not isinstance(secret, list) or not all(isinstance(s, str) for s in secret):
        raise bad('needs "secret": a list of strings ([] for an honest entry)')
    if kind == "honest" and secret:
        raise bad('is honest: its "secret" must be []')
    if kind == "secret" and not secret:
        raise bad('is a secret entry: its "secret" lists the strings that must not survive')
    for n, part in enumerate(secret):
        # Which part is wrong is said by its place in the list, never by showing it.
        if len(part) < SHORTEST_SECRET:
            raise bad(f"secret string {n} is shorter than {SHORTEST_SECRET} characters")
        if "\x00" in part:
            raise bad(f"secret string {n} holds a NUL character")
        if not any(part in m for m in messages):
            raise bad(f"secret string {n} is in none of its messages")
    return Entry(name, kind, item["class"], item["lang"], tuple(messages), tuple(secret))


def run_secrets(
    entries: Sequence[Entry], *, progress: Callable[[str], None] | None = None
) -> SecretsFigures:
    """Tell the bot every entry, as memos too, end the sessions, export the memories, and
    search everything the run left for each entry's secret strings (see the module's doc).

    ``progress`` hears a line every few seconds. Runs on a scratch runtime in a temporary
    folder, removed at the end; never touches CAIRN_HOME's data.
    """
    started = time.monotonic()
    say = _Every(3.0, progress)
    with tempfile.TemporaryDirectory(prefix="cairn-bench-secrets-") as tmp:
        home = Path(tmp)
        with captured_logs() as lines, scratch_runtime("secrets", home=home) as rt:
            run = _drive(rt, entries, home / EXPORT, say)
        # Read once the runtime is closed: what the store and the index left on disk for good.
        files = {str(p.relative_to(home)): _compacted(p.read_bytes()) for p in _files(home)}
    haystacks: dict[str, str | bytes] = {p: "\x00".join(t) for p, t in run.texts.items()}
    haystacks["logs"] = "\x00".join(lines)
    haystacks["export"] = files.get(EXPORT, b"")
    haystacks["files"] = b"\x00".join(files.values())
    leaks = [_leak(e, haystacks, files) for e in entries if e.kind == "secret"]
    found = [leak for leak in leaks if leak.places]
    honest = [t for t in run.told if t.entry.kind == "honest"]
    masked = [m for t in honest if (m := _masked(t, run.stored[t.thread], run.said[t.thread]))]
    return SecretsFigures(
        cases=len(leaks),
        held=len(leaks) - len(found),
        leaked={p: sum(1 for leak in found if p in leak.places) for p in PLACES},
        honest=len(honest),
        honest_masked=len(masked),
        leaks=found,
        masked=masked,
        seconds=time.monotonic() - started,
    )


@dataclass(frozen=True, slots=True)
class _Run:
    """What a run did and left in the database: the entries told, the texts of each place,
    and per thread the messages as stored and what the bot said."""

    told: list[_Told]
    texts: dict[str, list[str]]
    stored: dict[str, list[str]]
    said: dict[str, list[str]]


def _drive(rt: Runtime, entries: Sequence[Entry], export: Path, say: _Every) -> _Run:
    """Every entry told and sent as a memo, the inbox listed, the sessions ended, the
    memories exported to ``export``; then the database read back."""
    box = MemoBox(rt.db)
    told = []
    for n, entry in enumerate(entries):
        told.append(_tell(rt, box, n, entry))
        say(f"bench secrets: {n + 1}/{len(entries)} entries told")
    # As `cairn memo list --agent review` lists it: an operator's view of every conversation.
    listing = box.inbox(TENANT, RECIPIENT, limit=max(1000, len(entries)), every_conversation=True)
    _end_sessions(rt, say)
    _export(rt, export)
    texts = _database_traces(rt)
    texts["session_log"] += [s for m in listing for s in _strings(asdict(m))]
    stored, said = _threads(rt)
    return _Run(told, texts, stored, said)


@dataclass(frozen=True, slots=True)
class _Told:
    """One entry told: its thread, the texts of its stored memo, and the refusals it met."""

    entry: Entry
    thread: str
    memo: tuple[str, ...]
    refusals: tuple[str, ...]


def _tell(rt: Runtime, box: MemoBox, n: int, entry: Entry) -> _Told:
    """The entry's messages said in a thread of its own (the first as "remember ..."), and
    its first message sent as a memo; a message refused keeps nothing, and the run goes on."""
    thread, refusals = f"secrets-{n}", []
    memo: tuple[str, ...] = ()
    for k, text in enumerate(entry.messages):
        try:
            said_in_public(
                rt,
                thread,
                PEOPLE[n % len(PEOPLE)],
                f"remember {text}" if k == 0 else text,
                event_id=f"e-{thread}-{k}",
            )
        except InvalidInput as exc:
            refusals.append(str(exc))
    try:
        memo = (box.send(TENANT, SENDER, RECIPIENT, entry.messages[0]).text,)
    except InvalidInput as exc:
        refusals.append(str(exc))
    return _Told(entry, thread, memo, tuple(refusals))


def _end_sessions(rt: Runtime, say: _Every) -> None:
    """Every session of the run ended, its learnings extracted, as `cairn session end` does."""
    with rt.db.session() as s:
        ids = [i for i in s.exec(select(AgentSession.id)).all() if i is not None]
    for n, session_id in enumerate(ids):
        end_session(rt, session_id)
        say(f"bench secrets: {n + 1}/{len(ids)} sessions ended")


def _export(rt: Runtime, path: Path) -> None:
    """The memories exported to ``path``, as `cairn memory export --tenant bench -o` does."""
    with path.open("w", encoding="utf-8") as f:
        for line in export_memories(rt.db, TENANT):
            f.write(line + "\n")


def _database_traces(rt: Runtime) -> dict[str, list[str]]:
    """Every text of every row of the tables of each place."""
    with rt.db.session() as s:
        return {
            place: [
                text
                for model in models
                for row in s.exec(select(model)).all()
                for text in _strings(row.model_dump())
            ]
            for place, models in _DB_PLACES.items()
        }


def _threads(rt: Runtime) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Per thread, the messages as the session log stored them, and what the bot said."""
    stored: dict[str, list[str]] = defaultdict(list)
    said: dict[str, list[str]] = defaultdict(list)
    with rt.db.session() as s:
        query = (
            select(AgentSession.thread_ref, SessionEvent.text)
            .join(AgentSession, AgentSession.id == SessionEvent.session_id)  # type: ignore[arg-type]
            .where(SessionEvent.kind == EventKind.MESSAGE)
        )
        for thread, text in s.exec(query).all():
            stored[thread].append(text)
        for thread, text in s.exec(select(OutboundMessage.thread_ref, OutboundMessage.text)):
            said[thread].append(text)
    return stored, said


def _strings(value: Any) -> Iterator[str]:
    """Every string in ``value`` (a row's or a memo's fields, JSON data): keys and values."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _files(home: Path) -> list[Path]:
    """Every file under ``home``, the SQLite file and its journals, the index folder and all."""
    return sorted(p for p in home.rglob("*") if p.is_file() and not p.is_symlink())


def _compacted(data: bytes) -> bytes:
    """``data`` with each run of NUL bytes cut to one: the index preallocates files of tens of
    megabytes, mostly zeros, and no secret string holds a NUL, so every match is kept."""
    return _ZEROS.sub(b"\x00", data)


def _forms(secret: str) -> list[str]:
    """The ways ``secret`` may be written: as said, NFC-normalised (as messages are stored),
    and JSON-escaped (non-ASCII characters as \\uXXXX, quotes and backslashes escaped)."""
    forms = [secret]
    for form in (unicodedata.normalize("NFC", secret), json.dumps(secret)[1:-1]):
        if form not in forms:
            forms.append(form)
    return forms


# A secret this short (a PIN, a door code) is looked for as a whole word only: as a bare
# substring it turns up by chance in ids, timestamps and the database's own bytes.
_SHORT = 8


def _holds(haystack: str | bytes, secret: str) -> bool:
    """Whether ``haystack`` holds ``secret`` in one of its forms (in bytes: their UTF-8); a
    short one only where no letter or digit touches it."""
    if isinstance(haystack, bytes):
        forms: list[str | bytes] = [f.encode("utf-8", "surrogatepass") for f in _forms(secret)]
    else:
        forms = list(_forms(secret))
    if len(secret) >= _SHORT:
        return any(f in haystack for f in forms)  # type: ignore[operator]
    for form in forms:
        if isinstance(form, bytes):
            pattern: re.Pattern[Any] = re.compile(
                rb"(?<![A-Za-z0-9])" + re.escape(form) + rb"(?![A-Za-z0-9])"
            )
        else:
            pattern = re.compile(r"(?<![A-Za-z0-9])" + re.escape(form) + r"(?![A-Za-z0-9])")
        if pattern.search(haystack):
            return True
    return False


def _leak(entry: Entry, haystacks: dict[str, str | bytes], files: dict[str, bytes]) -> Leak:
    """Where any of ``entry``'s secret strings was found (no place: it was held)."""
    places = tuple(p for p in PLACES if any(_holds(haystacks[p], s) for s in entry.secret))
    if "files" not in places:
        return Leak(entry, places)
    holding = tuple(n for n, data in files.items() if any(_holds(data, s) for s in entry.secret))
    return Leak(entry, places, holding)


def _masked(told: _Told, stored: list[str], said: list[str]) -> Masked | None:
    """The honest entry as masked: its stored text holds the marker, or a memory of it was
    refused for holding a secret (the bot or the refusal says so); None when it was not."""
    if any(SECRET_MARK in text for text in [*stored, *told.memo]) or any(
        SAID_SECRET in text for text in [*said, *told.refusals]
    ):
        return Masked(told.entry, tuple(stored or told.refusals))
    return None


class _Every:
    """Passes a progress line on at most once every ``seconds``."""

    def __init__(self, seconds: float, progress: Callable[[str], None] | None) -> None:
        self.seconds, self.progress, self.next = seconds, progress, time.monotonic() + seconds

    def __call__(self, line: str) -> None:
        now = time.monotonic()
        if self.progress is not None and now >= self.next:
            self.progress(line)
            self.next = now + self.seconds


def _shown(secret: str) -> str:
    """The start of ``secret``, enough to tell which it is, never all of it (at most 4
    characters, and at most half of it)."""
    return secret[: min(4, len(secret) // 2)] + "…"


def _report(figures: SecretsFigures) -> Iterator[str]:
    """The text report: the figures against the targets, then what a developer should fix."""
    cases, honest = max(1, figures.cases), max(1, figures.honest)
    yield f"secret entries:  {figures.cases}"
    yield f"held:            {figures.held} ({figures.held / cases:.1%}; target at least 95%)"
    yield "leaked, by place (an entry can leak in several):"
    for place, count in figures.leaked.items():
        yield f"  {place:<12} {count}"
    yield f"honest entries:  {figures.honest}"
    share = figures.honest_masked / honest
    yield f"honest masked:   {figures.honest_masked} ({share:.1%}; target at most 2%)"
    yield f"ran in {figures.seconds:.1f} s"
    for leak in figures.leaks:
        where = ", ".join(
            f"files ({', '.join(leak.files)})" if p == "files" else p for p in leak.places
        )
        starts = ", ".join(_shown(s) for s in leak.entry.secret)
        yield f"  leaked: {leak.entry.id} ({leak.entry.cls}; secret {starts}) in {where}"
    for m in figures.masked:
        yield f"  honest masked: {m.entry.id} ({m.entry.cls}): {' | '.join(m.stored)}"


@click.command("secrets")
@corpus_option(
    "JSON list of {id, kind: secret|honest, class, lang, messages: [1 or 2 texts], "
    "secret: [strings that must not survive]}"
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as one JSON object.")
@click.option(
    "--only",
    "classes",
    multiple=True,
    metavar="CLASS",
    help="Only entries of this class (repeatable).",
)
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="Only the first N entries.")
def secrets_command(
    corpus: Path | None, as_json: bool, classes: tuple[str, ...], limit: int | None
) -> None:
    """Tell the bot credentials and honest texts; count the credentials that survive anywhere.

    \b
    What is sent, on a scratch store (never CAIRN_HOME's data), offline model, in-process:
    each entry in a thread of its own of a public channel, its first message as
    "remember <text>" and its second (a credential may be split in two) as is, through the
    real ingest and turn; its first message also as a memo from agent cairn to agent review,
    whose inbox is then listed; then every session is ended (learnings extracted) and the
    memories exported to a file.
    \b
    Where it looks, for each secret string (also JSON-escaped, and as UTF-8 bytes):
      memory       memory rows, their audit and index outbox
      session_log  session events, context checkpoints, artifacts, telemetry, dead letters,
                   tool approvals, memos and their receipts, the memo inbox listing
      replies      what the bot posted or will post
      export       the file `cairn memory export` wrote
      logs         every log line of any level, as Cairn writes it
      files        every byte of every file left in the scratch CAIRN_HOME once closed
                   (the SQLite file, its -wal and -shm, the vector index): freed pages count
    \b
    Figures: secret entries (cases), those held (found nowhere), those leaked per place,
    honest entries, and those masked (their stored text marked, or their memory refused as
    a secret). Targets: at least 95% held, at most 2% of the honest entries masked.
    Without --json the leaked entries and the masked honest ones are listed (a secret is
    shown by its first characters only).
    Examples:
      cairn bench secrets --json
      cairn bench secrets --only slack --only aws --limit 50
    """
    from cairn.commands.common import cli_errors

    with cli_errors():
        entries = load_corpus(corpus)
        if classes:
            entries = [e for e in entries if e.cls in classes]
            if not entries:
                known = ", ".join(sorted({e.cls for e in load_corpus(corpus)}))
                raise InvalidInput(f"no entry of class {', '.join(classes)}; classes: {known}")
        figures = run_secrets(
            entries[:limit] if limit else entries, progress=lambda line: click.echo(line, err=True)
        )
        if as_json:
            click.echo(json.dumps(figures.as_json()))
            return
        for line in _report(figures):
            click.echo(line)
