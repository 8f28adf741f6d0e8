"""The offline model: used when no API key is set, it answers honestly from memory alone.

It speaks the same protocol as a real model, asking for the remember / recall / retract tools
and then phrasing their results, so the whole path (tool loop, event log, notices, reactions)
runs the same with or without a network. A person can also drive any tool the agent has (its MCP
tools among them) with ``run TOOL {json arguments}``, and list them with ``tools``.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from cairn.llm.types import (
    DECISION_PREFIX,
    LLMRequest,
    LLMResponse,
    TextBlock,
    TextSink,
    ToolResultBlock,
    ToolUseBlock,
)

__all__ = ["OFFLINE_NOTE", "OfflineLLM"]

OFFLINE_NOTE = "(offline: I answer from memory only; set ANTHROPIC_API_KEY for a full model)"

HELP = (
    "I'm running offline, without a language model, so I work as a memory:\n"
    "- remember <fact>: I store it for every thread of this conversation (of the whole "
    "workspace when said in a public channel)\n"
    "- what do you know about <topic>? (or any question): I recall what I stored\n"
    "- forget <fact>: I retract it (kept for audit, never recalled again)\n"
    "- tools: the tools I can call; run <tool> {json arguments}: I call one, e.g.\n"
    '  run ops__service_status {"service": "payments"}'
)

_REMEMBER = re.compile(
    r"^(?:please\s+)?(?:remember|note)(?:\s+that)?\s*[:,-]?\s+(?P<x>.+)$", re.I | re.S
)
_FORGET = re.compile(
    r"^(?:please\s+)?(?:forget|retract)(?:\s+that|\s+about)?\s*[:,-]?\s+(?P<x>.+)$", re.I | re.S
)
_ASK = re.compile(
    r"^(?:what\s+do\s+you\s+(?:know|remember)\s+(?:about|of)|recall|tell\s+me\s+about|"
    r"do\s+you\s+remember)\s+(?P<x>.+?)\s*\??$",
    re.I | re.S,
)
_MEMO = re.compile(
    r"^(?:please\s+)?(?:tell|memo|let)\s+(?P<to>[a-z][a-z0-9_-]*|everyone|all agents)"
    r"(?:\s+know)?(?:\s+that)?\s*[:,-]?\s+(?P<x>.+)$",
    re.I | re.S,
)
# How the context engine quotes an unread memo in the per-turn context.
_MEMO_LINE = re.compile(
    r'^- memo #(?P<id>\d+) from (?P<sender>\S+) \(priority -?\d+(?P<how>[^)]*)\): (?P<text>".*")$',
    re.M,
)
_RUN = re.compile(r"^\s*run\s+(?P<tool>[A-Za-z0-9_-]{1,64})(?:\s+(?P<args>.*?))?\s*$", re.I | re.S)
_TOOLS = re.compile(r"^\s*(?:tools|list tools|what tools\b.*)\s*\??\s*$", re.I)
_HELP = re.compile(r"^\s*(?:help|\?|what can you do\??)\s*$", re.I)

# An attached image's card in a message (cairn.memory.context.intake): its name and summary.
_IMAGE_CARD = re.compile(
    r"^attached image (?P<name>[^\n]+):\n\[artifact [0-9a-f]+ · image ·[^\n]*\n[^\n]*\n"
    r"(?P<summary>image, [^\n]*)$",
    re.M,
)
# An artifact card's reference, as the context engine prints it.
_CARD_REF = re.compile(r'retrieve_artifact\("([0-9a-f]{8,64})"\)')
# A word a log or a file would hold, not a plain word: digits, or joined by - . _ :
_IDENTIFIER = re.compile(r"\w*\d\w*|\w+[-._:]\w+")
# The most artifacts the offline model searches for one question.
_SEARCHED = 4
# How many words each streamed delta of an answer holds.
_WORDS_PER_DELTA = 4


@dataclass(frozen=True, slots=True)
class _Intent:
    tool: str | None
    argument: str
    recipient: str = ""


def _intent(text: str) -> _Intent:
    text = text.strip()
    if _HELP.match(text):
        return _Intent(None, "help")
    memo = _MEMO.match(text)
    if memo:
        to = memo.group("to").lower()
        return _Intent(
            "send_memo", memo.group("x").strip(), "*" if " " in to or to == "everyone" else to
        )
    for tool, pattern in (("remember", _REMEMBER), ("retract", _FORGET), ("recall", _ASK)):
        match = pattern.match(text)
        if match:
            return _Intent(tool, match.group("x").strip().rstrip("?").strip())
    if text.endswith("?"):
        return _Intent("recall", text.rstrip("?").strip())
    return _Intent(None, text)


class OfflineLLM:
    """A rule-based stand-in for a model; reads ``request.metadata['text']`` for the message.

    ``delay`` is how many seconds it waits between two word groups it streams
    (CAIRN_LLM_OFFLINE_DELAY; 0, the default, writes them all at once).
    """

    name = "offline"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def complete(self, request: LLMRequest, *, sink: TextSink | None = None) -> LLMResponse:
        """Ask for one memory tool, or phrase the tool results into an answer.

        With ``sink``, the answer's text goes there first a few words at a time, as a streaming
        model would write it, so that streaming runs without a network too; with a ``delay``,
        as slowly as a model writes (the first group at once: the delay paces the writing, it
        is not a time to first token).
        """
        response = self._respond(request)
        if sink is not None:
            for n, piece in enumerate(_word_groups(response.text)):
                if n and self.delay:
                    time.sleep(self.delay)
                sink.delta(piece)
        return response

    def _respond(self, request: LLMRequest) -> LLMResponse:
        text = request.metadata.get("text", "")
        if not text and request.messages:
            text = request.messages[-1].text
        last = request.messages[-1] if request.messages else None
        results = [b for b in (last.content if last else ()) if isinstance(b, ToolResultBlock)]
        memos = _memos(request.context)
        if results:
            return _answer(" ".join(_phrase(r) for r in _found(results)), memos)
        if text.startswith(DECISION_PREFIX):
            return _answer(_phrase_decision(text.removeprefix(DECISION_PREFIX)), memos)
        run = _RUN.match(text)
        # "run the deploy?" is a question, not a tool: only a tool's name (or an MCP-style
        # SERVER__TOOL, answered with the list when unknown) makes it a command.
        if run and (
            run.group("tool") in {t.name for t in request.tools} or "__" in run.group("tool")
        ):
            return _run(request, run.group("tool"), run.group("args") or "")
        if _TOOLS.match(text):
            return _answer(_tool_list(request))
        intent = _intent(text)
        images = _IMAGE_CARD.findall(text)
        if images and intent.tool in (None, "recall"):
            return _answer(_cannot_see(images), memos)
        if intent.tool == "send_memo":
            return _use("send_memo", {"to": intent.recipient, "text": intent.argument})
        if intent.tool == "remember":
            return _use("remember", {"text": intent.argument})
        if intent.tool == "retract":
            return _use("retract", {"query": intent.argument, "reason": "asked to forget"})
        if intent.tool == "recall":
            artifacts = _artifacts_asked_about(request, intent.argument)
            if artifacts:
                return _search(artifacts, intent.argument)
            return _use("recall", {"query": intent.argument})
        if intent.argument == "help":
            return _answer(HELP)
        return _answer(
            'I can\'t hold a conversation offline. Try "remember <fact>", '
            '"what do you know about <topic>?" or "forget <fact>".'
        )


def _artifacts_asked_about(request: LLMRequest, question: str) -> list[str]:
    """The thread's artifacts (cards in the prompt, newest first, a few) when ``question``
    names something a file holds (a word with a digit, a dash, a dot or an underscore in it:
    an id, a time, a host) and the model may search artifacts; else none (memory answers)."""
    if not _IDENTIFIER.search(question) or "search_artifact" not in {t.name for t in request.tools}:
        return []
    shown = [request.context, *(m.text for m in request.messages)]
    found = [ref for text in shown for ref in _CARD_REF.findall(text)]
    return list(dict.fromkeys(reversed(found)))[:_SEARCHED]


def _search(artifacts: list[str], query: str) -> LLMResponse:
    """One search_artifact call per artifact, in one response."""
    calls = tuple(
        ToolUseBlock(
            id=f"offline-search-{n}", name="search_artifact", input={"id": a, "query": query}
        )
        for n, a in enumerate(artifacts)
    )
    return LLMResponse(content=calls, stop_reason="tool_use", model="offline")


def _run(request: LLMRequest, tool: str, arguments: str) -> LLMResponse:
    """A tool call a person asked for in so many words: ``run TOOL {json}``."""
    known = {t.name for t in request.tools}
    if tool not in known:
        return _answer(f"I have no tool named {tool!r}. {_tool_list(request)}")
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as exc:
        return _answer(f"The arguments of run {tool} must be a JSON object: {exc.msg}.")
    if not isinstance(parsed, dict):
        return _answer(f'The arguments of run {tool} must be a JSON object, like {{"key": 1}}.')
    return _use(tool, parsed)


def _tool_list(request: LLMRequest) -> str:
    if not request.tools:
        return "I have no tools in this conversation."
    return "My tools: " + ", ".join(t.name for t in request.tools) + "."


def _word_groups(text: str) -> list[str]:
    """``text`` cut into pieces of a few words each, with the whitespace kept; joined, ``text``."""
    words = re.findall(r"\s*\S+\s*", text)
    return [
        "".join(words[i : i + _WORDS_PER_DELTA]) for i in range(0, len(words), _WORDS_PER_DELTA)
    ]


def _cannot_see(cards: list[tuple[str, str]]) -> str:
    """What the offline model says of images attached to the message (their cards, or their
    blocks too when CAIRN_MODEL_IMAGES is on): it can't read them."""
    listed = "; ".join(f"{name} ({summary.split(', shown')[0]})" for name, summary in cards)
    return (
        "I can't read images: I'm the offline model, without a language model. "
        f"I know only what the card says: {listed}. Tell me in words what it shows, or ask "
        "again with a model that reads images (ANTHROPIC_API_KEY and CAIRN_MODEL_IMAGES=1)."
    )


