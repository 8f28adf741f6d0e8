"""The all-MiniLM-L6-v2 family run without torch: a BERT sentence encoder from a checkpoint.

:class:`MiniLM` reads a sentence-transformers folder (``config.json``, ``model.safetensors``,
``tokenizer.json``) and runs the layers in ONNX Runtime with int8 weights
(:mod:`cairn.memory.onnx_bert`) or in float32 numpy. :mod:`cairn.memory.embed` picks it in
its provider chain.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import math
import threading
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import safetensors
import safetensors.numpy
from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

from cairn.core.errors import ConfigError
from cairn.memory.onnx_bert import BertShape, OnnxBert

__all__ = ["MiniLM"]

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]

_LINEAR = ("dense.weight", "query.weight", "key.weight", "value.weight")


def _read_safetensors(path: Path) -> dict[str, npt.NDArray[np.float32]]:
    """The checkpoint's tensors as float32, named without ``bert.``, linear weights (in, out)."""
    try:
        raw = safetensors.numpy.load_file(path)
    except (safetensors.SafetensorError, KeyError, TypeError) as exc:  # or a dtype numpy lacks
        raise ConfigError(f"{path}: {exc}") from exc
    tensors: dict[str, npt.NDArray[np.float32]] = {}
    for name, array in raw.items():
        if name.endswith("position_ids"):
            continue
        if "encoder." in name and name.endswith(_LINEAR):
            array = np.ascontiguousarray(array.T)  # (in, out), ready for x @ W
        tensors[name.removeprefix("bert.")] = array.astype(np.float32)
    return tensors


def _layer_norm(x: Vectors, gamma: Vectors, beta: Vectors, eps: float) -> Vectors:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    out: Vectors = (x - mean) / np.sqrt(var + eps) * gamma + beta
    return out


def _gelu_fast(x: Vectors) -> Vectors:
    # BERT's gelu in its tanh form: within 1e-3 of the erf form, and fast in numpy.
    inner = np.tanh(np.float32(math.sqrt(2.0 / math.pi)) * (x + np.float32(0.044715) * x * x * x))
    out: Vectors = (np.float32(0.5) * x * (np.float32(1.0) + inner)).astype(np.float32)
    return out


def _return_freed_memory() -> None:
    # Building the session passes ~400 MB through the heap (float32 weights, the graph, its
    # bytes); glibc keeps what was freed, 117 MB of resident memory here. Hand it back.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


