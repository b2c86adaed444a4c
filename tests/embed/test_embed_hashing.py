"""The hashing test double: deterministic, word-overlap similarity."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from deltamem.embed.hashing import HashingEmbedder

TEXTS = ["heat the apple", "warm the apple", "open the drawer", ""]


def test_shape_norm_and_name() -> None:
    """Rows are unit (or zero for wordless text) and the name records the width."""
    e = HashingEmbedder(64)
    v = e.embed(TEXTS + ["!!!"])
    assert v.shape == (5, 64) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v[:3], axis=1), 1.0, atol=1e-6)
    assert not v[3].any() and not v[4].any()
    assert e.name == "hashing-64" and HashingEmbedder().dim == 256


def test_shared_words_raise_similarity() -> None:
    """Texts sharing words are closer than texts sharing none."""
    v = HashingEmbedder().embed(["heat the apple", "cool the apple", "open a drawer"])
    assert v[0] @ v[1] > 0.3 > abs(float(v[0] @ v[2]))


def test_case_and_punctuation_insensitive() -> None:
    """Tokenisation ignores case and punctuation."""
    v = HashingEmbedder().embed(["Heat the apple!", "heat the apple"])
    np.testing.assert_array_equal(v[0], v[1])


def test_deterministic_across_processes() -> None:
    """A fresh interpreter with another hash seed produces the same vectors."""
    code = ("import json; from deltamem.embed.hashing import HashingEmbedder; "
            f"print(json.dumps(HashingEmbedder(32).embed({TEXTS!r}).tolist()))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    np.testing.assert_array_equal(np.array(json.loads(out), dtype=np.float32),
                                  HashingEmbedder(32).embed(TEXTS))


def test_rejects_bad_width() -> None:
    """A non-positive width is refused."""
    with pytest.raises(ValueError):
        HashingEmbedder(0)