def _use(name: str, arguments: dict[str, Any]) -> LLMResponse:
    return LLMResponse(
        content=(ToolUseBlock(id=f"offline-{name}", name=name, input=arguments),),
        stop_reason="tool_use",
        model="offline",
    )


def _answer(text: str, memos: list[str] | None = None) -> LLMResponse:
    if memos:
        text += "\nMemos for me:\n" + "\n".join(f"- {m}" for m in memos)
    return LLMResponse(content=(TextBlock(f"{text}\n{OFFLINE_NOTE}"),), model="offline")


def _memos(context: str) -> list[str]:
    """The unread memos the context engine put in this turn's context."""
    found = []
    for match in _MEMO_LINE.finditer(context):
        try:
            body = json.loads(match.group("text"))
        except json.JSONDecodeError:
            continue
        found.append(
            f"{body} (from {match.group('sender')}{match.group('how')}, memo #{match.group('id')})"
        )
    return found


def _phrase_mcp(data: dict[str, Any]) -> str:
    """An MCP tool's result (cairn/workers/mcp_tools), quoted as what the tool said."""
    tool, status = data["tool"], data["status"]
    if status == "awaiting approval":
        return (
            f"{tool} needs a person's approval, so it has not run "
            f"(arguments: {json.dumps(data.get('arguments', {}), ensure_ascii=False)})."
        )
    output = str(data.get("output", ""))
    removed = data.get("secrets_removed")
    note = f"\n(I removed a secret from its output: {', '.join(removed)})" if removed else ""
    if status == "ok":
        return f"{tool} said:\n```\n{output}\n```{note}"
    return f"{tool} failed ({status}): {output}{note}"