class MiniLM:
    """A BERT sentence encoder (mean pooling, normalised) from a model folder.

    The folder is a sentence-transformers checkpoint: ``config.json``, ``model.safetensors`` and
    ``tokenizer.json``. ``engine`` ``onnx`` runs the layers in ONNX Runtime with int8 weights
    (:mod:`cairn.memory.onnx_bert`, about 7x less CPU), ``numpy`` in float32 numpy, ``auto``
    the first that loads. Raises ConfigError when a file is missing or unreadable, or when the
    engine asked for cannot load.
    """

    def __init__(
        self, folder: Path, *, max_tokens: int = 256, batch: int = 32, engine: str = "auto"
    ) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - tokenizers is a runtime dependency
            raise ConfigError("the local embedding model needs the `tokenizers` package") from exc
        try:
            config = json.loads((folder / "config.json").read_text())
            self._w = _read_safetensors(folder / "model.safetensors")
            self._tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(f"cannot load the embedding model in {folder}: {exc}") from exc
        self._cfg = BertShape(
            layers=int(config["num_hidden_layers"]),
            heads=int(config["num_attention_heads"]),
            hidden=int(config["hidden_size"]),
            eps=float(config.get("layer_norm_eps", 1e-12)),
        )
        self._tok.enable_truncation(
            min(max_tokens, int(config.get("max_position_embeddings", 512)))
        )
        self._tok.no_padding()
        self._onnx = self._onnx_engine(engine)
        self.engine = "onnx-int8" if self._onnx is not None else "numpy"
        if self._onnx is not None:
            self._w = {}  # the session holds its own copy; the float32 layers are not needed
            _return_freed_memory()
        self._batch = batch
        self._lock = threading.Lock()
        # Found once: building a controller scans the loaded libraries (~0.3 ms a time).
        self._blas = ThreadpoolController()
        self.name = f"minilm:{folder}" + (" (onnx int8)" if self._onnx is not None else "")
        self.dim = self._cfg.hidden

    def _onnx_engine(self, engine: str) -> OnnxBert | None:
        if engine not in {"auto", "onnx", "numpy"}:
            raise ConfigError(f"unknown embedding engine {engine!r}; use auto, onnx or numpy")
        if engine == "numpy":
            return None
        try:
            return OnnxBert(self._w, self._cfg)
        except ImportError as exc:
            if engine == "onnx":
                raise ConfigError(f"the onnx engine needs onnx and onnxruntime: {exc}") from exc
            log.info("onnxruntime is not installed; embeddings run in numpy (about 7x the CPU)")
            return None

    def embed(self, texts: list[str]) -> Vectors:
        """Unit vectors for ``texts`` (batched by length, so padding stays small)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            encodings = self._tok.encode_batch(texts)
        if self._onnx is not None:
            return self._embed(encodings)
        # One BLAS thread: on a busy machine (workers, other services) OpenBLAS threads spin
        # against each other and a single short text takes 20x longer than on one thread.
        with self._blas.limit(limits=1):
            return self._embed(encodings)

    def _embed(self, encodings: list[Any]) -> Vectors:
        out = np.zeros((len(encodings), self.dim), dtype=np.float32)
        if self._onnx is not None:
            # One text per run: activations are quantised per run, so in a batch a text's
            # vector would depend on its batch-mates and their padding (cosine 0.98-0.99 to
            # its vector alone). Batching saved little anyway (0.83 -> 0.68 ms a text).
            for i, encoding in enumerate(encodings):
                ids = np.array([encoding.ids], dtype=np.int64)
                out[i] = self._forward(ids, np.ones(ids.shape, dtype=np.float32))[0]
            return out
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        for chunk in self._chunks([len(encodings[i].ids) for i in order], order):
            width = max(len(encodings[i].ids) for i in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.float32)
            for row, i in enumerate(chunk):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1.0
            out[chunk] = self._forward(ids, mask)
        return out

    def _chunks(self, lengths: list[int], order: list[int]) -> list[list[int]]:
        # Texts sorted by length, in batches of at most self._batch whose longest is at most
        # twice the shortest plus 16 tokens: every row is padded to the longest, so a long text
        # in a batch of short ones would multiply their cost.
        chunks: list[list[int]] = []
        first = 0
        for i, (n, index) in enumerate(zip(lengths, order, strict=True)):
            if not chunks or len(chunks[-1]) >= self._batch or n > 2 * lengths[first] + 16:
                chunks.append([])
                first = i
            chunks[-1].append(index)
        return chunks

    def _forward(self, ids: npt.NDArray[np.int64], mask: Vectors) -> Vectors:
        x = self._onnx.forward(ids) if self._onnx is not None else self._layers(ids, mask)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: Vectors = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return result

    def _layers(self, ids: npt.NDArray[np.int64], mask: Vectors) -> Vectors:
        w, cfg = self._w, self._cfg
        batch, width = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:width][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = _layer_norm(
            x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], cfg.eps
        )
        head = cfg.hidden // cfg.heads
        bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        for n in range(cfg.layers):
            p = f"encoder.layer.{n}."

            def dense(t: Vectors, name: str, p: str = p) -> Vectors:
                weight = w[p + name + ".weight"]  # stored transposed and contiguous at load
                flat = t.reshape(-1, t.shape[-1]) @ weight + w[p + name + ".bias"]
                out: Vectors = flat.reshape(*t.shape[:-1], weight.shape[1])
                return out

            def split(t: Vectors) -> Vectors:
                return t.reshape(batch, width, cfg.heads, head).transpose(0, 2, 1, 3)

            q = split(dense(x, "attention.self.query"))
            k = split(dense(x, "attention.self.key"))
            v = split(dense(x, "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, width, cfg.hidden)
            x = _layer_norm(
                x + dense(ctx, "attention.output.dense"),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                cfg.eps,
            )
            inner = _gelu_fast(dense(x, "intermediate.dense"))
            x = _layer_norm(
                x + dense(inner, "output.dense"),
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
                cfg.eps,
            )
        return x
