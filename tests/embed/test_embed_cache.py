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


def test_kept_vectors_reach_another_cache_by_digest_without_their_text(tmp_path) -> None:
    """``save`` keeps the vectors of the texts named (the hook daemon: a project's gists) for
    another process; ``load`` finds them by a digest of the embedder's name and the text, and
    the file holds no text."""
    emb, first = CountingEmbedder(), EmbeddingCache(8)
    first.embed(emb, ["fix the checkout total", "a request the user typed"])
    path = tmp_path / "gists.npz"
    assert first.save(path, emb.name, ["fix the checkout total", "never embedded"]) == 1
    written = path.stat().st_mtime_ns
    assert first.save(path, emb.name, ["fix the checkout total"]) == 0  # nothing new: no write
    assert path.stat().st_mtime_ns == written
    assert (path.stat().st_mode & 0o777) == 0o600
    assert b"checkout" not in path.read_bytes() and b"request" not in path.read_bytes()
    second = EmbeddingCache(8)
    assert second.load(path) == 1
    emb.batches.clear()
    vectors, computed = second.embed(emb, ["fix the checkout total", "a request the user typed"])
    assert computed == 1 and emb.batches == [["a request the user typed"]]  # not kept
    np.testing.assert_array_equal(vectors[0], HashingEmbedder(64).embed(
        ["fix the checkout total"])[0])
    other = CountingEmbedder("another model")
    assert second.embed(other, ["fix the checkout total"])[1] == 1  # its own name, not found
    # A later save keeps what was loaded and adds the new, newest last, within max_entries.
    second.embed(emb, [f"task {i}" for i in range(8)])
    assert second.save(path, emb.name, [f"task {i}" for i in range(8)]) == 8
    third = EmbeddingCache(8)
    assert third.load(path) == 8
    assert third.embed(emb, ["task 7", "fix the checkout total"])[1] == 1  # the oldest dropped


def test_a_file_that_holds_no_kept_vectors_is_refused(tmp_path) -> None:
    bad = tmp_path / "gists.npz"
    bad.write_bytes(b"not a numpy archive")
    with pytest.raises(ValueError, match="holds no kept embeddings"):
        EmbeddingCache(8).load(bad)
    np.savez(bad, digests=np.zeros((2, 16), dtype=np.uint8),
             vectors=np.zeros((3, 64), dtype=np.float32))
    with pytest.raises(ValueError, match="holds no kept embeddings"):
        EmbeddingCache(8).load(bad)
    with pytest.raises(OSError):
        EmbeddingCache(8).load(tmp_path / "missing.npz")