def _phrase_decision(body: str) -> str:
    """A person's decision on a held tool call, and what the call gave if it ran."""
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        return "A decision on a tool call arrived that I could not read."
    tool, number = data.get("tool", "the tool"), data.get("approval", "?")
    decision, who = data.get("decision"), data.get("decided_by") or "someone"
    if decision == "denied":
        return f"{who} denied request #{number}, so {tool} did not run."
    if decision == "expired":
        return f"Request #{number} expired unanswered, so {tool} did not run."
    if data.get("status") == "refused":
        return f"{who} approved request #{number}, but {tool} did not run: " + (
            str(data.get("output", ""))
        )
    if data.get("status") == "unknown":
        return f"{who} approved request #{number}, but whether {tool} took effect is unknown: " + (
            str(data.get("output", ""))
        )
    return f"{who} approved request #{number}. " + _phrase_mcp(data)


def _remembered(card: dict[str, Any]) -> str:
    """One recalled memory as the answer tells it, with where it was said when known: a claim
    of its author, with its date, when it is unconfirmed and about permissions, approvals,
    credentials, links or process."""
    said_in = card.get("said_in")
    if card.get("claim_about"):
        where = f" in {said_in}" if said_in else ""
        return (
            f"- {card.get('author', 'someone')} said{where} on {card['since']}, not confirmed: "
            f"{card['text']} (#{card['id']}{_standing(card)})"
        )
    where = f", said in {said_in}" if said_in else ""
    return f"- {card['text']} (#{card['id']}, since {card['since']}{where}{_standing(card)})"


