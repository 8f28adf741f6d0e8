"""Relevance of short texts to a query: BM25 over a small in-memory corpus, and a character
trigram similarity that stands in for a semantic score until dense embeddings join.

Both are deterministic and need no model: the engine scores a few hundred units per turn.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

from cairn.core.tokens import count_tokens
from cairn.memory.terms import terms

__all__ = [
    "BM25",
    "bm25_scores",
    "cached_tokens",
    "keywords",
    "ordered_keywords",
    "trigram_similarity",
]

_K1 = 1.2
_B = 0.75
# Identifiers people refer back to: hosts (db-primary-2), tickets (INC-4521), versions, paths.
_IDENT = re.compile(r"\b[\w./:-]*(?:\d[\w./:-]*[a-z]|[a-z][\w./:-]*\d|[a-z]+[-_.][a-z][\w.-]*)\b")


@lru_cache(maxsize=16384)
def cached_tokens(text: str) -> int:
    """:func:`~cairn.core.tokens.count_tokens`, remembered: units and digests recur turn by turn."""
    return count_tokens(text)


@lru_cache(maxsize=16384)
def _doc_terms(text: str) -> Counter[str]:
    return Counter(terms(text))


def keywords(text: str) -> set[str]:
    """Distinctive identifiers in ``text`` (case-folded): names with digits, dashes or dots."""
    return set(ordered_keywords(text))


def ordered_keywords(text: str) -> list[str]:
    """:func:`keywords` in order of first appearance (what a message names first matters most)."""
    found = (m.group(0).strip(".:-/") for m in _IDENT.finditer(text.casefold()))
    return [k for k in dict.fromkeys(found) if k]


def bm25_scores(documents: Sequence[str], query: str) -> tuple[float, ...]:
    """:meth:`BM25.scores` of ``query`` over ``documents``, remembered for the last few pairs
    (one turn's prompt compiled at several budgets scores the same units for the same query)."""
    return _bm25_scores(tuple(documents), query)


@lru_cache(maxsize=8)
def _bm25_scores(documents: tuple[str, ...], query: str) -> tuple[float, ...]:
    return tuple(BM25(documents).scores(query))


class BM25:
    """Okapi BM25 over a fixed list of documents (their terms from :func:`terms`)."""

    def __init__(self, documents: Sequence[str]) -> None:
        self._docs = [_doc_terms(d) for d in documents]
        self._lengths = [sum(c.values()) for c in self._docs]
        self._avg = (sum(self._lengths) / len(self._lengths)) if self._lengths else 0.0
        df: Counter[str] = Counter()
        for doc in self._docs:
            df.update(doc.keys())
        n = len(self._docs)
        self._idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def scores(self, query: str) -> list[float]:
        """The score of every document for ``query`` (0 when no term matches)."""
        wanted = set(terms(query))
        out: list[float] = []
        for doc, length in zip(self._docs, self._lengths, strict=True):
            score = 0.0
            norm = _K1 * (1 - _B + _B * (length / self._avg if self._avg else 0.0))
            for term in wanted:
                tf = doc.get(term)
                if tf:
                    score += self._idf[term] * tf * (_K1 + 1) / (tf + norm)
            out.append(score)
        return out


@lru_cache(maxsize=16384)
def _trigrams(text: str) -> tuple[Counter[str], float]:
    folded = " " + " ".join(_doc_terms(text)) + " "
    grams = Counter(folded[i : i + 3] for i in range(len(folded) - 2))
    return grams, math.sqrt(sum(v * v for v in grams.values()))


@lru_cache(maxsize=65536)
def trigram_similarity(a: str, b: str) -> float:
    """Cosine similarity (0..1) of the character trigrams of two texts' distinct terms."""
    (ta, na), (tb, nb) = _trigrams(a), _trigrams(b)
    if not na or not nb:
        return 0.0
    if len(ta) > len(tb):
        ta, tb = tb, ta
    return sum(v * tb.get(k, 0) for k, v in ta.items()) / (na * nb)
