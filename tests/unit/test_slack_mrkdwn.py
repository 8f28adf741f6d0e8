"""Markdown as Slack shows it (mrkdwn), message parts within Slack's limits, and Slack's text
read back as plain text."""

from __future__ import annotations

import pytest

from cairn.bot.slack.mrkdwn import from_slack, split_message, to_mrkdwn


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("**bold** and __bold__", "*bold* and *bold*"),
        ("*italic* and _italic_", "_italic_ and _italic_"),
        ("~~gone~~", "~gone~"),
        ("# Title", "*Title*"),
        ("## Sub **x**", "*Sub x*"),
        ("- one\n  * two\n+ three", "• one\n  • two\n• three"),
        ("- [x] done\n- [ ] todo", "☑ done\n☐ todo"),
        ("see [the docs](https://x.example/a)", "see <https://x.example/a|the docs>"),
        ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
        ("> quoted **b**", "> quoted *b*"),
        ("---", "──────────"),
        ("snake_case_name and 2*3*4", "snake_case_name and 2*3*4"),
        ("1. first\n2. second", "1. first\n2. second"),
    ],
)
def test_markdown_becomes_mrkdwn(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        # Emphasis inside emphasis: the regexes matched the wrong closing marker.
        ("*italic with **bold** inside*", "_italic with *bold* inside_"),
        ("***both***", "_*both*_"),
        ("**bold with _italic_ inside**", "*bold with _italic_ inside*"),
        # Code spans are code, whatever they hold.
        ("`a*b*c` then *it*", "`a*b*c` then _it_"),
        # Underscores in a link or a word are not emphasis.
        (
            "[my_link](https://x.example/a_b_c) snake_case",
            "<https://x.example/a_b_c|my_link> snake_case",
        ),
        ("[ref][1]\n\n[1]: https://r.example/a_b", "<https://r.example/a_b|ref>"),
        # Lists: nested under a number, continued paragraphs, lazy quote lines.
        ("1. first\n   - nested\n2. second", "1. first\n   • nested\n2. second"),
        ("- item\n\n  more of it", "• item\n\n  more of it"),
        ("> quote\ncontinued", "> quote\n> continued"),
        # Headings of both kinds, with code and emphasis in them.
        ("### With `code` and *it*", "*With `code` and _it_*"),
        ("Title\n=====", "*Title*"),
        # Every kind of code block is a Slack code block without its language.
        ("~~~\ncode <x>\n~~~", "```\ncode &lt;x&gt;\n```"),
        ("    indented <x>", "```\nindented &lt;x&gt;\n```"),
        # Entities are read, then escaped once (the regexes escaped them twice).
        ("a &lt; b &amp; c", "a &lt; b &amp; c"),
    ],
)
def test_what_regexes_got_wrong(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


def test_a_table_is_aligned_text_in_a_code_block() -> None:
    table = "| name | load |\n|---|--:|\n| web **1** | 0.5 |\n| db | 12.25 |"
    assert to_mrkdwn(table) == (
        "```\nname  |  load\n------+------\nweb 1 |   0.5\ndb    | 12.25\n```"
    )


def test_code_is_kept_verbatim_but_escaped() -> None:
    assert to_mrkdwn("`**not bold** <x>`") == "`**not bold** &lt;x&gt;`"
    fenced = "```python\nif a < b:\n    print('**x**')\n```"
    assert to_mrkdwn(fenced) == "```\nif a &lt; b:\n    print('**x**')\n```"


def test_no_text_can_become_a_mention_or_a_link() -> None:
    assert to_mrkdwn("<!channel> <@U123> <https://evil|x>") == (
        "&lt;!channel&gt; &lt;@U123&gt; &lt;https://evil|x&gt;"
    )


def test_short_text_is_one_part() -> None:
    assert split_message("  hello  ", 100) == ["hello"]


def test_parts_end_at_paragraphs_then_lines_then_words() -> None:
    text = ("alpha " * 10).strip() + "\n\n" + ("beta " * 10).strip()
    assert split_message(text, 80) == [("alpha " * 10).strip(), ("beta " * 10).strip()]
    words = " ".join(f"w{i}" for i in range(100))
    parts = split_message(words, 60)
    assert all(len(p) <= 60 for p in parts)
    assert " ".join(parts) == words


def test_a_word_longer_than_a_part_is_cut() -> None:
    parts = split_message("x" * 250, 100)
    assert all(len(p) <= 100 for p in parts)
    assert "".join(parts) == "x" * 250


def test_a_code_block_cut_in_two_is_closed_and_reopened() -> None:
    code = "```\n" + "\n".join(f"line {i}" for i in range(40)) + "\n```"
    parts = split_message(code, 100)
    assert len(parts) > 1
    for part in parts:
        assert len(part) <= 100
        assert part.count("```") == 2
        assert part.startswith("```")
        assert part.endswith("```")


def test_a_part_must_have_room_for_fences() -> None:
    with pytest.raises(ValueError, match="at least"):
        split_message("text", 10)


def test_slack_text_reads_as_plain_text() -> None:
    text = (
        "<@UBOT> hi <@U123|ann> see <#C1|ops> <https://a.example|site> <https://b.example> "
        "&lt;x&gt; &amp; <!here>"
    )
    assert from_slack(text, drop_user="UBOT") == (
        "hi <@U123> see #ops site (https://a.example) https://b.example <x> & @here"
    )


def test_only_the_bots_own_mention_is_dropped() -> None:
    assert from_slack("<@UBOT>: ask <@UOTHER>", drop_user="UBOT") == "ask <@UOTHER>"
