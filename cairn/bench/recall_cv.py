"""``cairn bench recall --cv``: recall weights chosen by leave-one-conversation-out.

Tuning a weight on the five shared LoCoMo conversations and reporting recall on the same five
flatters it: the figure says how well the weight fits them, not how it does on a conversation
it never saw. So every weight recall is tuned by is chosen here by cross-validation: for each
conversation, the grid point that scores best on the other four is taken, and scored on the
one held out. The held-out figure (over all five folds) is what to expect on new
conversations; it is printed beside the in-sample one (the best grid point scored on all five)
and beside the shipped defaults. Recall is also broken down by LoCoMo's question categories.

Each conversation is stored once; every grid point then re-ranks the same candidates through
the real :class:`~cairn.memory.recall.Recall` with its own weights.
"""

from __future__ import annotations

import itertools
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from cairn.bench.locomo import (
    CATEGORIES,
    _scratch_store,
    conversation_files,
    evidence_of,
    store_conversation,
)
from cairn.core.errors import InvalidInput
from cairn.core.settings import MemorySettings
from cairn.memory.embed import Embedder
from cairn.memory.recall import Recall
from cairn.memory.scope import Scope

__all__ = ["GRID", "CrossValidation", "run_cross_validation"]

# The weights recall is tuned by, and the values tried (ADR 0030 says why these; ADR 0048
# added lexical 0.4, once the dense query no longer names the people asked about).
GRID: tuple[dict[str, float], ...] = tuple(
    {
        "weight_context": context,
        "weight_lexical": lexical,
        "weight_dense": round(1 - lexical, 2),
        "weight_speaker": speaker,
    }
    for context, lexical, speaker in itertools.product(
        (0.3, 0.5, 0.7, 0.9), (0.4, 0.5, 0.6, 0.7), (0.0, 0.25, 0.5, 1.0)
    )
)


@dataclass(frozen=True, slots=True)
class _Question:
    conversation: str  # "set/stem"
    scope: Scope
    text: str
    evidence: frozenset[str]
    asked_at: datetime
    dia_of: dict[int, str]
    category: str  # its set's name for it
    vector: list[float] | None

    @property
    def set(self) -> str:
        return self.conversation.split("/", 1)[0]


@dataclass
class CrossValidation:
    """Per-question recall for each grid point, and what the folds chose."""

    ks: tuple[int, ...]
    questions: list[_Question] = field(default_factory=list)
    # grid index -> question index -> recall at each k (in the order of ks)
    scores: list[list[tuple[float, ...]]] = field(default_factory=list)
    default: list[tuple[float, ...]] = field(default_factory=list)

    def _figures(self, rows: Sequence[tuple[float, ...]], which: Sequence[int]) -> dict[str, Any]:
        """Recall at each k over ``which``, then per category, then per set (and its
        categories) when there are several sets."""
        figures = self._recall(rows, which)
        figures["by_category"] = self._by_category(rows, which)
        sets = dict.fromkeys(self.questions[q].set for q in which)
        if len(sets) > 1:
            figures["by_set"] = {}
            for name in sets:
                mine = [q for q in which if self.questions[q].set == name]
                figures["by_set"][name] = self._recall(rows, mine) | {
                    "by_category": self._by_category(rows, mine)
                }
        return figures

    def _recall(self, rows: Sequence[tuple[float, ...]], which: Sequence[int]) -> dict[str, Any]:
        return {
            f"recall@{k}": round(statistics.fmean(rows[q][i] for q in which), 4) if which else 0.0
            for i, k in enumerate(self.ks)
        } | {"n": len(which)}

    def _by_category(
        self, rows: Sequence[tuple[float, ...]], which: Sequence[int]
    ) -> dict[str, Any]:
        names = dict.fromkeys(self.questions[q].category for q in which)
        return {
            name: self._recall(rows, [q for q in which if self.questions[q].category == name])
            for name in names
        }

    def _objective(self, point: int, which: Sequence[int]) -> float:
        """What a grid point is chosen by: its mean recall over ``which`` at every k."""
        rows = self.scores[point]
        return statistics.fmean(statistics.fmean(rows[q]) for q in which) if which else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` shape: defaults, in-sample best, held-out, and each fold's choice."""
        everyone = range(len(self.questions))
        best = max(range(len(GRID)), key=lambda p: self._objective(p, everyone))
        conversations = sorted({q.conversation for q in self.questions})
        held_out: list[tuple[float, ...]] = [()] * len(self.questions)
        folds = []
        for name in conversations:
            train = [i for i, q in enumerate(self.questions) if q.conversation != name]
            test = [i for i, q in enumerate(self.questions) if q.conversation == name]
            chosen = max(range(len(GRID)), key=lambda p: self._objective(p, train))
            for i in test:
                held_out[i] = self.scores[chosen][i]
            folds.append(
                {"held_out": name, "chosen": GRID[chosen]}
                | {
                    f"recall@{k}": round(statistics.fmean(held_out[q][j] for q in test), 4)
                    for j, k in enumerate(self.ks)
                }
            )
        return {
            "defaults": self._figures(self.default, everyone),
            "in_sample": {"chosen": GRID[best]} | self._figures(self.scores[best], everyone),
            "held_out": self._figures(held_out, everyone),
            "folds": folds,
            "grid": list(GRID),
        }


def run_cross_validation(
    data: Path | Sequence[Path],
    ks: tuple[int, ...],
    embedder: Embedder | None,
    defaults: MemorySettings,
    progress: Callable[[str], None] | None = None,
) -> CrossValidation:
    """Store every conversation in ``data`` (a folder, or several: one set each) once, score
    each question under the defaults and every grid point. Raises InvalidInput when there are
    fewer than two conversations."""
    files = conversation_files([data] if isinstance(data, Path) else data)
    if len(files) < 2:
        raise InvalidInput("--cv needs at least two conversation files")
    report = CrossValidation(ks=ks)
    top = max(ks)
    with _scratch_store(embedder, defaults) as store:
        for name, path in files:
            report.questions += _questions_of(store, name, path)
            if progress:
                progress(f"{name}/{path.name}: stored; {len(report.questions)} questions so far")
        readers = [defaults] + [defaults.model_copy(update=point) for point in GRID]
        for n, weights in enumerate(readers):
            recall = Recall(store.db, store.index, embedder, weights, top)
            rows = [_score(recall, q, ks, top) for q in report.questions]
            if n == 0:
                report.default = rows
            else:
                report.scores.append(rows)
            if progress and n:
                progress(f"grid point {n}/{len(GRID)}: {json.dumps(GRID[n - 1])}")
    return report


def _questions_of(store: Any, name: str, path: Path) -> list[_Question]:
    stored = store_conversation(store, path)
    questions = []
    for item in stored.questions:
        text = str(item["question"])
        vector = store.query_vector(text, stored.scope)  # once, for every grid point
        questions.append(
            _Question(
                f"{name}/{path.stem}",
                stored.scope,
                text,
                frozenset(evidence_of(item)),
                stored.asked_at,
                stored.dia_of,
                CATEGORIES[stored.format][int(item["category"])],
                vector,
            )
        )
    return questions


def _score(recall: Recall, q: _Question, ks: tuple[int, ...], top: int) -> tuple[float, ...]:
    found = recall.recall(q.text, q.scope, top, now=q.asked_at, touch=False, vector=q.vector)
    ids = [r.memory.id for r in found]
    return tuple(
        len(q.evidence & {q.dia_of.get(mid) for mid in ids[:k]}) / len(q.evidence) for k in ks
    )