def _found(results: list[ToolResultBlock]) -> list[ToolResultBlock]:
    """``results``, less the searches of artifacts that found nothing when another did."""
    empty = [
        r for r in results if r.content.startswith('{"artifact"') and '"lines": []' in r.content
    ]
    return [r for r in results if r not in empty] or results[:1]


def _found_lines(data: dict[str, Any]) -> str:
    lines = data["lines"]
    if not lines:
        return f"Nothing in artifact {data['artifact']} matches {data.get('query', 'that')}."
    shown = "\n".join(f"- line {found['line']}: {found['text']}" for found in lines[:5])
    return f"In artifact {data['artifact']}:\n{shown}"


def _standing(card: dict[str, Any]) -> str:
    """ ", unconfirmed, flagged ..." for a memory card whose status people should know."""
    status = str(card.get("standing", ""))
    return f", {status}" if "flagged" in status or "untrusted" in status else ""


def _phrase(result: ToolResultBlock) -> str:
    try:
        data = json.loads(result.content)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict) and "tool" in data and "status" in data:
        return _phrase_mcp(data)
    if result.is_error:
        return f"I couldn't do that: {result.content}"
    if not isinstance(data, dict):
        return result.content
    if "lines" in data and "artifact" in data:
        return _found_lines(data)
    if "memories" in data:
        found = data["memories"]
        if not found:
            return f"I don't remember anything about {data.get('query', 'that')}."
        lines = [_remembered(m) for m in found]
        return "Here is what I remember:\n" + "\n".join(lines)
    status = data.get("status")
    if status == "memo sent":
        return f"Memo sent to {data['to']}."
    if status == "stored" and data.get("flagged"):
        return f"Noted, but flagged: {data['flagged']}."
    if status == "stored":
        return "Got it, I'll remember that."
    if status == "already known":
        return f"I already knew that: {data['text']}"
    if status == "was retracted":
        return f"I won't remember that again: {data['reason']}."
    if status == "restored":
        return f"Restored: {data['text']}"
    if status == "retracted":
        return f"Forgotten: {data['text']} (kept for audit only)."
    if status == "disputed":
        return (
            f"Only {data.get('author', 'its author')} or an admin can retract "
            f'"{data["text"]}"; I\'ve recorded your objection and flagged it for review.'
        )
    return result.content
