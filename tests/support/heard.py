"""What a stand-in model was asked, read the same way whichever wire format carried it.

End-to-end tests script a tiny model as a responder: it looks at the request (the last thing
said, the tool results it got, its system prompt, the tools offered) and answers with text or
a tool call. :class:`Heard` reads a Messages API request and a Chat Completions one alike, and
:func:`text_reply` / :func:`tool_reply` write the answer in the provider's format, so one
responder drives both adapters (``STAND_INS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tests.support.chat_server import completion, tool_call
from tests.support.messages_server import text_message, tool_use_message

__all__ = ["Heard", "text_reply", "tool_reply"]

JSON = dict[str, Any]


def text_reply(provider: str, text: str) -> JSON:
    """A plain text answer in ``provider``'s format."""
    return completion(text) if provider == "openai" else text_message(text)


def tool_reply(provider: str, name: str, arguments: Mapping[str, Any]) -> JSON:
    """An answer calling tool ``name`` with ``arguments``, in ``provider``'s format."""
    if provider == "openai":
        return completion(calls=[tool_call(name, arguments)])
    return tool_use_message(name, arguments)


@dataclass(frozen=True)
class Heard:
    """One request to a stand-in model (``provider`` "anthropic" or "openai")."""

    provider: str
    body: JSON

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def system(self) -> list[str]:
        """The system prompt's parts: the Messages API's blocks, or Chat Completions' system
        messages (Cairn sends one, the blocks joined)."""
        if self.provider == "openai":
            return [_text(m.get("content")) for m in self.body["messages"] if m["role"] == "system"]
        system = self.body.get("system") or []
        return [system] if isinstance(system, str) else [b["text"] for b in system]

    @property
    def tools(self) -> dict[str, JSON]:
        """The tools offered, by name: their description and input schema."""
        found: dict[str, JSON] = {}
        for tool in self.body.get("tools") or []:
            if self.provider == "openai":
                function = tool["function"]
                found[function["name"]] = {
                    "description": function.get("description", ""),
                    "schema": function.get("parameters", {}),
                }
            else:
                found[tool["name"]] = {
                    "description": tool.get("description", ""),
                    "schema": tool.get("input_schema", {}),
                }
        return found

    @property
    def conversation(self) -> list[JSON]:
        """The messages of the conversation, without Chat Completions' system message."""
        return [m for m in self.body["messages"] if m["role"] != "system"]

    @property
    def said(self) -> str:
        """The text of the last person's message (after the last assistant turn), "" when the
        request only carries tool results."""
        texts: list[str] = []
        for message in self._since_the_model():
            if message["role"] == "user":
                texts.append(_text(message["content"]))
        return "\n".join(t for t in texts if t)

    @property
    def tool_results(self) -> list[str]:
        """The contents of the tool results this request answers the model's calls with."""
        results: list[str] = []
        for message in self._since_the_model():
            if message["role"] == "tool":
                results.append(_text(message["content"]))
            elif message["role"] == "user" and isinstance(message["content"], list):
                results += [
                    _text(b.get("content"))
                    for b in message["content"]
                    if b.get("type") == "tool_result"
                ]
        return results

    @property
    def images(self) -> list[tuple[str, str]]:
        """The images anywhere in the conversation: (media type, base64 data), from Messages
        API image blocks and Chat Completions ``image_url`` data URLs alike."""
        found: list[tuple[str, str]] = []
        for message in self.conversation:
            content = message.get("content")
            for part in content if isinstance(content, list) else []:
                if part.get("type") == "image":
                    source = part["source"]
                    found.append((source["media_type"], source["data"]))
                elif part.get("type") == "image_url":
                    head, _, data = part["image_url"]["url"].partition(";base64,")
                    found.append((head.removeprefix("data:"), data))
        return found

    def _since_the_model(self) -> list[JSON]:
        messages = self.conversation
        last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
        return messages[last + 1 :]


def _text(content: Any) -> str:
    """The text of a message's or a tool result's content (a string or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(
        str(part.get("text", "")) for part in content if part.get("type") in ("text", None)
    )
