"""The quantised MiniLM (``minilm:int8``): its own embedder name, vectors close to the float
model's, the quantised file built once into the cache and reused."""

from __future__ import annotations

import numpy as np
import pytest

from deltamem.embed import MiniLMEmbedder, make_embedder
from deltamem.errors import EmbedderMismatch
from deltamem.store.sqlite import SQLiteStore

TEXTS = ["heat the apple in the microwave", "You are in the kitchen. You see a fridge.",
         "run the whole test suite with pytest", "deploy the service to production",
         "find a living thing and put it in the red box"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("int8-cache")


@pytest.fixture(scope="module")
def int8(cache) -> MiniLMEmbedder:
    embedder = MiniLMEmbedder(runtime="int8", cache=cache)
    embedder.embed(["warm up"])
    return embedder


def test_the_spec_names_an_embedder_of_its_own(monkeypatch, cache):
    monkeypatch.setenv("DELTAMEM_CACHE", str(cache))
    embedder = make_embedder("minilm:int8")
    assert embedder.name == "minilm-int8" and embedder.dim == 384
    assert make_embedder("minilm").name == "minilm"


@pytest.mark.slow
def test_vectors_are_unit_and_close_to_the_float_model(int8):
    q = int8.embed(TEXTS)
    f = MiniLMEmbedder(runtime="onnx").embed(TEXTS)
    assert q.shape == (len(TEXTS), 384) and q.dtype == np.float32
    assert np.allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-5)
    cos = np.sum(q * f, axis=1)
    assert cos.min() > 0.97  # close, but not the same model (hence its own name)
    assert not np.allclose(q, f, atol=1e-5)
    assert np.array_equal(int8.embed([""]), np.zeros((1, 384), dtype=np.float32))


@pytest.mark.slow
def test_the_quantised_file_is_built_once_and_reused(int8, cache):
    files = list(cache.glob("minilm-int8-*.onnx"))
    assert len(files) == 1 and not list(cache.glob(".minilm-int8-*"))  # no temporary left
    before = files[0].stat().st_mtime_ns
    from deltamem.embed import minilm

    minilm._INT8.clear()  # a new process: loads the cached file, quantises nothing
    again = MiniLMEmbedder(runtime="int8", cache=cache).embed(TEXTS[:2])
    assert files[0].stat().st_mtime_ns == before
    assert np.allclose(again, int8.embed(TEXTS[:2]), atol=1e-6)


def test_a_space_written_with_float_minilm_refuses_the_int8_model(tmp_path):
    store = SQLiteStore(tmp_path / "m.db")
    store.ensure_space("default", "minilm", 384)
    with pytest.raises(EmbedderMismatch):
        store.ensure_space("default", "minilm-int8", 384)
    store.close()
