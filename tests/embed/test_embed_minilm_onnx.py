"""MiniLM on ONNX Runtime: the same network as the numpy forward, within the stated tolerance."""

from __future__ import annotations

import numpy as np
import pytest

from deltamem._util import extras
from deltamem.embed import make_embedder, minilm
from deltamem.embed.minilm import MiniLMEmbedder
from deltamem.errors import ConfigError

# The numpy forward is ~1.2e-7 from the sentence-transformers reference; the calibrated
# thresholds allow ~1e-5, so the ONNX Runtime forward must stay within that of numpy.
TOLERANCE = 1e-5

TEXTS = [
    "heat the apple and put it in the fridge",
    "You are in the kitchen. You see a countertop 1, a fridge 1, a microwave 1 and a sinkbasin 1.",
    "a",
    "",
    "examine the book under the desk lamp, then turn the lamp off and leave the room",
    "apple " * 400,  # truncated to the 256-token window
    "find a living thing",
]


@pytest.fixture(scope="module")
def runtimes() -> tuple[MiniLMEmbedder, MiniLMEmbedder]:
    return MiniLMEmbedder(runtime="numpy"), MiniLMEmbedder(runtime="onnx")


def test_onnx_matches_numpy_forward(runtimes) -> None:
    """Batched (padded, length-sorted) and one-by-one, every vector is within TOLERANCE."""
    numpy_emb, onnx_emb = runtimes
    ref = numpy_emb.embed(TEXTS)
    got = onnx_emb.embed(TEXTS)
    assert got.shape == ref.shape and got.dtype == np.float32
    assert float(np.abs(got - ref).max()) < TOLERANCE
    single = np.vstack([onnx_emb.embed([t]) for t in TEXTS])
    assert float(np.abs(single - ref).max()) < TOLERANCE
    assert not got[3].any()  # blank text stays the zero vector


def test_pooled_vectors_match_before_normalisation(runtimes) -> None:
    """The raw forward passes agree too (same pooling over the mask, padding ignored)."""
    numpy_emb, _ = runtimes
    model = numpy_emb.model
    ids, mask = np.zeros((2, 12), np.int64), np.zeros((2, 12), np.float32)
    for row, tokens in enumerate(model.tokenize(["open the fridge", "go to the kitchen now"])):
        ids[row, :len(tokens)], mask[row, :len(tokens)] = tokens, 1.0
    ref = model.forward(ids, mask)
    got = minilm.onnx_forward(model)(ids, mask)
    assert float(np.abs(got - ref).max() / np.abs(ref).max()) < TOLERANCE


def test_runtime_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """auto prefers ONNX Runtime; minilm:numpy / minilm:onnx pick one; both are 'minilm'."""
    assert MiniLMEmbedder().runtime == "onnx"
    numpy_emb = make_embedder("minilm:numpy")
    onnx_emb = make_embedder("minilm:ONNX")
    assert isinstance(numpy_emb, MiniLMEmbedder) and numpy_emb.runtime == "numpy"
    assert isinstance(onnx_emb, MiniLMEmbedder) and onnx_emb.runtime == "onnx"
    assert numpy_emb.name == onnx_emb.name == "minilm"
    with pytest.raises(ConfigError, match="runtime"):
        MiniLMEmbedder(runtime="torch")
    monkeypatch.setattr(extras, "_absent", lambda module: module == "onnxruntime")
    assert MiniLMEmbedder().runtime == "numpy"
    with pytest.raises(ConfigError, match=r"pip install 'deltamem\[onnx\]'"):
        MiniLMEmbedder(runtime="onnx")


def test_a_cached_graph_needs_no_onnx_import_and_gives_the_same_vectors(tmp_path) -> None:
    """The first process writes the graph into the cache; a later one builds its session from
    it without importing ``onnx`` (most of a cold start) and embeds exactly as before."""
    import subprocess
    import sys

    probe = (
        "import sys, numpy as np\n"
        "from deltamem.embed.minilm import MiniLMEmbedder\n"
        f"v = MiniLMEmbedder(runtime='onnx', cache={str(tmp_path)!r}).embed({TEXTS[:3]!r})\n"
        "print('onnx' in sys.modules)\n"
        "print(' '.join(repr(float(x)) for x in v.ravel()[:64]))\n"
    )
    runs = [subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           check=True).stdout.split("\n") for _ in range(2)]
    assert len(list(tmp_path.glob("minilm-graph-*.json"))) == 1
    assert runs[0][0] == "True" and runs[1][0] == "False"  # built, then read from the cache
    assert runs[0][1] == runs[1][1]


def test_the_weights_are_mapped_not_read_and_equal_safetensors_own_reader() -> None:
    """``mapped_safetensors`` gives the tensors ``safetensors`` reads, as views of one map."""
    from safetensors.numpy import load_file

    path = minilm.find_model_dir() / "model.safetensors"
    mapped, read = minilm.mapped_safetensors(path), load_file(str(path))
    assert mapped.keys() == read.keys()
    for name, array in read.items():
        assert mapped[name].dtype == array.dtype and np.array_equal(mapped[name], array)
    assert all(isinstance(a.base, np.memmap) or isinstance(a, np.memmap)
               for a in mapped.values())


def test_warm_loads_what_the_first_embed_would(tmp_path) -> None:
    """``warm()`` builds, in a fresh process, the forward pass a server's first request would
    otherwise wait for (and keeps the graph in the cache)."""
    import subprocess
    import sys

    probe = (
        "from deltamem.embed import minilm\n"
        f"emb = minilm.MiniLMEmbedder(runtime='onnx', cache={str(tmp_path)!r})\n"
        "print(len(minilm._ONNX), len(minilm._MODELS))\n"
        "emb.warm()\n"
        "print(len(minilm._ONNX), len(minilm._MODELS))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[:2] == ["0 0", "1 1"]
    assert list(tmp_path.glob("minilm-graph-*.json"))
