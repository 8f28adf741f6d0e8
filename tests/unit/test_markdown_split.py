"""A long answer cut into message-sized parts on block boundaries, for every chat platform."""

from __future__ import annotations

import pytest

from cairn.bot.markdown import MIN_PART, TASK_DONE, TASK_OPEN, parse, split_markdown


def utf8(text: str) -> int:
    return len(text.encode())


HEADING = "## Deploys"
PARAGRAPH = "The deploy runs at noon and takes about ten minutes in all."
LISTING = "- drain the workers\n- run the migration\n- start the workers"
CODE = "```python\ndef deploy() -> None:\n    run('make release')\n```"


def test_short_text_is_one_part_and_blank_text_none() -> None:
    assert split_markdown("  hello  ", 100) == ["hello"]
    assert split_markdown(" \n ", 100) == []


def test_parts_end_after_whole_blocks() -> None:
    blocks = [HEADING, PARAGRAPH, LISTING, CODE, PARAGRAPH]
    parts = split_markdown("\n\n".join(blocks), 100)
    assert all(len(part) <= 100 for part in parts)
    # Every part is a run of whole blocks: nothing was cut inside one.
    assert "\n\n".join(parts) == "\n\n".join(blocks)
    assert parts[0] == HEADING + "\n\n" + PARAGRAPH


def test_a_list_too_long_for_a_part_is_cut_between_items() -> None:
    items = [f"- item {i} of the long list" for i in range(12)]
    parts = split_markdown("\n".join(items), 100)
    assert len(parts) > 1
    assert [line for part in parts for line in part.split("\n")] == items


def test_a_code_block_cut_in_two_is_reopened_with_its_language() -> None:
    code = "```python\n" + "\n".join(f"print({i})" for i in range(60)) + "\n```"
    parts = split_markdown("Here:\n\n" + code + "\n\nDone.", 200, measure=utf8)
    assert len(parts) > 2
    for part in parts:
        assert utf8(part) <= 200
        assert part.count("```") % 2 == 0, part
    assert all(part.startswith("```python\n") for part in parts[1:-1])
    assert all(part.endswith("\n```") for part in parts[:-1])
    code_lines = [line for part in parts for line in part.split("\n") if line.startswith("print")]
    assert code_lines == [f"print({i})" for i in range(60)]


def test_slack_reopens_a_code_block_with_a_bare_fence() -> None:
    code = "```\n" + "\n".join(f"line {i}" for i in range(40)) + "\n```"
    parts = split_markdown(code, 100, keep_language=False)
    assert all(part.startswith("```\n") and part.endswith("\n```") for part in parts)


def test_code_in_a_list_item_is_reopened_with_its_indentation() -> None:
    code = "- step one:\n\n  ```sh\n" + "".join(f"  echo {i}\n" for i in range(30)) + "  ```"
    parts = split_markdown(code, 120)
    assert len(parts) > 1
    assert parts[0].endswith("\n  ```")
    assert parts[1].startswith("  ```sh\n  echo")


def test_no_part_is_an_empty_code_block_or_a_dangling_fence() -> None:
    text = PARAGRAPH + "\n\n" + "```\n" + "x = 1\n" * 30 + "```\n\n" + PARAGRAPH
    for limit in range(MIN_PART, 160, 7):
        for part in split_markdown(text, limit):
            assert part not in ("```", "```\n```")
            assert part.count("```") % 2 == 0, (limit, part)


def test_a_word_is_cut_only_when_it_alone_overflows_a_part() -> None:
    # The only space is early in the part: still better than cutting the long word.
    parts = split_markdown("ab " + "x" * 60 + " cd", 50)
    assert parts[0] == "ab"
    assert all(len(part) <= 50 for part in parts)
    assert "".join(parts[1:-1]) + parts[-1].removesuffix(" cd") == "x" * 60


def test_bytes_are_counted_and_no_character_is_cut() -> None:
    text = "日本語のテキスト " * 200
    parts = split_markdown(text, 100, measure=utf8)
    assert all(utf8(part) <= 100 for part in parts)
    assert " ".join(parts) == text.strip()


def test_a_limit_without_room_for_fences_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        split_markdown("text", MIN_PART - 1)


def test_task_list_boxes_are_read_once_for_every_platform() -> None:
    tokens = parse("- [x] done\n- [ ] todo\n- [y] neither")
    items = [t for t in tokens if t.type == "list_item_open"]
    texts = [t.content for t in tokens if t.type == "inline"]
    assert [item.meta.get("task") for item in items] == [TASK_DONE, TASK_OPEN, None]
    assert texts[:2] == ["[x] done", "[ ] todo"]  # the source is untouched
    children = [t.children[0].content for t in tokens if t.type == "inline" and t.children]
    assert children == [f"{TASK_DONE} done", f"{TASK_OPEN} todo", "[y] neither"]
