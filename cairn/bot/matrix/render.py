"""How a bot message looks in Matrix: Markdown as HTML with a plain body, in a thread, in parts.

A message is sent as ``m.room.message`` content whose ``body`` is the Markdown text itself (what
clients without HTML show) and, when the Markdown has any formatting, an
``org.matrix.custom.html`` ``formatted_body``: markdown-it's HTML of ``cairn.bot.markdown``'s
tokens, with an image on the web as a link (clients show only ``mxc://`` images). Replies
belong to an ``m.thread`` on the message that started the session, with the reply fallback
(``is_falling_back`` and ``m.in_reply_to``) so that clients without threads show them as
replies. Long texts are split into parts that each stay well inside Matrix's 64 KiB event
limit, on block boundaries where possible, never inside a code block's fence. A request for
approval is one message that says how to answer it, its tool and arguments as code.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from cairn.bot.markdown import OPTIONS, parse, split_markdown

__all__ = [
    "MAX_PART_BYTES",
    "approval_content",
    "decided_line",
    "how_to_answer",
    "message_content",
    "notice_to",
    "replacement",
    "split_text",
    "to_html",
]

# The body of one part, in UTF-8 bytes. The HTML is at most a few times that, and an event
# (content, ids, signatures) must stay under 65536 bytes.
MAX_PART_BYTES = 12_000
# The arguments of a request as shown in its HTML, in characters (the core's text cuts them at
# 1500, compact): a request is one event, as the reactions on it decide, and its edit once
# decided holds it twice; escaped as HTML and encrypted, that must still fit one event.
MAX_ARGUMENTS_CHARS = 2_000


class _MatrixHTML(RendererHTML):
    """markdown-it's HTML, but for images: Matrix clients show only ``mxc://`` images, so an
    image on the web is a link to it."""

    def image(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        token = tokens[idx]
        href = html.escape(str(token.attrGet("src") or ""))
        label = self.renderInline(token.children or [], options, env) or href
        return f'<a href="{href}">{label}</a>'


_HTML = _MatrixHTML()


def to_html(text: str) -> str | None:
    """The HTML of the Markdown ``text``, or None when it has no formatting at all."""
    rendered = str(_HTML.render(parse(text), OPTIONS, {})).strip()
    plain = "<p>" + html.escape(text.strip(), quote=False).replace("\n", "<br />\n") + "</p>"
    if rendered == plain:
        return None
    return rendered


def split_text(text: str, max_bytes: int = MAX_PART_BYTES) -> list[str]:
    """``text`` in parts of at most ``max_bytes`` UTF-8 bytes each, in order, cut on block
    boundaries where it can (see ``split_markdown``); a code block cut in two is reopened with
    its language.

    Raises ValueError if ``max_bytes`` leaves no room for the fences.
    """
    return split_markdown(text, max_bytes, measure=_utf8_bytes)


def _utf8_bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def message_content(
    text: str,
    *,
    notice: bool = False,
    thread_root: str | None = None,
    in_reply_to: str | None = None,
    mentions: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The ``m.room.message`` content for one part of a bot message.

    ``thread_root`` puts it in that thread, with ``in_reply_to`` (default: the root) as the
    reply fallback; ``mentions`` fills ``m.mentions.user_ids`` (people to notify).
    """
    content: dict[str, Any] = {"msgtype": "m.notice" if notice else "m.text", "body": text}
    formatted = to_html(text)
    if formatted is not None:
        content["format"] = "org.matrix.custom.html"
        content["formatted_body"] = formatted
    if thread_root:
        content["m.relates_to"] = {
            "rel_type": "m.thread",
            "event_id": thread_root,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": in_reply_to or thread_root},
        }
    content["m.mentions"] = {"user_ids": sorted(set(mentions))}
    return content


def how_to_answer(approve: str, deny: str) -> str:
    """The last line of an open request: the reactions that answer it."""
    return f"React {approve} to approve or {deny} to deny."


def decided_line(decision: str, by: str) -> str:
    """The last line of a request once it is ``decision`` (approved, denied, expired)."""
    if decision == "expired":
        return "Expired unanswered: it did not run."
    return f"{decision.capitalize()} by {by}." if by else f"{decision.capitalize()}."


def approval_content(
    text: str,
    data: Mapping[str, Any],
    *,
    agent: str,
    footer: str,
    thread_root: str | None = None,
    in_reply_to: str | None = None,
    mentions: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The ``m.room.message`` content of a request for approval: ``text`` (the request as the
    core words it) then ``footer`` (how to answer it, or how it was decided); its HTML shows
    the tool and the arguments of the call (``data``, the outbox row's) as code. In a thread
    and mentioning people as :func:`message_content` does."""
    content = message_content(
        f"{text}\n\n{footer}",
        thread_root=thread_root,
        in_reply_to=in_reply_to,
        mentions=mentions,
    )
    content["format"] = "org.matrix.custom.html"
    content["formatted_body"] = _approval_html(data, agent, footer)
    return content


def _approval_html(data: Mapping[str, Any], agent: str, footer: str) -> str:
    arguments = json.dumps(
        dict(data.get("arguments") or {}), ensure_ascii=False, sort_keys=True, indent=2
    )
    if len(arguments) > MAX_ARGUMENTS_CHARS:
        arguments = arguments[:MAX_ARGUMENTS_CHARS] + "…"
    asked = (
        f", asked by {html.escape(str(data['requested_by']))}" if data.get("requested_by") else ""
    )
    expires = ""
    if data.get("expires_at"):
        when = datetime.fromisoformat(str(data["expires_at"]))
        expires = f" It expires at {when:%Y-%m-%d %H:%M} UTC."
    return (
        f"<p><strong>Approval needed</strong> (request #{html.escape(str(data.get('approval')))})"
        f": {html.escape(agent or 'the agent')} wants to run "
        f"<code>{html.escape(str(data.get('tool', '')))}</code>{asked}, with:</p>\n"
        f'<pre><code class="language-json">{html.escape(arguments)}</code></pre>\n'
        f"<p>Who may approve: {html.escape(str(data.get('approvers', '')))}.{expires}</p>\n"
        f"<p>{html.escape(footer)}</p>"
    )


def notice_to(
    user_id: str, text: str, *, thread_root: str | None, in_reply_to: str | None = None
) -> dict[str, Any]:
    """An ``m.notice`` that addresses ``text`` to ``user_id``: it starts with a pill of them
    and mentions them, so that their client notifies them (Matrix has no message only one
    person sees)."""
    content = message_content(
        f"{user_id}: {text}",
        notice=True,
        thread_root=thread_root,
        in_reply_to=in_reply_to,
        mentions=(user_id,),
    )
    pill = f'<a href="https://matrix.to/#/{quote(user_id, safe="@:")}">{html.escape(user_id)}</a>'
    content["format"] = "org.matrix.custom.html"
    content["formatted_body"] = f"{pill}: {html.escape(text)}"
    return content


def replacement(event_id: str, content: dict[str, Any]) -> dict[str, Any]:
    """An ``m.replace`` edit making ``event_id`` show ``content`` (message content as the
    functions above give it; the original keeps its thread). The edit notifies no one again;
    clients without edits show the new text behind ``"* "``."""
    new = {k: v for k, v in content.items() if k != "m.relates_to"}
    edit: dict[str, Any] = {
        "msgtype": new["msgtype"],
        "body": "* " + new["body"],
        "m.new_content": new,
        "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
        "m.mentions": {},
    }
    if "formatted_body" in new:
        edit["format"] = new["format"]
        edit["formatted_body"] = "* " + new["formatted_body"]
    return edit
