"""all-MiniLM-L6-v2's forward pass on ONNX Runtime, built from the weights numpy loaded.

The graph is written here, op by op, from the same :class:`~deltamem.embed.minilm.MiniLMModel`
the numpy forward uses: no torch, no export step, no second copy of the weights (they are handed
to ONNX Runtime as external initializers that point at the numpy arrays). It computes what
:meth:`MiniLMModel.forward` computes -- embeddings + LayerNorm, six encoder layers, mean pooling
over the mask -- and returns the same un-normalised pooled vectors; after normalisation they
agree with the numpy forward to ~1e-7 (tested to stay under 1e-5, the tolerance the calibrated
thresholds allow).

ONNX Runtime fuses the attention and GELU subgraphs and runs them with its own kernels, which is
what makes it faster than numpy on short inputs such as recall keys (benchmarks/embed.py).
Needs the ``onnx`` extra: ``pip install 'deltamem[onnx]'``.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
OPSET = 20


class LayerWeights(Protocol):
    """One encoder layer's weights as ``deltamem.embed.minilm`` loads them (``x @ W``, QKV fused).

    The graph needs only these arrays, so this module names a protocol instead of importing
    ``MiniLMModel`` (which imports this module lazily: no import circle)."""

    @property
    def qkv_w(self) -> F32: ...
    @property
    def qkv_b(self) -> F32: ...
    @property
    def out_w(self) -> F32: ...
    @property
    def out_b(self) -> F32: ...
    @property
    def ln1_g(self) -> F32: ...
    @property
    def ln1_b(self) -> F32: ...
    @property
    def up_w(self) -> F32: ...
    @property
    def up_b(self) -> F32: ...
    @property
    def down_w(self) -> F32: ...
    @property
    def down_b(self) -> F32: ...
    @property
    def ln2_g(self) -> F32: ...
    @property
    def ln2_b(self) -> F32: ...


class EncoderWeights(Protocol):
    """The loaded network the graph is written from (``deltamem.embed.minilm.MiniLMModel``)."""

    @property
    def hidden(self) -> int: ...
    @property
    def heads(self) -> int: ...
    @property
    def eps(self) -> float: ...
    @property
    def word_emb(self) -> F32: ...
    @property
    def pos_emb(self) -> F32: ...
    @property
    def type_emb(self) -> F32: ...
    @property
    def emb_ln_g(self) -> F32: ...
    @property
    def emb_ln_b(self) -> F32: ...
    @property
    def layers(self) -> Sequence[LayerWeights]: ...


def weight_at(model: EncoderWeights, address: str) -> F32:
    """The weight array at ``address`` in ``model``: attribute names and indexes joined by dots
    (``"word_emb"``, ``"type_emb.0"``, ``"layers.3.qkv_w"``)."""
    value: Any = model
    for part in address.split("."):
        value = value[int(part)] if part.isdigit() else getattr(value, part)
    return np.ascontiguousarray(value, dtype=np.float32)


class _Graph:
    """Accumulates nodes and weight references while the encoder is written out."""

    def __init__(self, model: EncoderWeights) -> None:
        from onnx import TensorProto, helper

        self.model = model
        self.helper, self.proto = helper, TensorProto
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.addresses: dict[str, str] = {}  # weight name -> where it is in the model
        self._count = 0

    def _name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def weight(self, address: str) -> str:
        """A model weight (:func:`weight_at`): declared in the graph, its data supplied from the
        model's array at load."""
        array = weight_at(self.model, address)
        name = self._name("w")
        tensor = self.proto()
        tensor.name = name
        tensor.data_type = self.proto.FLOAT
        tensor.dims.extend(array.shape)
        tensor.data_location = self.proto.EXTERNAL
        entry = tensor.external_data.add()
        entry.key, entry.value = "location", name
        self.initializers.append(tensor)
        self.addresses[name] = address
        return name

    def const(self, value: Any, dtype: type = np.int64) -> str:
        """A small constant (shapes, axes, scalars), stored in the graph itself."""
        from onnx import numpy_helper

        name = self._name("c")
        self.initializers.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))
        return name

    def op(self, kind: str, *inputs: str, **attrs: Any) -> str:
        out = self._name("t")
        self.nodes.append(self.helper.make_node(kind, list(inputs), [out], name=out, **attrs))
        return out


