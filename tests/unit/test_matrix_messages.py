"""The Matrix frontend's pure parts: mentions, message content and splitting, invites, state."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.bot.matrix.invites import InvitePolicy
from cairn.bot.matrix.mentions import (
    is_mentioned,
    mentioned_users,
    strip_mention,
    strip_reply_fallback,
)
from cairn.bot.matrix.render import (
    approval_content,
    decided_line,
    how_to_answer,
    message_content,
    notice_to,
    replacement,
    split_text,
    to_html,
)
from cairn.bot.matrix.sync_state import MatrixState, StateFile
from cairn.core.errors import ConfigError, StorageError
from cairn.core.settings import load_settings

BOT = "@cairn:example.org"


# --- mentions --------------------------------------------------------------------------------


def test_m_mentions_is_the_whole_truth_when_present() -> None:
    assert is_mentioned({"body": "hi", "m.mentions": {"user_ids": [BOT]}}, BOT)
    # The name in the text does not count when the client says whom it mentions.
    assert not is_mentioned({"body": "cairn: hi", "m.mentions": {}}, BOT, ["cairn"])


def test_older_clients_mention_by_user_id_display_name_or_pill() -> None:
    assert is_mentioned({"body": f"{BOT} what now?"}, BOT)
    assert is_mentioned({"body": "Cairn: what now?"}, BOT, ["Cairn"])
    pill = '<a href="https://matrix.to/#/%40cairn%3Aexample.org">Cairn</a>: hi'
    assert is_mentioned({"body": "Bot: hi", "formatted_body": pill}, BOT)
    assert mentioned_users({"formatted_body": pill}) == (BOT,)


def test_a_name_inside_another_word_is_not_a_mention() -> None:
    assert not is_mentioned({"body": "the cairnstone is nice"}, BOT, ["cairn"])


def test_the_leading_mention_is_stripped_from_the_text() -> None:
    assert strip_mention("Cairn: remember x", BOT, ["Cairn"]) == "remember x"
    assert strip_mention(f"{BOT}, remember x", BOT) == "remember x"
    assert strip_mention("cairn remember x", BOT, ["cairn"]) == "remember x"
    assert strip_mention("ask cairn later", BOT, ["cairn"]) == "ask cairn later"
    assert strip_mention("cairnstone", BOT, ["cairn"]) == "cairnstone"


def test_the_reply_fallback_quote_is_stripped() -> None:
    assert strip_reply_fallback("> <@a:b> earlier\n> more\n\nmy answer") == "my answer"
    assert strip_reply_fallback("no quote here") == "no quote here"


# --- rendering -------------------------------------------------------------------------------


def test_plain_text_has_no_html_and_markdown_has_html_without_raw_tags() -> None:
    assert to_html("just words\non two lines") is None
    rendered = to_html("**bold** <script>alert(1)</script>")
    assert rendered is not None
    assert "<strong>bold</strong>" in rendered
    assert "<script>" not in rendered


def test_html_has_code_languages_tables_task_boxes_and_images_as_links() -> None:
    rendered = to_html(
        "- [x] done\n- [ ] todo\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "![a graph](https://img.example/g.png)\n\n```python\nx = 1\n```"
    )
    assert rendered is not None
    assert "<li>☑ done</li>" in rendered
    assert "<li>☐ todo</li>" in rendered
    assert "<th>a</th>" in rendered
    assert "<td>2</td>" in rendered
    assert '<a href="https://img.example/g.png">a graph</a>' in rendered
    assert "<img" not in rendered  # clients show only mxc:// images
    assert '<pre><code class="language-python">x = 1\n</code></pre>' in rendered


def test_a_reply_is_in_the_thread_with_the_reply_fallback() -> None:
    content = message_content(
        "*done*", thread_root="$root", in_reply_to="$asked", mentions=("@alice:example.org",)
    )
    assert content["msgtype"] == "m.text"
    assert content["body"] == "*done*"
    assert content["format"] == "org.matrix.custom.html"
    assert content["formatted_body"] == "<p><em>done</em></p>"
    assert content["m.relates_to"] == {
        "rel_type": "m.thread",
        "event_id": "$root",
        "is_falling_back": True,
        "m.in_reply_to": {"event_id": "$asked"},
    }
    assert content["m.mentions"] == {"user_ids": ["@alice:example.org"]}
    assert message_content("note", notice=True)["msgtype"] == "m.notice"


REQUEST = {
    "approval": 7,
    "tool": "ops__restart_service",
    "arguments": {"service": "<payments>", "reason": "stuck"},
    "requested_by": "@ann:example.org",
    "expires_at": "2026-12-02T20:15:00+00:00",
    "approvers": "workspace or room admins",
}


def test_a_request_says_how_to_answer_and_shows_the_call_as_code() -> None:
    content = approval_content(
        "Approval needed (request #7): ...",
        REQUEST,
        agent="ops",
        footer=how_to_answer("✅", "❌"),
        thread_root="$root",
        mentions=("@ann:example.org",),
    )
    assert (
        content["body"] == "Approval needed (request #7): ...\n\nReact ✅ to approve or ❌ to deny."
    )
    html = content["formatted_body"]
    assert "ops wants to run <code>ops__restart_service</code>, asked by @ann:example.org" in html
    assert "&quot;service&quot;: &quot;&lt;payments&gt;&quot;" in html  # escaped, in <pre><code>
    assert "It expires at 2026-12-02 20:15 UTC." in html
    assert html.endswith("<p>React ✅ to approve or ❌ to deny.</p>")
    assert content["m.relates_to"]["event_id"] == "$root"
    assert content["m.mentions"] == {"user_ids": ["@ann:example.org"]}


def test_a_decided_request_is_an_edit_that_says_who_decided_and_notifies_no_one() -> None:
    decided = approval_content("Approval needed", REQUEST, agent="ops", footer="Approved by @b.")
    edit = replacement("$request", {**decided, "m.relates_to": {"rel_type": "m.thread"}})
    assert edit["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$request"}
    assert edit["m.new_content"]["body"].endswith("\n\nApproved by @b.")
    assert "m.relates_to" not in edit["m.new_content"]
    assert edit["body"].startswith("* ")
    assert edit["m.mentions"] == {}
    assert decided_line("approved", "@b:x") == "Approved by @b:x."
    assert decided_line("denied", "@b:x") == "Denied by @b:x."
    assert decided_line("expired", "") == "Expired unanswered: it did not run."


def test_an_answer_to_one_person_mentions_them_with_a_pill() -> None:
    content = notice_to("@bob:example.org", "You can't <approve>.", thread_root="$root")
    assert content["msgtype"] == "m.notice"
    assert content["body"] == "@bob:example.org: You can't <approve>."
    assert content["formatted_body"] == (
        '<a href="https://matrix.to/#/@bob:example.org">@bob:example.org</a>: '
        "You can&#x27;t &lt;approve&gt;."
    )
    assert content["m.mentions"] == {"user_ids": ["@bob:example.org"]}
    assert mentioned_users(content) == ("@bob:example.org",)


def test_a_long_answer_is_split_at_paragraphs_within_the_limit() -> None:
    paragraphs = [f"paragraph {i} " + "word " * 150 for i in range(20)]
    parts = split_text("\n\n".join(paragraphs), max_bytes=2000)
    assert len(parts) > 1
    assert all(len(p.encode()) <= 2000 for p in parts)
    assert all(p.startswith("paragraph") for p in parts)
    assert " ".join(" ".join(parts).split()) == " ".join(" ".join(paragraphs).split())


def test_a_code_block_cut_in_two_is_closed_and_reopened() -> None:
    text = "Here:\n\n```python\n" + "print('hello')\n" * 200 + "```\nDone."
    parts = split_text(text, max_bytes=1000)
    assert len(parts) > 2
    for part in parts:
        assert part.count("```") % 2 == 0, part
    assert parts[1].startswith("```python\n")
    assert "".join(parts).count("print('hello')") == 200


@given(st.text(min_size=1, max_size=3000), st.integers(min_value=40, max_value=800))
def test_split_parts_fit_and_keep_every_word(text: str, max_bytes: int) -> None:
    parts = split_text(text, max_bytes=max_bytes)
    assert all(len(p.encode()) <= max_bytes for p in parts)
    kept = "".join("".join(parts).replace("```", "").split())
    assert kept == "".join(text.replace("```", "").split())


# --- invites ---------------------------------------------------------------------------------


def test_invites_are_allowed_by_user_id_or_server() -> None:
    policy = InvitePolicy(["@boss:other.org", ":example.org"])
    assert policy.allows("@alice:example.org")
    assert policy.allows("@boss:other.org")
    assert not policy.allows("@mallory:other.org")
    assert not policy.allows("@mallory:evil.example.org")


def test_by_default_only_the_bots_homeserver_may_invite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIX_HOMESERVER", "https://matrix.example.org")
    monkeypatch.setenv("MATRIX_USER_ID", BOT)
    monkeypatch.setenv("MATRIX_PASSWORD", "secret")
    assert load_settings().matrix.inviters == (":example.org",)
    monkeypatch.setenv("CAIRN_MATRIX_ALLOWED_INVITERS", "@boss:other.org, :example.net")
    assert load_settings().matrix.inviters == ("@boss:other.org", ":example.net")


def test_a_malformed_inviter_pattern_is_refused_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIX_HOMESERVER", "https://matrix.example.org")
    monkeypatch.setenv("MATRIX_USER_ID", BOT)
    monkeypatch.setenv("MATRIX_PASSWORD", "secret")
    monkeypatch.setenv("CAIRN_MATRIX_ALLOWED_INVITERS", "alice")
    with pytest.raises(ConfigError, match="CAIRN_MATRIX_ALLOWED_INVITERS"):
        load_settings()


# --- state -----------------------------------------------------------------------------------


def test_the_state_file_round_trips_and_is_private(tmp_path: Path) -> None:
    store = StateFile(tmp_path / "matrix")
    state = MatrixState("https://hs", BOT, "DEVICE", "token", "s72_1", ["!r:example.org"])
    store.save(state)
    assert store.load("https://hs", BOT) == state
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600


def test_the_state_of_another_account_is_not_reused(tmp_path: Path) -> None:
    store = StateFile(tmp_path)
    store.save(MatrixState("https://hs", BOT, "DEVICE", "token", "s1"))
    assert store.load("https://hs", "@other:example.org") == MatrixState(
        "https://hs", "@other:example.org"
    )


def test_a_corrupt_state_file_is_reported(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(StorageError, match="delete it"):
        StateFile(tmp_path).load("https://hs", BOT)
    (tmp_path / "state.json").write_text(json.dumps({"homeserver": "https://hs"}))
    assert StateFile(tmp_path).load("https://hs", BOT).since == ""


def test_two_accounts_keep_their_own_state_in_one_folder(tmp_path: Path) -> None:
    other = "@review:example.org"
    mine, theirs = StateFile(tmp_path, BOT), StateFile(tmp_path, other)
    assert mine.path != theirs.path
    mine.save(MatrixState("https://hs", BOT, "D1", "", "s1"))
    theirs.save(MatrixState("https://hs", other, "D2", "", "s9"))
    assert mine.load("https://hs", BOT).since == "s1"
    assert theirs.load("https://hs", other).since == "s9"


def test_the_state_file_from_before_per_account_names_is_still_read(tmp_path: Path) -> None:
    StateFile(tmp_path).save(MatrixState("https://hs", BOT, "DEVICE", "", "s5"))
    upgraded = StateFile(tmp_path, BOT)
    assert upgraded.load("https://hs", BOT).device_id == "DEVICE"  # the same device, no new login
    assert StateFile(tmp_path, "@review:example.org").load("https://hs", "@review:example.org") == (
        MatrixState("https://hs", "@review:example.org")
    )
