"""all-MiniLM-L6-v2 in pure numpy: the default, torch-free embedder.

The weights ship inside this package (``embed/all-MiniLM-L6-v2``, 87 MB of float32 safetensors),
so a plain ``pip install deltamem`` embeds offline with no second step. The forward pass is a plain
6-layer BERT encoder followed by mean pooling and L2 normalisation, exactly what
sentence-transformers computes for this model (max |cos - 1| against it is ~1e-7).

Speed notes, all measured on the project's 2-core machine (``benchmarks/embed.py``):

* everything stays float32: a NumPy float64 *scalar* (``np.sqrt(2.0)``) silently upcasts a
  float32 array and halves the speed, so constants are Python floats;
* linear layers run as 2-D matmuls (3-D ``@`` is ~2.5x slower here), and Q, K, V share one fused
  matmul;
* GELU's ``erf`` is a polynomial approximation (|error| <= 1.5e-7) evaluated in place, instead of
  a Python-level ufunc;
* texts are sorted by token length before batching so that a batch carries little padding.
"""

from __future__ import annotations

import json
import math
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from deltamem._util import extras
from deltamem.config import cache_dir
from deltamem.embed.base import Vectors
from deltamem.errors import ConfigError

# sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0, see MODEL_CARD.md there), byte for byte the
# files the thresholds were calibrated with: model.safetensors has sha256 53aa5117...8d9db.
MODEL_DIR = Path(__file__).resolve().parent / "all-MiniLM-L6-v2"
MODEL_FILES = ("model.safetensors", "config.json", "tokenizer.json", "sentence_bert_config.json")

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
Forward = Callable[[I64, F32], F32]
RUNTIMES = ("auto", "onnx", "numpy", "int8")


def find_model_dir() -> Path:
    """The MiniLM model folder shipped inside this package (``embed/all-MiniLM-L6-v2``).

    Returns:
        The folder holding ``model.safetensors``, ``tokenizer.json`` and ``config.json``.

    Raises:
        ConfigError: the folder is incomplete (a damaged install).
    """
    for name in MODEL_FILES:
        if not (MODEL_DIR / name).is_file():
            raise ConfigError(f"the bundled MiniLM model is incomplete ({MODEL_DIR / name} is "
                              "missing); reinstall deltamem: pip install --force-reinstall "
                              "deltamem")
    return MODEL_DIR


