"""The one token estimator: deterministic, Unicode-aware, on the high side."""

from __future__ import annotations

from cairn.core.tokens import count_tokens, image_tokens


def test_empty_text_costs_nothing() -> None:
    assert count_tokens("") == 0


def test_english_is_about_four_characters_per_token_or_more() -> None:
    text = "The deploy failed because the migration locked the users table for ten minutes."
    assert len(text) / 4 <= count_tokens(text) <= len(text) / 2


def test_cjk_counts_one_token_per_character() -> None:
    assert count_tokens("部署失败了") == 5


def test_emoji_are_not_free() -> None:
    assert count_tokens("🔥🔥🔥🔥") >= 4


def test_a_long_run_without_spaces_still_costs_tokens() -> None:
    assert count_tokens("a" * 4000) >= 1000


def test_an_image_costs_its_pixels_over_750_after_scaling_to_1568_on_its_long_side() -> None:
    assert image_tokens(750, 1) == 1
    assert image_tokens(1000, 1000) == 1334  # 1,000,000 / 750, rounded up
    # 2000x1000 is sent as 1568x784: 1,229,312 pixels.
    assert image_tokens(2000, 1000) == image_tokens(1568, 784) == 1640
    assert image_tokens(8000, 8000) == image_tokens(1568, 1568) == 3279
