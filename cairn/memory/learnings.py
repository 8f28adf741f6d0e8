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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from cairn.core.errors import CairnError
from cairn.db.models import EventKind, SessionEvent
from cairn.memory.records import content_hash

if TYPE_CHECKING:
    from cairn.llm.types import LLM

__all__ = [
    "LEARNABLE_KINDS",
    "LEARNINGS_MARK",
    "Learning",
    "extract_learnings",
    "parse_learnings",
    "transcript",
    "unreadable",
]

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

RETRY_PROMPT = "That answer could not be read. Answer again with the JSON list only"


@dataclass(frozen=True, slots=True)
class Learning:
    """A validated candidate memory."""

    kind: str
    text: str


def unreadable(answer: str) -> str:
    """Why ``answer`` holds no JSON list to read learnings from; "" when it does."""
    match = re.search(r"\[.*\]", answer, re.DOTALL)
    if match is None:
        return "no JSON list in the answer"
    try:
        json.loads(match.group())
    except json.JSONDecodeError as exc:
        return f"the list is not valid JSON ({exc.msg} at character {exc.pos})"
    return ""


def parse_learnings(answer: str, *, forbidden: tuple[str, ...] = ()) -> list[Learning]:
    """The valid learnings in the model's ``answer``; anything malformed is dropped.

    ``forbidden`` are texts (system prompts) whose sentences must never become memories.
    """
    if unreadable(answer):
        return []
    match = re.search(r"\[.*\]", answer, re.DOTALL)
    assert match is not None
    items = json.loads(match.group())
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
    from cairn.llm.types import LLMRequest, Message, TextBlock

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
        reason = unreadable(answer)
        if reason:
            # Weak models break JSON; the learnings are asked for once more, never dropped
            # without a word (mem0 lost facts this way silently).
            log.warning("learnings answer unreadable (%s); asking once more", reason)
            retry = replace(
                request,
                messages=(
                    *request.messages,
                    Message("assistant", (TextBlock(answer or "(empty)"),)),
                    Message.user(f"{RETRY_PROMPT} ({reason})"),
                ),
            )
            answer = llm.complete(retry).text
            reason = unreadable(answer)
            if reason:
                log.error(
                    "learnings lost: the answer was unreadable twice (%s): %.200r", reason, answer
                )
                return []
    except CairnError as exc:
        log.warning("learnings extraction failed: %s", exc)
        return []
    return parse_learnings(answer, forbidden=forbidden)


def transcript(events: list[SessionEvent]) -> str:
    lines = []
    for e in events:
        if e.kind == EventKind.MESSAGE and e.text.strip():
            lines.append(f"{e.user or 'someone'}: {e.text.strip()}")
        elif e.kind == EventKind.REPLY and e.text.strip():
            lines.append(f"{e.agent or 'bot'} (bot): {e.text.strip()}")
    return "\n".join(lines)
