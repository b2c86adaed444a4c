"""The static embedder distilled from MiniLM: small-vocabulary distillation into tmp dirs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from deltamem.embed import static
from deltamem.embed.minilm import MiniLMModel
from deltamem.embed.static import StaticEmbedder
from deltamem.errors import ConfigError

# Token ids below 3200 cover these words in BERT's vocabulary, so a 3200-token distil suffices.
LIMIT = 3200
PROBE = ["hot water", "cold water", "open the door", "go to the room", "turn off the light"]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> StaticEmbedder:
    """A static embedder distilled over the first 3200 vocabulary ids."""
    e = StaticEmbedder(cache_dir=tmp_path_factory.mktemp("cache"), vocab_limit=LIMIT)
    e.ensure()
    return e


def test_shape_norm_and_name(small: StaticEmbedder) -> None:
    """Vectors are (n, 256) unit rows; non-default settings show in the name."""
    v = small.embed(PROBE)
    assert v.shape == (5, 256) and v.dtype == np.float32 and small.dim == 256
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert small.name == "static-minilm-p256-v3200"


def test_related_closer_than_unrelated(small: StaticEmbedder) -> None:
    """Related phrases score higher than unrelated ones."""
    v = small.embed(PROBE)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3
    assert v[0] @ v[1] > v[0] @ v[4] + 0.3


def test_empty_and_out_of_vocab_are_zero(small: StaticEmbedder) -> None:
    """Empty text and text made only of tokens past the limit embed to zeros."""
    v = small.embed(["", "drawer", "open the door"])  # "drawer" is id 13065 > LIMIT
    assert not v[0].any() and not v[1].any() and v[2].any()
    assert small.embed([]).shape == (0, 256)


def test_deterministic_and_order_independent(small: StaticEmbedder) -> None:
    """Embedding is deterministic and independent of batch composition."""
    batched = small.embed(PROBE)
    single = np.vstack([small.embed([t]) for t in PROBE])
    np.testing.assert_allclose(batched, single, atol=1e-6)


def test_cache_is_complete_and_reused(small: StaticEmbedder,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache holds matrix, tokenizer and manifest (no leftovers) and is read, not rebuilt."""
    folder = small.folder
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "tokenizer.json",
                                                        "vectors.npy"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["vocab_limit"] == LIMIT and manifest["shape"] == [30522, 256]
    monkeypatch.setattr(static, "_LOADED", {})  # forget the in-process copy
    monkeypatch.setattr(static.Distiller, "run", lambda self: pytest.fail("re-distilled"))
    again = StaticEmbedder(cache_dir=folder.parent.parent, vocab_limit=LIMIT)
    np.testing.assert_allclose(again.embed(PROBE), small.embed(PROBE), atol=1e-6)


def test_distillation_resumes_after_interruption(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash mid-distil leaves finished chunks; the rerun computes only the rest."""
    monkeypatch.setattr(static, "CHUNK_TOKENS", 100)
    real = MiniLMModel.embed_ids
    calls: list[int] = []
    crashed: list[bool] = []

    class Crash(RuntimeError):
        pass

    def flaky(self: MiniLMModel, ids: list[list[int]], batch_size: int) -> np.ndarray:
        calls.append(len(ids))
        if len(calls) == 2 and not crashed:
            crashed.append(True)
            raise Crash("simulated crash")
        return real(self, ids, batch_size)

    monkeypatch.setattr(MiniLMModel, "embed_ids", flaky)
    # Ids below 1300 are special and single-character tokens: tiny, but enough to test resuming.
    settings = {"vocab_limit": 1300, "pca_dims": None}
    e = StaticEmbedder(cache_dir=tmp_path / "a", **settings)
    with pytest.raises(Crash):
        e.ensure()
    assert not (e.folder / "manifest.json").exists()
    assert [p.name for p in (e.folder / "parts").glob("*.npy")] == ["part-000000-000100.npy"]
    assert not list(e.folder.rglob("*.tmp*"))

    calls.clear()
    manifest = e.ensure()
    assert sum(calls) == manifest["distilled_tokens"] - 100  # the first chunk was not redone
    assert not (e.folder / "parts").exists()

    fresh = StaticEmbedder(cache_dir=tmp_path / "b", **settings)
    fresh.ensure()
    np.testing.assert_allclose(np.load(e.folder / "vectors.npy"),
                               np.load(fresh.folder / "vectors.npy"), atol=1e-6)


def test_bad_settings() -> None:
    """Impossible PCA widths and tiny vocabularies are refused up front."""
    with pytest.raises(ConfigError):
        StaticEmbedder(pca_dims=0)
    with pytest.raises(ConfigError):
        StaticEmbedder(pca_dims=500)
    with pytest.raises(ConfigError, match="vocab_limit"):
        StaticEmbedder(vocab_limit=2100)
    with pytest.raises(ConfigError, match="vocab_limit"):
        StaticEmbedder(vocab_limit=999, pca_dims=None)


@pytest.mark.slow
def test_full_vocabulary_orders_like_minilm(tmp_path: Path) -> None:
    """The default full-vocabulary 256-d model ranks a paraphrase above an unrelated task."""
    e = StaticEmbedder(cache_dir=tmp_path)
    v = e.embed(["heat the apple", "warm the apple", "open the drawer"])
    assert e.name == "static-minilm" and v.shape == (3, 256)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3


def test_warm_loads_the_matrix_once(small: StaticEmbedder) -> None:
    """``warm()`` loads what the first embed needs, once per process (a server calls it at
    start); the few-texts path (one ``encode`` each) embeds as the batch path does."""
    from deltamem.embed import static

    small.warm()
    loaded = static._LOADED[small.folder]
    small.warm()
    assert static._LOADED[small.folder] is loaded
    few = small.embed(PROBE[:2])  # <= _FEW texts: encoded one by one
    np.testing.assert_allclose(few, small.embed(PROBE)[:2], atol=1e-6)