def build_graph(model: EncoderWeights) -> tuple[bytes, dict[str, str]]:
    """The serialized ONNX model (weights external) and, per weight name, where its array is
    in ``model`` (:func:`weight_at`). Needs the ``onnx`` package; :func:`cached_graph` keeps the
    result so that later processes need only ONNX Runtime.

    Inputs: ``ids`` (B, T) int64 and ``mask`` (B, T) float32; output ``pooled`` (B, hidden).
    """
    g = _Graph(model)
    hidden, heads, eps = model.hidden, model.heads, model.eps
    dh = hidden // heads
    f32 = np.float32

    def layer_norm(x: str, gain: str, bias: str) -> str:
        return g.op("LayerNormalization", x, g.weight(gain), g.weight(bias), axis=-1, epsilon=eps)

    def linear(x: str, w: str, b: str) -> str:
        return g.op("Add", g.op("MatMul", x, g.weight(w)), g.weight(b))

    seq = g.op("Shape", "ids", start=1, end=2)
    positions = g.op("Slice", g.weight("pos_emb"), g.const([0]), seq, g.const([0]))
    x = g.op("Add", g.op("Gather", g.weight("word_emb"), "ids"), positions)
    x = layer_norm(g.op("Add", x, g.weight("type_emb.0")), "emb_ln_g", "emb_ln_b")
    # Additive attention bias: padding keys get a large negative score (exp underflows to 0).
    bias = g.op("Mul", g.op("Sub", "mask", g.const(1.0, f32)), g.const(1e9, f32))
    bias = g.op("Unsqueeze", bias, g.const([1, 2]))  # (B, 1, 1, T)
    scale = g.const(1.0 / math.sqrt(dh), f32)
    for i in range(len(model.layers)):
        def at(name: str, i: int = i) -> str:
            return f"layers.{i}.{name}"

        qkv = g.op("Reshape", linear(x, at("qkv_w"), at("qkv_b")),
                   g.const([0, 0, 3, heads, dh]))
        qkv = g.op("Transpose", qkv, perm=[2, 0, 3, 1, 4])  # (3, B, heads, T, dh)
        q, k, v = (g.op("Gather", qkv, g.const(i), axis=0) for i in range(3))
        scores = g.op("MatMul", g.op("Mul", q, scale), g.op("Transpose", k, perm=[0, 1, 3, 2]))
        attn = g.op("Softmax", g.op("Add", scores, bias), axis=-1)
        ctx = g.op("Transpose", g.op("MatMul", attn, v), perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", ctx, g.const([0, 0, hidden]))
        x = layer_norm(g.op("Add", linear(ctx, at("out_w"), at("out_b")), x),
                       at("ln1_g"), at("ln1_b"))
        h = g.op("Gelu", linear(x, at("up_w"), at("up_b")))  # exact (erf) GELU, as BERT
        x = layer_norm(g.op("Add", linear(h, at("down_w"), at("down_b")), x),
                       at("ln2_g"), at("ln2_b"))
    summed = g.op("Squeeze", g.op("MatMul", g.op("Unsqueeze", "mask", g.const([1])), x),
                  g.const([1]))
    count = g.op("Max", g.op("ReduceSum", "mask", g.const([1]), keepdims=1), g.const(1.0, f32))
    g.nodes.append(g.helper.make_node("Div", [summed, count], ["pooled"], name="pooled"))
    tensor = g.helper.make_tensor_value_info
    graph = g.helper.make_graph(
        g.nodes, "all-MiniLM-L6-v2",
        [tensor("ids", g.proto.INT64, ["B", "T"]), tensor("mask", g.proto.FLOAT, ["B", "T"])],
        [tensor("pooled", g.proto.FLOAT, ["B", hidden])], g.initializers)
    onnx_model = g.helper.make_model(graph, opset_imports=[g.helper.make_opsetid("", OPSET)])
    onnx_model.ir_version = 10
    return onnx_model.SerializeToString(), g.addresses


GRAPH_FORMAT = 1  # bump when build_graph writes another graph


def cached_graph(model: EncoderWeights, cache: Path | None) -> tuple[bytes, dict[str, str]]:
    """:func:`build_graph`'s result, kept in ``cache`` (``minilm-graph-v<N>-<shape>.onnx`` and
    its ``.json`` of weight addresses; the graph holds no weights, so it depends only on the
    format and the network's shape): a process that finds it needs no ``onnx`` import (most of
    a cold start). Written to temporary names first, the addresses last, so a half-written pair
    is never read; ``cache`` None (or unwritable) builds every time."""
    shape = f"{model.hidden}x{model.heads}x{len(model.layers)}-{model.eps!r}"
    stem = f"minilm-graph-v{GRAPH_FORMAT}-{shape}"
    if cache is not None:
        blob_path, names_path = cache / f"{stem}.onnx", cache / f"{stem}.json"
        try:
            if names_path.is_file():
                return blob_path.read_bytes(), json.loads(names_path.read_text("utf-8"))
        except (OSError, ValueError):
            pass  # unreadable: built again below
    blob, addresses = build_graph(model)
    if cache is not None:
        try:
            cache.mkdir(parents=True, exist_ok=True)
            _atomic_write(blob_path, blob)
            _atomic_write(names_path, json.dumps(addresses).encode("utf-8"))
        except OSError:
            pass  # a read-only cache: build every time
    return blob, addresses


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


class OnnxForward:
    """A callable with :meth:`MiniLMModel.forward`'s signature, run by ONNX Runtime.

    Args:
        model: the loaded weights (kept alive: ONNX Runtime reads them in place).
        threads: intra-op threads; 0 lets ONNX Runtime use every core. Threads sleep between
            calls instead of spinning, so an idle embedder costs no CPU on a shared machine.
        cache: where the graph is kept between processes (:func:`cached_graph`).
    """

    def __init__(self, model: EncoderWeights, threads: int = 0, cache: Path | None = None):
        import onnxruntime as ort

        blob, addresses = cached_graph(model, cache)
        weights = {name: weight_at(model, address) for name, address in addresses.items()}
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._weights = weights  # the OrtValues below point into these arrays
        options.add_external_initializers(
            list(weights), [ort.OrtValue.ortvalue_from_numpy(a) for a in weights.values()])
        self._session = ort.InferenceSession(blob, options, providers=["CPUExecutionProvider"])

    def __call__(self, ids: I64, mask: F32) -> F32:
        out: F32 = self._session.run(["pooled"], {"ids": ids, "mask": mask})[0]
        return out


# -- the int8 variant (embedder "minilm:int8", name "minilm-int8") -----------------------------
INT8_FORMAT = 1  # bump when the graph or the quantisation settings change


def inline_model(model: EncoderWeights) -> Any:
    """The float32 graph of :func:`build_graph` with its weights stored inside (an
    ``onnx.ModelProto``), as ONNX Runtime's quantiser needs it."""
    import onnx
    from onnx import numpy_helper

    blob, addresses = build_graph(model)
    proto = onnx.load_from_string(blob)
    inits = proto.graph.initializer
    for i, tensor in enumerate(list(inits)):
        if tensor.name in addresses:
            inits[i].CopyFrom(numpy_helper.from_array(weight_at(model, addresses[tensor.name]),
                                                      tensor.name))
    return proto


def int8_model_file(model: EncoderWeights, weights_key: str, cache: Path) -> Path:
    """The dynamically quantised model file in ``cache``, written on first use.

    Weights of every MatMul are int8 per output channel; activations are quantised per call
    (ONNX Runtime's dynamic quantisation). The file is keyed by the weights' sha256, the format
    and ONNX Runtime's version, and written to a temporary name first, so a half-written file is
    never loaded. ``weights_key`` names the float weights (it changes when they do)."""
    import logging

    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    key = f"{weights_key[:16]}-v{INT8_FORMAT}-ort{onnxruntime.__version__}"
    path = cache / f"minilm-int8-{key}.onnx"
    if path.is_file():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".minilm-int8-", suffix=".onnx", dir=cache)
    os.close(fd)
    tmp = Path(tmp_name)
    root = logging.getLogger()  # the quantiser advises pre-processing on the root logger
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        quantize_dynamic(inline_model(model), tmp, per_channel=True,
                         weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"])
        os.replace(tmp, path)
    finally:
        root.setLevel(level)
        tmp.unlink(missing_ok=True)
    return path


class OnnxInt8Forward:
    """:class:`OnnxForward` on the int8 model file (see :func:`int8_model_file`)."""

    def __init__(self, path: Path, threads: int = 0):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(path), options,
                                             providers=["CPUExecutionProvider"])

    def __call__(self, ids: I64, mask: F32) -> F32:
        out: F32 = self._session.run(["pooled"], {"ids": ids, "mask": mask})[0]
        return out
