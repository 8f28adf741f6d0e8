"""Who wrote a memory, as the words a question would name them by.

A memory keeps its author as the platform gave it: a display name ("Caroline"), a Matrix id
("@caroline:example.org"), an e-mail-like id ("caroline@example.org"), or an opaque id
("U024BE7LH"). Recall prefers the memories of a person a question names ("what did Caroline
paint?"); this module says which words name an author, so the comparison is one of terms.
"""

from __future__ import annotations

import re
from functools import lru_cache

from cairn.memory.terms import terms

__all__ = ["named_speaker", "speaker_terms"]

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
