"""make_embedder and the optional sentence-transformers backend's error path."""

from __future__ import annotations

import pytest

from deltamem.embed import (
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    StaticEmbedder,
    make_embedder,
)
from deltamem.embed import sentence_transformers as st_mod
from deltamem.errors import ConfigError


def test_default_is_minilm() -> None:
    """The default spec builds the numpy MiniLM without loading weights yet."""
    e = make_embedder()
    assert isinstance(e, MiniLMEmbedder) and e.name == "minilm"
    assert isinstance(e, Embedder)


def test_static_aliases(tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both static spellings build the static embedder (nothing distilled until embed)."""
    monkeypatch.setenv("DELTAMEM_CACHE", str(tmp_path))
    for spec in ("static", "static-minilm", " Static "):
        e = make_embedder(spec)
        assert isinstance(e, StaticEmbedder) and e.name == "static-minilm" and e.dim == 256
    assert not (tmp_path / "static-minilm").exists()


def test_hashing_specs() -> None:
    """hashing and hashing:<dim> build the test double with that width."""
    assert isinstance(make_embedder("hashing"), HashingEmbedder)
    assert make_embedder("hashing").dim == 256
    assert make_embedder("hashing:48").name == "hashing-48"


@pytest.mark.parametrize("spec", ["bogus", "minilm:x", "st:", "st:  ", "", "openai"])
def test_unknown_spec_lists_choices(spec: str) -> None:
    """Unknown specs fail with the list of valid choices."""
    with pytest.raises(ConfigError, match="minilm.*static.*st:<model>.*hashing"):
        make_embedder(spec)


@pytest.mark.parametrize("spec", ["hashing:0", "hashing:abc", "hashing:-3"])
def test_bad_hashing_width(spec: str) -> None:
    """A malformed hashing width is a ConfigError."""
    with pytest.raises(ConfigError, match="hashing width"):
        make_embedder(spec)


def test_st_missing_extra_names_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without sentence-transformers, st:<model> says which pip command to run."""
    monkeypatch.setattr(st_mod, "_available", lambda: False)
    with pytest.raises(ConfigError, match=r"pip install \"deltamem\[st\]\""):
        make_embedder("st:intfloat/e5-base-v2")


def test_st_available_probe_handles_none_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module blocked in sys.modules counts as not installed."""
    monkeypatch.setitem(__import__("sys").modules, "sentence_transformers", None)
    assert st_mod._available() is False
