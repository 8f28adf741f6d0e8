"""Whole numbers from outside (request numbers, ids, counts, sizes), read within bounds.

Every entry point (console commands, Slack buttons and slash commands, Matrix reactions, CLI
arguments, settings) reads a number a person or a platform gave through :func:`bounded_int`,
so an absurd one is refused with a message naming it instead of overflowing a 64-bit
database column or an interpreter limit further in (docs/adr/0037).
"""

from __future__ import annotations

import math

from cairn.core.errors import InvalidInput

__all__ = ["ID_MAX", "SETTING_MAX", "bounded_int", "bounded_setting"]

# The largest id a row can have: SQLite's INTEGER and PostgreSQL's BIGINT are 64-bit signed.
ID_MAX = 2**63 - 1
# No setting (a count, a size, a duration in seconds, a weight) is meant to be larger: one
# billion seconds is over 31 years, and every timer, TTL and timedelta holds it.
SETTING_MAX = 1_000_000_000

# Longest text read as a number: ID_MAX has 19 digits; anything longer is out of bounds, and
# is never handed to int() (which refuses over 4,300 digits, and is slow well before that).
_MAX_DIGITS = 20


def bounded_int(value: object, what: str, *, low: int = 1, high: int = ID_MAX) -> int:
    """``value`` (an int, or text of ASCII digits with an optional leading ``#`` or sign) as
    an int from ``low`` to ``high``.

    Raises InvalidInput naming ``what`` ("request number", "memory id") and the bounds when
    ``value`` is not a whole number, or is one outside them; the message quotes at most a few
    characters of it.
    """
    if isinstance(value, bool):
        raise InvalidInput(_refusal(what, low, high, repr(value)))
    if isinstance(value, int):
        number = value
    else:
        text = str(value).strip().removeprefix("#")
        digits = text[1:] if text[:1] in {"-", "+"} else text
        if not digits or not digits.isascii() or not digits.isdigit():
            raise InvalidInput(_refusal(what, low, high, _quoted(text)))
        if len(digits.lstrip("0")) > _MAX_DIGITS:
            raise InvalidInput(_refusal(what, low, high, f"a number of {len(digits)} digits"))
        number = int(text)
    if not low <= number <= high:
        raise InvalidInput(_refusal(what, low, high, _shown(number)))
    return number


def bounded_setting(value: float, what: str) -> str | None:
    """What is wrong with the numeric setting ``what`` of value ``value`` (not finite, or
    beyond ±SETTING_MAX), or None when it is within bounds."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{what} must be a finite number, not {value}"
    if abs(value) > SETTING_MAX:
        return f"{what} must be at most {SETTING_MAX:,}, not {_shown(value)}"
    return None


def _shown(number: float) -> str:
    """``number`` as written, or how many digits it has when that is too long to quote."""
    text = str(number)
    return text if len(text) <= 24 else f"a number of {len(text.lstrip('-'))} digits"


def _refusal(what: str, low: int, high: int, shown: str) -> str:
    return f"{what} must be a whole number from {low} to {high}, not {shown}"


def _quoted(text: str) -> str:
    shown = "".join(ch if ch.isprintable() else "?" for ch in text[:24])
    return repr(shown + ("…" if len(text) > 24 else ""))
