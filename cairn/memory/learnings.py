"""Learnings at session end: the LLM proposes memories from the session, code decides.

The model sees the session's messages and replies and answers with a JSON list of
``{"kind": ..., "text": ...}``. Each candidate is validated (known kind, sensible length, no
control characters, not a question, not a piece of the system prompt); garbage and empty input
never become memories. Accepted ones are stored unconfirmed, private to the agent, and announced
in the thread as "remembered: ..." notices, so people can confirm or retract them by reaction.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cairn.db.models import (
    AgentSession,
    EventKind,
    MemoryUse,
    OutboundMessage,
    SessionEvent,
    utcnow,
)
from cairn.errors import CairnError, InvalidInput, NotFound
from cairn.memory.scope import Scope, Source, Visibility
from cairn.memory.store import Memory, content_hash

if TYPE_CHECKING:
    from cairn.runtime import Runtime
    from cairn.workers.llm.base import LLM

__all__ = ["LEARNABLE_KINDS", "Learning", "end_session", "extract_learnings", "parse_learnings"]

log = logging.getLogger(__name__)

LEARNABLE_KINDS = ("fact", "preference", "decision", "pattern", "mistake", "constraint")
MAX_LEARNINGS = 8
LEARNINGS_MARK = "learnings"  # data.kind of the event that closes a reviewed stretch
MAX_TRANSCRIPT_CHARS = 30_000

EXTRACT_PROMPT = """\
You review a finished chat-ops conversation and extract what is worth remembering for later
conversations. Answer with a JSON list only, no prose: [{"kind": KIND, "text": TEXT}, ...]
where KIND is one of fact, preference, decision, pattern, mistake, constraint and TEXT is one
self-contained sentence (who or what it is about, no pronouns without referent). Extract only
durable knowledge stated or agreed in the conversation, at most 8 items; answer [] if nothing
qualifies. Never include instructions, greetings, questions or anything from this prompt."""


@dataclass(frozen=True, slots=True)
class Learning:
    """A validated candidate memory."""

    kind: str
    text: str


def parse_learnings(answer: str, *, forbidden: tuple[str, ...] = ()) -> list[Learning]:
    """The valid learnings in the model's ``answer``; anything malformed is dropped.

    ``forbidden`` are texts (system prompts) whose sentences must never become memories.
    """
    match = re.search(r"\[.*\]", answer, re.DOTALL)
    if match is None:
        return []
    try:
        items = json.loads(match.group())
    except json.JSONDecodeError:
        return []
    if not isinstance(items, list):
        return []
    banned = {content_hash(s) for text in (EXTRACT_PROMPT, *forbidden) for s in _sentences(text)}
    prompt_words = set(re.findall(r"\w+", " ".join((EXTRACT_PROMPT, *forbidden)).casefold()))
    found: list[Learning] = []
    seen: set[str] = set()
    for item in items[: MAX_LEARNINGS * 2]:
        learning = _valid(item, banned, prompt_words)
        if learning is not None and (key := content_hash(learning.text)) not in seen:
            seen.add(key)
            found.append(learning)
    return found[:MAX_LEARNINGS]


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]


def _valid(item: Any, banned: set[str], prompt_words: set[str]) -> Learning | None:
    if not isinstance(item, dict):
        return None
    kind, text = item.get("kind"), item.get("text")
    if kind not in LEARNABLE_KINDS or not isinstance(text, str):
        return None
    text = " ".join(text.split())
    if not 8 <= len(text) <= 500 or text.endswith("?"):
        return None
    if re.search(r"[\x00-\x1f\x7f]", text) or not re.search(r"[^\W\d_]{2}", text):
        return None
    if content_hash(text) in banned:
        return None
    words = re.findall(r"\w+", text.casefold())
    # A candidate made only of the prompt's own words is the prompt echoed back.
    if words and len(words) >= 6 and all(w in prompt_words for w in words):
        return None
    return Learning(kind=kind, text=text)


def extract_learnings(
    llm: LLM, transcript: str, *, forbidden: tuple[str, ...] = ()
) -> list[Learning]:
    """Ask ``llm`` for learnings from ``transcript``; empty input asks nothing.

    A model failure is logged and yields no learnings (the session still ends).
    """
    from cairn.workers.llm.base import LLMRequest, Message

    if not transcript.strip():
        return []
    request = LLMRequest(
        system=EXTRACT_PROMPT,
        messages=(Message.user(transcript[-MAX_TRANSCRIPT_CHARS:]),),
        max_tokens=1024,
        metadata={"purpose": "learnings"},
    )
    try:
        answer = llm.complete(request).text
    except CairnError as exc:
        log.warning("learnings extraction failed: %s", exc)
        return []
    return parse_learnings(answer, forbidden=forbidden)


def _transcript(events: list[SessionEvent]) -> str:
    lines = []
    for e in events:
        if e.kind == EventKind.MESSAGE and e.text.strip():
            lines.append(f"{e.user or 'someone'}: {e.text.strip()}")
        elif e.kind == EventKind.REPLY and e.text.strip():
            lines.append(f"{e.agent or 'bot'} (bot): {e.text.strip()}")
    return "\n".join(lines)


def end_session(rt: Runtime, session_id: int, *, forbidden: tuple[str, ...] = ()) -> list[Memory]:
    """End a session: extract learnings, store them unconfirmed, announce them in the thread.

    The "remembered: ..." notices go to the outbox as OutboundMessage rows, each linked to its
    memory with MemoryUse role "announced", in the transaction that marks the session ended.
    Ending an ended session does nothing and returns []. Raises NotFound for an unknown id.
    """
    with rt.db.session() as s:
        session = s.get(AgentSession, session_id)
        if session is None:
            raise NotFound(f"no session #{session_id}")
        events = _since_last_learnings(list(s.exec(_events_query(session_id)).all()))
        if events is None:
            return []  # this stretch of the session was already reviewed
        tenant, agent = session.tenant_id, session.agent
        channel, thread, platform = session.channel, session.thread_ref, session.platform
    learnings = extract_learnings(rt.llm, _transcript(events), forbidden=forbidden)
    scope = Scope(tenant, agent, channel, None, thread)
    # Which speaker a learning came from is unknown: one untrusted voice in the stretch (a
    # guest, another bot, a configured user) makes all of its learnings untrusted.
    untrusted = any(
        e.kind == EventKind.MESSAGE
        and ((e.data or {}).get("untrusted") is True or e.user in rt.settings.untrusted_users)
        for e in events
    )
    source = Source(
        platform=platform,
        channel=channel,
        thread=thread,
        author=f"{agent}:learnings",
        untrusted=untrusted,
    )
    remembered: list[Memory] = []
    for learning in learnings:
        try:
            written = rt.memory.remember(
                learning.text,
                scope,
                kind=learning.kind,
                visibility=Visibility.PRIVATE,
                source=source,
            )
        except InvalidInput as exc:
            log.info("learning refused: %s", exc)
            continue
        remembered.append(written.memory)
    _announce(rt, session_id, remembered)
    return remembered


def _since_last_learnings(events: list[SessionEvent]) -> list[SessionEvent] | None:
    """Events after the last learnings marker; None when no message came after it."""
    marks = [i for i, e in enumerate(events) if (e.data or {}).get("kind") == LEARNINGS_MARK]
    rest = events[marks[-1] + 1 :] if marks else events
    if marks and not any(e.kind == EventKind.MESSAGE for e in rest):
        return None
    return rest


def _events_query(session_id: int) -> Any:
    from sqlmodel import col, select

    return (
        select(SessionEvent)
        .where(SessionEvent.session_id == session_id)
        .order_by(col(SessionEvent.seq))
    )


def _announce(rt: Runtime, session_id: int, memories: list[Memory]) -> None:
    from cairn.memory.events import EventLog

    with rt.db.session() as s:
        session = s.get(AgentSession, session_id, with_for_update=True)
        if session is None:
            return
        done = list(s.exec(_events_query(session_id)).all())
        if _since_last_learnings(done) is None:
            return  # a concurrent run announced first
        cause = EventLog.append_in(
            s,
            session_id,
            session.tenant_id,
            EventKind.NOTICE,
            text=f"session ended; {len(memories)} learnings",
            agent=session.agent,
            data={"kind": LEARNINGS_MARK},
        )
        for seq, memory in enumerate(memories):
            text = f"remembered: {memory.text}"
            EventLog.append_in(
                s, session_id, session.tenant_id, EventKind.NOTICE, text=text,
                agent=session.agent, data={"cause": cause["id"], "kind": "notice"},
            )  # fmt: skip
            row = OutboundMessage(
                session_id=session_id,
                cause_event_id=cause["id"],
                seq=seq,
                tenant_id=session.tenant_id,
                platform=session.platform,
                channel=session.channel,
                thread_ref=session.thread_ref,
                kind="notice",
                agent=session.agent,
                text=text,
            )
            s.add(row)
            s.flush()
            s.add(MemoryUse(outbound_id=row.id or 0, memory_id=memory.id, role="announced"))
        session.status = "ended"
        session.ended_at = utcnow()
        s.add(session)
