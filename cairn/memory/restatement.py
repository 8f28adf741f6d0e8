"""Whether a new text says again what a retracted memory said: retraction by meaning.

A retraction must survive the small edits people (and attackers) make when they send a text
again: a synonym or an abbreviation ("DB", "Mon"), an added word or a filler ("FYI", ", thanks"),
a typo, look-alike letters of another script, invisible characters, another word order. A text
that changes what is asserted (another value, another subject, a negation dropped) is a
correction, not a restatement, and must be stored.

The test is on the words that carry the claim: every term of the retracted text is in the new
one (a typo of one letter counts as the word, a term with digits must be exact), the new one
adds at most :data:`MAX_ADDED` other terms and no new number or identifier, and both are
negated alike. Measured on tests/data/retraction_edits.json (docs/adr/0035).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from cairn.core.injection import letters
from cairn.memory.periods import MONTHS
from cairn.memory.terms import STOPWORDS, stem

__all__ = ["MAX_ADDED", "Claim", "claim", "restates"]

# How many terms a re-send may add to a retracted text ("the staging database server is db-7")
# and still be the same claim.
MAX_ADDED = 2

_NEGATIONS = frozenset(
    ["not", "no", "never", "without", "cannot", "nobody", "nothing", "none", "nor"]
)
# Words that add nothing to a claim: greetings, thanks, "FYI", "now", "btw".
_FILLERS = frozenset(
    """fyi psa btw thanks thank thx ty pls plz now heads up note reminder update just also again
    ok okay hey hi hello all team folks everyone actually really quick guys again still
    currently anymore officially version""".split()  # noqa: SIM905
)
# Abbreviations and synonyms, each read as one word, and phrases read as one.
_SYNONYMS = {
    "db": "database", "dbs": "database", "gw": "gateway", "mgr": "manager", "prod": "production",
    "env": "environment", "repo": "repository", "config": "configuration", "svc": "service",
    "k8s": "kubernetes", "msg": "message", "info": "information", "pw": "password",
    "pwd": "password", "required": "needed", "require": "need", "requires": "needs",
    "mandatory": "needed", "necessary": "needed", "each": "every", "mon": "monday",
    "tue": "tuesday", "tues": "tuesday", "wed": "wednesday", "thu": "thursday",
    "thur": "thursday", "thurs": "thursday", "fri": "friday", "sat": "saturday",
    "sun": "sunday", "approx": "about", "w": "with", "wk": "week", "mins": "minutes",
    "min": "minutes", "hrs": "hours", "hr": "hours", "secs": "seconds", "sec": "seconds",
    "cert": "certificate", "certs": "certificate", "pg": "postgres", "postgresql": "postgres",
    "infra": "infrastructure", "deployment": "deploy", "deployments": "deploy",
    "jan": "january", "feb": "february", "mar": "march", "apr": "april", "jun": "june",
    "jul": "july", "aug": "august", "sep": "september", "sept": "september", "oct": "october",
    "nov": "november", "dec": "december",
}  # fmt: skip
_PHRASES = (
    (re.compile(r"\bon call\b"), "oncall"),
    (re.compile(r"\b(?:every|each) night\b"), "nightly"),
    (re.compile(r"\b(?:every|each) day\b"), "daily"),
    (re.compile(r"\b(?:every|each) week\b"), "weekly"),
    (re.compile(r"\bcan['\u2019]t\b"), "can not"),
    (re.compile(r"\bwon['\u2019]t\b"), "will not"),
    (re.compile(r"(?<=[a-z])n['\u2019]t\b"), " not"),
)
# Hyphens inside a word ("on-call", "db-7") and a version's "v" ("v7.4") do not count.
_JOINED = re.compile(r"(?<=[a-z0-9])-(?=[a-z0-9])")
_VERSION = re.compile(r"\bv(?=\d)")
_TOKEN = re.compile(r"[a-z0-9](?:[a-z0-9._:/@]*[a-z0-9])?")


@dataclass(frozen=True, slots=True)
class Claim:
    """The words a text asserts something with: its terms (folded, synonyms read as one) and
    whether it is negated."""

    terms: frozenset[str]
    negated: bool


# Times and dates written differently with the same value: "3pm", "3 PM", "15:00", "03:00".
_CLOCK = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s?(am|pm)\b")
_LEADING_ZERO = re.compile(r"\b0(\d):(\d{2})\b")
_MONTHS = list(MONTHS)  # by number, January first
_DAY_MONTH_YEAR = re.compile(
    r"\b(\d{1,2})(?:st|nd|rd|th)?\s+("
    + "|".join(m[:3] + r"[a-z]*" for m in _MONTHS)
    + r")\.?,?\s+(\d{4})\b"
)
_MONTH_DAY_YEAR = re.compile(
    r"\b("
    + "|".join(m[:3] + r"[a-z]*" for m in _MONTHS)
    + r")\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b"
)


def _clock(match: re.Match[str]) -> str:
    hour, minutes, half = int(match.group(1)), match.group(2) or "00", match.group(3)
    if hour > 12:
        return match.group(0)
    hour = hour % 12 + (12 if half == "pm" else 0)
    return f"{hour}:{minutes}"


def _iso(year: str, month: str, day: str) -> str:
    number = next((i for i, m in enumerate(_MONTHS, 1) if m.startswith(month[:3])), 0)
    return f"{year}-{number:02d}-{int(day):02d}" if number else f"{day} {month} {year}"


def _same_values(text: str) -> str:
    """``text`` with times and dates in one form each (15:00, 2024-09-15)."""
    text = _CLOCK.sub(_clock, text)
    text = _LEADING_ZERO.sub(r"\1:\2", text)
    text = _DAY_MONTH_YEAR.sub(lambda m: _iso(m.group(3), m.group(2), m.group(1)), text)
    return _MONTH_DAY_YEAR.sub(lambda m: _iso(m.group(3), m.group(1), m.group(2)), text)


@lru_cache(maxsize=16384)
def claim(text: str) -> Claim:
    """The claim ``text`` makes, as :func:`restates` compares them. Never raises."""
    folded = _same_values(letters(text))
    for pattern, replacement in _PHRASES:
        folded = pattern.sub(replacement, folded)
    folded = _VERSION.sub("", _JOINED.sub("", folded))
    found: set[str] = set()
    negated = False
    for token in _TOKEN.findall(folded):
        if token in _NEGATIONS:
            negated = True
            continue
        token = _SYNONYMS.get(token, token)
        if token in STOPWORDS or token in _FILLERS:
            continue
        found.add(token)
    return Claim(frozenset(found), negated)


def restates(new: str, retracted: str) -> bool:
    """Whether ``new`` says again what ``retracted`` said (see the module's docstring)."""
    old, fresh = claim(retracted), claim(new)
    if old.negated != fresh.negated or len(old.terms) < 2:
        return False
    unmatched = set(fresh.terms)
    for term in old.terms:
        if term in unmatched:
            unmatched.discard(term)
            continue
        like = next((t for t in unmatched if _same_word(term, t)), None)
        if like is None:
            return False  # the claim lost a word: another subject, another value
        unmatched.discard(like)
    if any(any(c.isdigit() for c in t) for t in unmatched):
        return False  # a new number or identifier: more than was said
    return len(unmatched) <= MAX_ADDED


def _same_word(a: str, b: str) -> bool:
    """Whether two terms are one word: the same stem ("deploys", "deploy"; "owned", "owns";
    "running", "runs"), or one typing slip apart."""
    if a.isalpha() and b.isalpha() and (stem(a) == stem(b) or _root(a) == _root(b)):
        return True
    return _one_slip(a, b)


def _root(word: str) -> str:
    """``word`` without a verb or plural ending, its doubled last consonant undone ("running"
    -> "run", "owned" -> "own"); kept whole when that would leave under three letters."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if len(word) >= 4 and word[-1] == word[-2] and word[-1] not in "aeiouls":
                word = word[:-1]
            break
    return word


def _one_slip(a: str, b: str) -> bool:
    """Whether two words of letters differ by one typing slip: a letter added, lost or
    changed (words of five letters or more), or two neighbours swapped (four or more: "prot");
    words with digits never do."""
    if not (a.isalpha() and b.isalpha()) or min(len(a), len(b)) < 4 or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        swapped = len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]
        return swapped or (len(diff) == 1 and len(a) >= 5)
    if min(len(a), len(b)) < 5:
        return False
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))
