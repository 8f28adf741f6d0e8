"""A BERT encoder as an ONNX Runtime session, with int8 weights, built from the checkpoint.

No ONNX file is downloaded or written: the graph is assembled in memory from the same
safetensors weights the numpy encoder reads, and handed to ONNX Runtime as bytes. The six
layers' dense weights are quantised to int8 per output column (symmetric, scale = the
column's largest magnitude / 127); activations are quantised per call by
``DynamicQuantizeLinear``, which ONNX Runtime fuses with the integer product into one kernel.
Embeddings, layer norms, attention scores and GELU stay float32.

For all-MiniLM-L6-v2 on a short message this takes 0.83 ms of CPU where numpy float32 takes
5.8, and LoCoMo recall@5 / @10 do not move (ADR 0017). Vectors are within cosine 0.98 of the
float32 ones. The graph takes one text at a time, unpadded: activations are quantised per run,
so in a batch a text's vector would depend on its batch-mates (see MiniLM._embed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["BertShape", "OnnxBert", "quantised_columns"]

Weights = dict[str, npt.NDArray[np.float32]]

# Opset 20 has Gelu (the exact, erf form BERT uses) and LayerNormalization as single operators.
_OPSET = 20


@dataclass(frozen=True, slots=True)
class BertShape:
    """What the graph needs from the checkpoint's config."""

    layers: int
    heads: int
    hidden: int
    eps: float


def quantised_columns(
    weight: npt.NDArray[np.float32],
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """``weight`` (in, out) as int8 and one float32 scale per output column: w ≈ q * scale."""
    scale = np.abs(weight).max(axis=0) / np.float32(127.0)
    scale = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
    q = np.clip(np.rint(weight / scale), -127, 127).astype(np.int8)
    return q, scale


class _Graph:
    """Collects nodes and initialisers; each helper returns its output's name."""

    def __init__(self, weights: Weights) -> None:
        from onnx import numpy_helper

        self._w = weights
        self._array = numpy_helper.from_array
        self.nodes: list[Any] = []
        self.initialisers: list[Any] = []

    def constant(self, name: str, value: npt.NDArray[Any]) -> str:
        self.initialisers.append(self._array(np.asarray(value), name))
        return name

    def weight(self, name: str) -> str:
        return self.constant(name, self._w[name])

    def op(self, kind: str, *inputs: str, **attributes: Any) -> str:
        from onnx import helper

        out = f"{kind}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(kind, list(inputs), [out], **attributes))
        return out

    def dense(self, x: str, prefix: str) -> str:
        """x @ W + b with W in int8 (per-column scales), x quantised on the fly."""
        q, scale = quantised_columns(self._w[prefix + ".weight"])
        xq = self.op("DynamicQuantizeLinear", x)
        # DynamicQuantizeLinear has three outputs: the uint8 tensor, its scale, its zero point.
        node = self.nodes[-1]
        node.output.extend([xq + "_scale", xq + "_zero"])
        product = self.op("MatMulInteger", xq, self.constant(prefix + ".q", q), xq + "_zero")
        scales = self.op("Mul", xq + "_scale", self.constant(prefix + ".scale", scale))
        real = self.op("Mul", self.op("Cast", product, to=1), scales)  # 1: FLOAT
        return self.op("Add", real, self.weight(prefix + ".bias"))

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        return self.op(
            "LayerNormalization",
            x,
            self.weight(prefix + ".weight"),
            self.weight(prefix + ".bias"),
            axis=-1,
            epsilon=eps,
        )


def _model_bytes(weights: Weights, shape: BertShape) -> bytes:
    from onnx import TensorProto, checker, helper

    g = _Graph(weights)
    head = shape.hidden // shape.heads
    # The vocabulary's vectors in float16 (half the 47 MB; a token's vector moves by < 1e-4).
    words = weights["embeddings.word_embeddings.weight"].astype(np.float16)
    # Token, position and (all-zero) segment embeddings.
    width = g.op("Gather", g.op("Shape", "input_ids"), g.constant("one", np.array(1, np.int64)))
    positions = g.op("Range", g.constant("zero", np.array(0, np.int64)), width, "one")
    x = g.op(
        "Add",
        g.op(
            "Add",
            g.op("Cast", g.op("Gather", g.constant("words", words), "input_ids"), to=1),
            g.op("Gather", g.weight("embeddings.position_embeddings.weight"), positions),
        ),
        g.constant("segment", weights["embeddings.token_type_embeddings.weight"][0]),
    )
    x = g.layer_norm(x, "embeddings.LayerNorm", shape.eps)
    split = g.constant("split", np.array([0, 0, shape.heads, head], np.int64))
    merge = g.constant("merge", np.array([0, 0, shape.hidden], np.int64))
    scale = g.constant("scale", np.array(1.0 / np.sqrt(head), np.float32))
    for n in range(shape.layers):
        p = f"encoder.layer.{n}."

        def heads(t: str, perm: list[int]) -> str:
            return g.op("Transpose", g.op("Reshape", t, split), perm=perm)

        q = heads(g.dense(x, p + "attention.self.query"), [0, 2, 1, 3])
        k = heads(g.dense(x, p + "attention.self.key"), [0, 2, 3, 1])  # already transposed
        v = heads(g.dense(x, p + "attention.self.value"), [0, 2, 1, 3])
        scores = g.op("Mul", g.op("MatMul", q, k), scale)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), merge)
        attended = g.op("Add", x, g.dense(context, p + "attention.output.dense"))
        x = g.layer_norm(attended, p + "attention.output.LayerNorm", shape.eps)
        inner = g.op("Gelu", g.dense(x, p + "intermediate.dense"))
        x = g.layer_norm(
            g.op("Add", x, g.dense(inner, p + "output.dense")), p + "output.LayerNorm", shape.eps
        )
    g.nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    graph = helper.make_graph(
        g.nodes,
        "bert",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "width"])],
        [
            helper.make_tensor_value_info(
                "hidden", TensorProto.FLOAT, ["batch", "width", shape.hidden]
            )
        ],
        g.initialisers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)])
    model.ir_version = 9  # the newest every supported onnxruntime reads
    checker.check_model(model)
    data: bytes = model.SerializeToString()
    return data


class OnnxBert:
    """The encoder's forward pass in ONNX Runtime, on the calling thread.

    ``forward(ids)`` returns the last hidden states of unpadded token ids, like the numpy
    encoder's layers do; pooling stays with the caller. Raises ImportError when onnx or
    onnxruntime is missing.
    """

    def __init__(self, weights: Weights, shape: BertShape) -> None:
        import onnxruntime as ort  # type: ignore[import-untyped]

        options = ort.SessionOptions()
        # One thread: a worker runs turns in parallel already (as the numpy encoder limits BLAS).
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # errors only: fusions are reported at warning level
        self._session = ort.InferenceSession(
            _model_bytes(weights, shape), options, providers=["CPUExecutionProvider"]
        )

    def forward(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """Hidden states (batch, width, hidden) for token ``ids``, none of them padding."""
        (hidden,) = self._session.run(["hidden"], {"input_ids": ids})
        out: npt.NDArray[np.float32] = hidden
        return out
