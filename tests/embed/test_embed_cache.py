"""The bounded embedding cache, alone and in the memory's read path."""

from __future__ import annotations

import numpy as np
import pytest

from deltamem.config import Settings
from deltamem.embed.cache import EmbeddingCache
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS


class CountingEmbedder(HashingEmbedder):
    """Test double: the hashing embedder, recording every batch it is asked to embed."""

    def __init__(self, name: str = "counting") -> None:
        super().__init__(64)
        self.name = name
        self.batches: list[list[str]] = []

    def embed(self, texts):
        self.batches.append(list(texts))
        return super().embed(texts)


def test_repeated_texts_are_embedded_once_in_one_batch() -> None:
    emb, cache = CountingEmbedder(), EmbeddingCache(8)
    first, computed = cache.embed(emb, ["heat the apple", "kitchen", "heat the apple"])
    assert computed == 2 and emb.batches == [["heat the apple", "kitchen"]]
    again, computed = cache.embed(emb, ["kitchen", "heat the apple"])
    assert computed == 0 and len(emb.batches) == 1
    np.testing.assert_array_equal(again, first[[1, 0]])
    np.testing.assert_array_equal(first, HashingEmbedder(64).embed(
        ["heat the apple", "kitchen", "heat the apple"]))
    assert (cache.hits, cache.misses) == (2, 2)


def test_least_recently_used_entry_goes_first() -> None:
    emb, cache = CountingEmbedder(), EmbeddingCache(2)
    cache.embed(emb, ["a", "b"])
    cache.embed(emb, ["a"])  # "b" is now the oldest
    cache.embed(emb, ["c"])
    assert len(cache) == 2
    cache.embed(emb, ["a", "b"])
    assert emb.batches[-1] == ["b"]


def test_entries_are_per_embedder_and_cannot_be_mutated() -> None:
    cache = EmbeddingCache()
    one, two = CountingEmbedder("one"), CountingEmbedder("two")
    vectors, _ = cache.embed(one, ["open the fridge"])
    vectors[0] = 0.0  # the caller's copy only
    cache.embed(two, ["open the fridge"])
    assert len(two.batches) == 1
    again, computed = cache.embed(one, ["open the fridge"])
    assert computed == 0 and np.linalg.norm(again[0]) == pytest.approx(1.0, abs=1e-6)


def test_zero_entries_turns_the_cache_off() -> None:
    emb, cache = CountingEmbedder(), EmbeddingCache(0)
    cache.embed(emb, ["x"])
    cache.embed(emb, ["x"])
    assert len(emb.batches) == 2 and len(cache) == 0
    with pytest.raises(ValueError):
        EmbeddingCache(-1)


def test_repeated_recall_embeds_nothing_and_answers_the_same(tmp_path) -> None:
    emb = CountingEmbedder()
    mem = DeltaMem(SQLiteStore(tmp_path / "m.db"), emb, TraceExtractor(), settings=TEST_SETTINGS)
    first = mem.recall("heat the apple", "kitchen")
    second = mem.recall("heat the apple", "kitchen")
    assert first.usage.embed_calls == 1 and first.usage.embed_texts == 2
    assert second.usage.embed_calls == 0 and second.usage.embed_texts == 0
    assert emb.batches == [["heat the apple", "kitchen"]]
    np.testing.assert_array_equal(first.task.query, second.task.query)
    mem.close()


def test_cache_size_is_a_setting(tmp_path) -> None:
    emb = CountingEmbedder()
    mem = DeltaMem(SQLiteStore(tmp_path / "m.db"), emb, TraceExtractor(),
                   settings=TEST_SETTINGS.with_(embed_cache=0))
    mem.recall("heat the apple", "kitchen")
    mem.recall("heat the apple", "kitchen")
    assert len(emb.batches) == 2
    mem.close()
    assert Settings.from_env({"DELTAMEM_EMBED_CACHE": "16"}).embed_cache == 16
