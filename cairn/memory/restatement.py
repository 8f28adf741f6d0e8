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

from cairn.core.injection import normalise
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
    currently anymore officially""".split()  # noqa: SIM905
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


@lru_cache(maxsize=16384)
def claim(text: str) -> Claim:
    """The claim ``text`` makes, as :func:`restates` compares them. Never raises."""
    folded = normalise(text)
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
    """Whether two terms are one word: the same stem ("deploys", "deploy"), or one typing
    slip apart."""
    if a.isalpha() and b.isalpha() and stem(a) == stem(b):
        return True
    return _one_slip(a, b)


def _one_slip(a: str, b: str) -> bool:
    """Whether two words of letters, five or more long, differ by one typing slip (a letter
    added, lost or changed, or two neighbours swapped); words with digits never do."""
    if not (a.isalpha() and b.isalpha()) or min(len(a), len(b)) < 5 or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (
            len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]
        )
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))
