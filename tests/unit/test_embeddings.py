"""The embedding provider chain and the numpy MiniLM: real weights, no model hub."""

from __future__ import annotations

import numpy as np
import pytest

from cairn.errors import ConfigError
from cairn.memory.embed import MiniLM, build_embedder, packaged_model_path


def test_auto_picks_the_packaged_model() -> None:
    embedder = build_embedder("auto")
    assert embedder is not None
    assert embedder.dim == 384
    assert embedder.name.startswith("minilm:")


def test_none_means_lexical_only_and_unknown_specs_are_refused() -> None:
    assert build_embedder("none") is None
    with pytest.raises(ConfigError, match="CAIRN_EMBEDDINGS"):
        build_embedder("word2vec:nope")
    with pytest.raises(ConfigError, match="cannot load"):
        build_embedder("path:/no/such/model")


def test_vectors_are_unit_length_and_similar_sentences_are_closer() -> None:
    embedder = build_embedder("packaged")
    assert embedder is not None
    v = embedder.embed(
        [
            "The database backups run nightly",
            "Postgres snapshots are taken every night",
            "I like cats",
        ]
    )
    assert v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_numpy_minilm_matches_sentence_transformers() -> None:
    sentence_transformers = pytest.importorskip("sentence_transformers")
    folder = packaged_model_path()
    assert folder is not None
    texts = ["Deploys are frozen until Monday", "hello", "Caroline: I went to a support group."]
    reference = sentence_transformers.SentenceTransformer(str(folder), device="cpu").encode(
        texts, normalize_embeddings=True
    )
    ours = MiniLM(folder).embed(texts)
    assert np.abs(reference - ours).max() < 1e-3
