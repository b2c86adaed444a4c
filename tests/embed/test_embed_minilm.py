"""The numpy MiniLM embedder (real weights, bundled in the package)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from deltamem.embed import minilm
from deltamem.embed.minilm import MiniLMEmbedder, gelu
from deltamem.errors import ConfigError


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbedder:
    """One embedder for the module (weights are cached per process anyway)."""
    return MiniLMEmbedder()


def cos(e: MiniLMEmbedder, a: str, b: str) -> float:
    v = e.embed([a, b])
    return float(v[0] @ v[1])


def test_paraphrase_closer_than_unrelated(emb: MiniLMEmbedder) -> None:
    """A paraphrase scores higher than an unrelated task."""
    assert cos(emb, "heat the apple", "warm the apple") > cos(
        emb, "heat the apple", "open the drawer") + 0.3


def test_shape_dtype_and_unit_norm(emb: MiniLMEmbedder) -> None:
    """Output is (n, 384) float32 with unit rows."""
    v = emb.embed(["put a clean mug in the coffee machine", "go to the kitchen"])
    assert v.shape == (2, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert emb.name == "minilm" and emb.dim == 384


def test_empty_text_is_zero_vector(emb: MiniLMEmbedder) -> None:
    """Empty and blank texts embed to zeros, and an all-empty batch works."""
    v = emb.embed(["", "open the fridge", "   "])
    assert not v[0].any() and not v[2].any()
    assert abs(float(np.linalg.norm(v[1])) - 1.0) < 1e-5
    assert emb.embed([]).shape == (0, 384)
    assert not emb.embed([""]).any()


def test_batch_equals_one_by_one(emb: MiniLMEmbedder) -> None:
    """Batching (with padding and length sorting) does not change any vector."""
    texts = ["a", "heat the apple and put it in the fridge, then close the fridge door",
             "examine the book under the desk lamp", "", "turn on the light"]
    batched = emb.embed(texts)
    single = np.vstack([emb.embed([t]) for t in texts])
    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_deterministic_and_shared_weights(emb: MiniLMEmbedder) -> None:
    """Two embedders give identical vectors and share one loaded model."""
    other = MiniLMEmbedder(batch_size=2)
    texts = ["cool the tomato", "slice the bread", "find a living thing"]
    np.testing.assert_array_equal(emb.embed(texts), emb.embed(texts))
    np.testing.assert_allclose(emb.embed(texts), other.embed(texts), atol=1e-6)
    assert emb.model is other.model


def test_long_text_is_truncated(emb: MiniLMEmbedder) -> None:
    """Texts past the 256-token window still embed (truncated), not crash."""
    v = emb.embed(["apple " * 600])
    assert v.shape == (1, 384) and np.isfinite(v).all()


def test_gelu_matches_erf_definition() -> None:
    """The in-place polynomial GELU matches 0.5 x (1 + erf(x / sqrt 2)) closely."""
    import math

    x = np.linspace(-8, 8, 2001, dtype=np.float32)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.tolist()])
    out = gelu(x.copy())
    assert out.dtype == np.float32
    assert np.max(np.abs(out - exact)) < 2e-6


def test_bundled_weights_are_the_calibrated_ones() -> None:
    """The bundled weights are byte for byte sentence-transformers/all-MiniLM-L6-v2."""
    digest = hashlib.sha256((minilm.find_model_dir() / "model.safetensors").read_bytes())
    assert digest.hexdigest() == (
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db")


def test_damaged_install_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """A model folder missing a file says to reinstall deltamem."""
    monkeypatch.setattr(minilm, "MODEL_DIR", tmp_path)
    with pytest.raises(ConfigError, match="pip install --force-reinstall deltamem"):
        minilm.find_model_dir()


def test_vectors_match_the_golden_fixture(emb: MiniLMEmbedder) -> None:
    """The numerics are pinned: a wrong layer-norm epsilon, pooling mask or GELU variant moves
    these vectors by far more than 1e-5 (tests/fixtures/minilm_golden.json)."""
    golden = json.loads((Path(__file__).parents[1] / "fixtures" / "minilm_golden.json")
                        .read_text(encoding="utf-8"))
    assert golden["embedder"] == emb.name
    got = emb.embed(golden["texts"])
    np.testing.assert_allclose(got, np.array(golden["vectors"], dtype=np.float32), atol=1e-5)


def test_the_shared_tokenizer_cuts_long_texts_as_its_own_truncation_would(
        emb: MiniLMEmbedder) -> None:
    """The network and the token counter share one tokenizer without truncation; the network
    cuts the ids itself, to exactly what the tokenizer's own truncation gives."""
    from tokenizers import Tokenizer

    model = emb.model
    reference = Tokenizer.from_file(str(minilm.find_model_dir() / "tokenizer.json"))
    reference.no_padding()
    reference.enable_truncation(model.max_len)
    texts = ["", "short", "word " * (model.max_len - 2), "word " * (model.max_len - 1),
             "pytest -x tests/test_checkout.py::test_total " * 80]
    assert model.tokenize(texts) == [e.ids for e in reference.encode_batch(texts)]
    assert model.tokenizer is minilm.tokenizer_of(minilm.find_model_dir())
    assert len(model.tokenizer.encode("word " * 600, add_special_tokens=False).ids) == 600