def gelu(x: F32) -> F32:
    """Exact (erf-based) GELU, as BERT uses it, float32 in and out; |error| < 1e-6.

    Uses ``gelu(x) = relu(x) - |x|/2 * erfc(|x|/sqrt 2)`` with the Abramowitz & Stegun 7.1.26
    polynomial for ``erfc`` on non-negative arguments, computed in place: this elementwise
    chain, not the matmuls, is what dominates a naive numpy BERT on 2 cores.
    """
    a = np.abs(x)
    z = a * 0.7071067811865476
    t = z * 0.3275911
    t += 1.0
    np.reciprocal(t, out=t)
    p = t * 1.061405429
    p -= 1.453152027
    p *= t
    p += 1.421413741
    p *= t
    p -= 0.284496736
    p *= t
    p += 0.254829592
    p *= t
    np.multiply(z, z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    p *= z  # p is now erfc(|x| / sqrt 2)
    p *= a
    p *= 0.5
    np.maximum(x, 0.0, out=a)
    a -= p
    return a


@dataclass(frozen=True)
class _Layer:
    """One encoder layer's weights, pre-transposed for ``x @ W`` and with Q, K, V fused."""

    qkv_w: F32
    qkv_b: F32
    out_w: F32
    out_b: F32
    ln1_g: F32
    ln1_b: F32
    up_w: F32
    up_b: F32
    down_w: F32
    down_b: F32
    ln2_g: F32
    ln2_b: F32


_TOKENIZER_LOCK = threading.Lock()


def tokenizer_of(model_dir: Path) -> Any:
    """The WordPiece tokenizer of ``model_dir``, loaded once per process, with neither padding
    nor truncation: shared by the network (:meth:`MiniLMModel.tokenize` truncates the ids
    itself) and whatever counts tokens by it (``integrations.coding_memory.count_tokens``), so
    a process that does both parses ``tokenizer.json`` once (~20 ms). A tokenizer's settings
    are global to it: none is changed after this."""
    with _TOKENIZER_LOCK:  # one load, whichever thread asks first
        return _tokenizer_at(model_dir.resolve())


@cache
def _tokenizer_at(model_dir: Path) -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()  # tokenizer.json ships fixed padding to 128; batches pad themselves
    tokenizer.no_truncation()
    return tokenizer


class MiniLMModel:
    """The loaded network and tokenizer; shared by every :class:`MiniLMEmbedder` of a process."""

    def __init__(self, model_dir: Path):
        """Map the weights and load config and tokenizer from ``model_dir``."""
        config = json.loads((model_dir / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.hidden = int(config["hidden_size"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.max_len = _max_seq_length(model_dir, int(config["max_position_embeddings"]))

        raw = mapped_safetensors(model_dir / "model.safetensors")
        # Some exports prefix every key with "bert." or "model."; strip it so lookups are uniform.
        w = {k.removeprefix("bert.").removeprefix("model."): v for k, v in raw.items()}

        def get(name: str) -> F32:
            return np.ascontiguousarray(w[name], dtype=np.float32)

        def lin_t(name: str) -> F32:
            # A view, not a copy: BLAS multiplies by the transposed (column-major) matrix as it
            # is, so the weights stay in the memory map and nothing is copied at load.
            return get(name + ".weight").T

        self.word_emb = get("embeddings.word_embeddings.weight")
        self.pos_emb = get("embeddings.position_embeddings.weight")
        self.type_emb = get("embeddings.token_type_embeddings.weight")
        self.emb_ln_g = get("embeddings.LayerNorm.weight")
        self.emb_ln_b = get("embeddings.LayerNorm.bias")
        self.layers: list[_Layer] = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            att = p + "attention.self."
            self.layers.append(_Layer(
                qkv_w=np.concatenate([get(att + n + ".weight")
                                      for n in ("query", "key", "value")]).T,
                qkv_b=np.concatenate([get(att + n + ".bias") for n in ("query", "key", "value")]),
                out_w=lin_t(p + "attention.output.dense"),
                out_b=get(p + "attention.output.dense.bias"),
                ln1_g=get(p + "attention.output.LayerNorm.weight"),
                ln1_b=get(p + "attention.output.LayerNorm.bias"),
                up_w=lin_t(p + "intermediate.dense"),
                up_b=get(p + "intermediate.dense.bias"),
                down_w=lin_t(p + "output.dense"),
                down_b=get(p + "output.dense.bias"),
                ln2_g=get(p + "output.LayerNorm.weight"),
                ln2_b=get(p + "output.LayerNorm.bias"),
            ))

        self.tokenizer = tokenizer_of(model_dir)
        self.vocab_size = self.word_emb.shape[0]

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, with [CLS] and [SEP], truncated to the model's max length
        (the text's first ``max_len - 2`` tokens between the two, as the tokenizer's own
        truncation cuts them)."""
        # encode_batch_fast (tokenizers >= 0.20) skips character offsets we never use.
        encode = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)
        cut = self.max_len - 1
        return [ids if len(ids := e.ids) <= self.max_len else [*ids[:cut], ids[-1]]
                for e in encode(list(texts))]

    def _layer_norm(self, x: F32, g: F32, b: F32) -> F32:
        xc: F32 = x - x.mean(axis=-1, keepdims=True)
        var = np.einsum("ij,ij->i", xc, xc)[:, None] * (1.0 / xc.shape[-1])
        xc *= 1.0 / np.sqrt(var + self.eps)
        xc *= g
        xc += b
        return xc

    def forward(self, ids: I64, mask: F32) -> F32:
        """Mean-pooled (not yet normalised) sentence vectors for a padded batch.

        Args:
            ids: ``(B, T)`` token ids, padded with 0.
            mask: ``(B, T)`` float32, 1.0 for real tokens and 0.0 for padding.

        Returns:
            ``(B, hidden)`` float32.
        """
        batch, seq = ids.shape
        heads, hidden = self.heads, self.hidden
        dh = hidden // heads
        # Token type is always 0 for single-sentence input.
        x = self.word_emb[ids] + self.pos_emb[:seq][None, :, :] + self.type_emb[0]
        x = self._layer_norm(x.reshape(batch * seq, hidden), self.emb_ln_g, self.emb_ln_b)
        # Additive attention bias: padding keys get a large negative score (exp underflows to 0).
        bias = ((mask - 1.0) * 1e9)[:, None, None, :]
        scale = 1.0 / math.sqrt(dh)
        for layer in self.layers:
            qkv = x @ layer.qkv_w  # (B*T, 3H)
            qkv += layer.qkv_b
            qkv = qkv.reshape(batch, seq, 3, heads, dh).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0] * scale, qkv[1], qkv[2]  # each (B, heads, T, dh)
            scores = q @ k.transpose(0, 1, 3, 2) + bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * seq, hidden)
            y = ctx @ layer.out_w
            y += layer.out_b
            y += x
            x = self._layer_norm(y, layer.ln1_g, layer.ln1_b)
            h = x @ layer.up_w
            h += layer.up_b
            y = gelu(h) @ layer.down_w
            y += layer.down_b
            y += x
            x = self._layer_norm(y, layer.ln2_g, layer.ln2_b)
        x3 = x.reshape(batch, seq, hidden)
        summed: F32 = np.einsum("bth,bt->bh", x3, mask)
        summed /= np.maximum(mask.sum(axis=1, keepdims=True), 1.0)
        return summed

    def embed_ids(self, token_ids: Sequence[Sequence[int]], batch_size: int,
                  forward: Forward | None = None) -> F32:
        """Pooled vectors for pre-tokenised inputs, batched by similar length; input order kept.

        ``forward`` runs one padded batch (default: :meth:`forward`, numpy; see ``runtime``).
        """
        forward = forward or self.forward
        out = np.zeros((len(token_ids), self.hidden), dtype=np.float32)
        order = sorted(range(len(token_ids)), key=lambda i: len(token_ids[i]))
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            seq = max(len(token_ids[i]) for i in idx)
            ids = np.zeros((len(idx), seq), dtype=np.int64)
            mask = np.zeros((len(idx), seq), dtype=np.float32)
            for row, i in enumerate(idx):
                n = len(token_ids[i])
                ids[row, :n] = token_ids[i]
                mask[row, :n] = 1.0
            out[idx] = forward(ids, mask)
        return out


_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64,
                       "I64": np.int64, "I32": np.int32}


def mapped_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    """The tensors of a safetensors file as read-only views of one memory map of it: nothing is
    read until used (the 47 MB word-embedding table is paged in only where a text's tokens
    fall), and nothing is copied. The format: an 8-byte little-endian header length, a JSON
    header of ``{name: {dtype, shape, data_offsets}}``, then the data."""
    with path.open("rb") as handle:
        size = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(size))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    out: dict[str, npt.NDArray[Any]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise ConfigError(f"{path}: tensor {name!r} has dtype {info['dtype']}, which the "
                              "MiniLM loader does not read")
        begin, end = info["data_offsets"]
        out[name] = data[begin:end].view(dtype).reshape(info["shape"])
    return out


def _max_seq_length(model_dir: Path, positions: int) -> int:
    """The truncation length sentence-transformers uses for this model (256 for MiniLM)."""
    cfg = model_dir / "sentence_bert_config.json"
    if cfg.is_file():
        value = json.loads(cfg.read_text()).get("max_seq_length")
        if isinstance(value, int) and value > 0:
            return min(value, positions)
    return positions


_MODELS: dict[Path, MiniLMModel] = {}
_LOCK = threading.Lock()


def load_model(model_dir: Path | None = None) -> MiniLMModel:
    """The process-wide :class:`MiniLMModel` for ``model_dir`` (default: the installed package).

    Loaded once per folder and process; later calls return the same object.
    """
    folder = (model_dir or find_model_dir()).resolve()
    with _LOCK:
        model = _MODELS.get(folder)
        if model is None:
            model = MiniLMModel(folder)
            _MODELS[folder] = model
        return model


_ONNX: weakref.WeakKeyDictionary[MiniLMModel, Forward] = weakref.WeakKeyDictionary()


def onnx_forward(model: MiniLMModel, cache: Path | None = None) -> Forward:
    """The process-wide ONNX Runtime forward pass for ``model`` (built once per model; its
    graph is kept in ``cache`` between processes, see ``minilm_onnx.cached_graph``)."""
    with _LOCK:
        forward = _ONNX.get(model)
        if forward is None:
            from deltamem.embed.minilm_onnx import OnnxForward

            forward = _ONNX[model] = OnnxForward(model, cache=cache)
        return forward


_INT8: dict[Path, Forward] = {}


def int8_forward(model_dir: Path, cache: Path) -> Forward:
    """The process-wide forward pass of the dynamically quantised model (built and cached in
    ``cache`` on first use, see :func:`deltamem.embed.minilm_onnx.int8_model_file`)."""
    model = load_model(model_dir)  # takes _LOCK itself
    with _LOCK:
        forward = _INT8.get(model_dir)
        if forward is None:
            import hashlib

            from deltamem.embed.minilm_onnx import OnnxInt8Forward, int8_model_file

            weights = (model_dir / "model.safetensors").resolve()
            stat = weights.stat()
            key = hashlib.sha256(f"{weights}|{stat.st_size}|{stat.st_mtime_ns}".encode())
            path = int8_model_file(model, key.hexdigest(), cache)
            forward = _INT8[model_dir] = OnnxInt8Forward(path)
        return forward


def onnx_available() -> bool:
    """Whether ONNX Runtime and onnx (the ``onnx`` extra) are installed."""
    return not extras.missing("onnx")


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384-d), without torch.

    Weights load lazily on the first :meth:`embed` and are shared across instances. Empty or
    whitespace-only texts embed to the zero vector (the model would otherwise embed
    ``[CLS][SEP]`` to a non-zero vector and make blank keys look similar to each other).

    The forward pass runs on ONNX Runtime when the ``onnx`` extra is installed (faster, see
    ``docs/results.md``), else in numpy; both compute the same network from the same weights and
    agree to ~1e-7 (tested under 1e-5), so they share the name ``minilm`` and one memory can be
    read and written with either.

    ``runtime="int8"`` (embedder ``minilm:int8``) runs a dynamically quantised copy of the
    network (int8 weights per channel, built once into ``cache``): faster, but its vectors
    differ from the float model's (cosine to them ~0.99), so it is another embedder, named
    ``minilm-int8``, with thresholds of its own (docs/calibration.md); a space written with one
    refuses the other.

    Args:
        model_dir: a folder with the model files; default is the bundled model.
        batch_size: texts per forward pass.
        runtime: ``"auto"`` (ONNX Runtime when installed, else numpy), ``"onnx"``, ``"numpy"``
            or ``"int8"`` (needs the ``onnx`` extra).
        cache: where the int8 model file is kept (default: ``deltamem.config.cache_dir()``).
    """

    name = "minilm"
    dim = 384

    def __init__(self, model_dir: Path | str | None = None, batch_size: int = 32,
                 runtime: str = "auto", cache: Path | str | None = None):
        """Check that the weights exist now (clear error early) but load them on first use."""
        if runtime not in RUNTIMES:
            raise ConfigError(f"unknown MiniLM runtime {runtime!r}; choose one of "
                              f"{', '.join(RUNTIMES)}")
        if runtime in ("onnx", "int8"):
            extras.require("onnx", f"the MiniLM {runtime} runtime")
        if runtime == "int8":
            self.name = "minilm-int8"
        self._cache = Path(cache) if cache is not None else None
        self._model_dir = Path(model_dir) if model_dir is not None else find_model_dir()
        self.batch_size = batch_size
        self.runtime = runtime if runtime != "auto" else (
            "onnx" if onnx_available() else "numpy")

    @property
    def model(self) -> MiniLMModel:
        """The loaded network (loads it on first access)."""
        return load_model(self._model_dir)

    def warm(self) -> None:
        """Load the weights, the tokenizer and the runtime's forward pass now (what the first
        :meth:`embed` would do), so that a server started before its first request answers
        that request warm; idempotent, and safe to run in a background thread. One short text
        is embedded too: the first pass pages the mapped weights in and starts the BLAS
        threads, which would otherwise fall on the first request (~25 ms)."""
        model = self.model
        model.embed_ids(model.tokenize(["warm"]), 1, self._forward(model))

    def _forward(self, model: MiniLMModel) -> Forward:
        if self.runtime == "int8":
            return int8_forward(self._model_dir, self._cache or cache_dir())
        if self.runtime == "onnx":
            return onnx_forward(model, self._cache or cache_dir())
        return model.forward

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` into L2-normalised float32 vectors of shape ``(len(texts), 384)``."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        keep = [i for i, t in enumerate(texts) if t.strip()]
        if not keep:
            return out
        model = self.model
        ids = model.tokenize([texts[i] for i in keep])
        pooled = model.embed_ids(ids, self.batch_size, self._forward(model))
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        out[keep] = pooled / np.maximum(norms, 1e-12)
        return out
