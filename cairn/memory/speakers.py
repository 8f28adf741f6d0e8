"""Who wrote a memory, as the words a question would name them by.

A memory keeps its author as the platform gave it: a display name ("Caroline"), a Matrix id
("@caroline:example.org"), an e-mail-like id ("caroline@example.org"), or an opaque id
("U024BE7LH"). Recall prefers the memories of a person a question names ("what did Caroline
paint?"); this module says which words name an author, so the comparison is one of terms.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from cairn.memory.terms import stem, terms

__all__ = ["named_speaker", "speaker_terms", "without_speakers"]

# A word of a query with its possessive ("Kate's", "James'"), as :func:`without_speakers`
# drops it.
_WORD = re.compile("[^\\W_]+(?:['\u2019]s\\b|(?<=s)['\u2019](?!\\w))?", re.UNICODE)

# An id's server or domain names no one: "@caroline:example.org", "caroline@example.org".
_LOCAL_PART = re.compile(r"^@?([^:@]*)")


@lru_cache(maxsize=4096)
def speaker_terms(author: str) -> frozenset[str]:
    """The terms that name ``author``: those of the part of an id before its server or domain.

    Opaque ids give terms that no question uses ("u024be7lh"), so they never match.
    """
    match = _LOCAL_PART.match(author.strip())
    return frozenset(terms(match.group(1) if match else author))


def named_speaker(author: str, asked: frozenset[str]) -> bool:
    """Whether a query with the terms ``asked`` names ``author`` (every term of the name)."""
    name = speaker_terms(author)
    return bool(name) and name <= asked


def without_speakers(query: str, authors: Iterable[str]) -> str:
    """``query`` without the names of the ``authors`` it names, for the dense search.

    A sentence embedding of "What foods does Nebraas like?" sits near every turn Nebraas
    wrote ("Nebraas: ..."), not near "I honestly like eggs in any form": the name outweighs
    what is asked. Recall prefers the named person's words by the author instead
    (:func:`named_speaker`), so the dense search is asked only what the question is about.
    A query that is nothing but names is returned as it is.
    """
    asked = frozenset(terms(query))
    named: set[str] = set()
    for author in authors:
        if named_speaker(author, asked):
            named |= speaker_terms(author)
    if not named:
        return query
    kept = _WORD.sub(lambda m: "" if _term(m.group()) in named else m.group(), query)
    kept = re.sub(r"\s+([?!.,;:])", r"\1", " ".join(kept.split()))
    return kept if terms(kept) else query


def _term(word: str) -> str:
    """The term a query's word (possessive and all) stands for, as :func:`terms` folds it."""
    found = terms(re.sub("['\u2019]s?$", "", word))
    return found[0] if found else stem(word.casefold())
