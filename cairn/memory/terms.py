"""Lexical terms of a text and their sparse-vector encoding (term hashing, BM25-like weights).

Qdrant applies the IDF part (``Modifier.IDF``); this module supplies saturated term frequency,
so a sparse dot product behaves like BM25 without a vocabulary to keep in sync.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections import Counter
from functools import lru_cache

__all__ = ["STOPWORDS", "sparse_vector", "stem", "term_set", "terms"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_K1 = 1.2
STOPWORDS = frozenset(
    """a an and are as at be but by do does did for from has have he her his i
    if in into is it its me my no not of on or our she so that the their them
    then there these they this to us was we were what when where which who why will
    with you your about know tell remember recall anything something please can could
    would should""".split()  # noqa: SIM905
)


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def stem(word: str) -> str:
    """``word`` without a plural or verb ending ("deploys" -> "deploy").

    A light plural/verb-suffix strip: enough for "deploys" ~ "deploy", cheap and predictable.
    """
    for suffix in ("ies", "es", "s", "ing", "ed"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def terms(text: str) -> list[str]:
    """The searchable terms of ``text``: case- and accent-folded, stopwords dropped, stemmed."""
    return [stem(w) for w in _WORD.findall(_fold(text)) if w not in STOPWORDS]


@lru_cache(maxsize=8192)
def term_set(text: str) -> frozenset[str]:
    """The distinct :func:`terms` of ``text``, remembered for the last texts asked about.

    For the texts of stored memories, which recall and the write checks read again and again
    (the newest 500 that share a word with a query, when recall runs without the index): a
    lookup instead of folding, splitting and stemming each one every time.
    """
    return frozenset(terms(text))


def sparse_vector(text: str) -> tuple[list[int], list[float]]:
    """Indices and weights of ``text``'s terms; empty lists when it has none.

    Weights are BM25's saturated term frequency without length normalisation: on LoCoMo,
    normalising by length (b = 0.5 or 0.75) lowered recall, since longer turns say more.
    """
    weights: dict[int, float] = {}
    for term, tf in Counter(terms(text)).items():
        index = zlib.crc32(term.encode()) & 0x7FFFFFFF
        # Two terms hashing alike share a slot; Qdrant rejects repeated indices.
        weights[index] = weights.get(index, 0.0) + tf * (_K1 + 1) / (tf + _K1)
    ordered = sorted(weights)
    return ordered, [weights[i] for i in ordered]
