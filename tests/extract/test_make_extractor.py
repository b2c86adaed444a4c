"""One extractor resolver: the library, the CLI's model flags and the hooks' environment name
an extractor the same way and get the same one."""

from __future__ import annotations

import pytest

from deltamem.errors import ConfigError
from deltamem.extract import make_extractor
from deltamem.extract.llm import LLMExtractor
from deltamem.extract.trace import TraceExtractor
from deltamem.faces.cli.options import ModelOptions
from deltamem.integrations.claude_code import hook_extractor
from deltamem.llm.openai_compat import OpenAICompatLLM
from deltamem.scenes.plain import Plain

URL = "http://127.0.0.1:9/v1"


@pytest.fixture(autouse=True)
def _no_endpoint_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DELTAMEM_LLM_BASE_URL", "DELTAMEM_LLM_MODEL", "DELTAMEM_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_an_extractor_is_returned_as_it_is_and_trace_takes_the_scene() -> None:
    given = TraceExtractor()
    assert make_extractor(given) is given
    scene = Plain()
    made = make_extractor(" Trace ", scene=scene)
    assert isinstance(made, TraceExtractor) and made.scene is scene
    with pytest.raises(ConfigError, match="unknown extractor 'rules'"):
        make_extractor("rules")


def _endpoint(extractor: object) -> tuple[str, str, bool]:
    """The model's URL, name and whether it holds a key (its repr masks the key)."""
    assert isinstance(extractor, LLMExtractor)
    llm = extractor.llm
    assert isinstance(llm, OpenAICompatLLM)
    return llm.url, llm.model, "api_key='***'" in repr(llm)


def test_the_library_the_cli_and_the_hooks_resolve_the_same_model() -> None:
    """A base URL alone implies the OpenAI-compatible provider, in every entry point."""
    library = make_extractor("llm", base_url=URL, model="m", api_key="k")
    cli = ModelOptions(extractor="llm", base_url=URL, model="m").build()
    hook = hook_extractor({"DELTAMEM_EXTRACTOR": "llm", "DELTAMEM_LLM_BASE_URL": URL,
                           "DELTAMEM_LLM_MODEL": "m", "DELTAMEM_LLM_API_KEY": "k"})
    want = (f"{URL}/chat/completions", "m")
    assert _endpoint(library) == (*want, True)
    assert _endpoint(cli) == (*want, False)
    assert _endpoint(hook.base) == (*want, True)  # type: ignore[attr-defined]


def test_the_local_model_takes_a_gguf_file_and_no_base_url(tmp_path) -> None:
    """``--llm local --model FILE`` names the GGUF file (it was refused as an unknown option of
    the local provider); a base URL for the in-process model is a clear error."""
    missing = tmp_path / "absent.gguf"
    with pytest.raises(ConfigError, match="absent.gguf"):
        ModelOptions(extractor="llm", llm="local", model=str(missing)).build()
    with pytest.raises(ConfigError, match="takes no base URL"):
        make_extractor("llm", llm="local", base_url=URL)
    with pytest.raises(ConfigError, match="takes no base URL"):
        ModelOptions(extractor="llm", llm="local", base_url=URL).build()
