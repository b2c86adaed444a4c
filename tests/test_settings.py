"""Configuration is read in one place, and every constructor reads it the same way."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from deltamem import config
from deltamem.config import Settings
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.faces import env as faces_env
from deltamem.faces.server.rest import create_app
from deltamem.faces.server.spaces import SpacePool
from deltamem.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[1]
ENV = {"DELTAMEM_TAU_TASK": "0.61", "DELTAMEM_K_CONS": "7", "DELTAMEM_STYLE": "patches",
       "DELTAMEM_EMBEDDER": "hashing"}


def _environ_reads(path: Path) -> list[int]:
    """Lines of ``path`` that read the process environment (os.environ, os.getenv)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv")
            and isinstance(node.value, ast.Name) and node.value.id == "os"]


def test_only_the_env_modules_read_the_environment():
    """Every DELTAMEM_* variable is read by deltamem.config (the library's settings) or by the
    env module of the faces (the CLI and server) or of the hooks, nowhere else in the packages.
    (The ScienceWorld adapter hands its JVM options through JAVA_TOOL_OPTIONS, the JVM's own
    variable, and reads no setting.)"""
    jvm_options = ROOT / "bench" / "src" / "deltamem_bench" / "envs" / "scienceworld.py"
    found = {str(p.relative_to(ROOT)): lines
             for src in (ROOT / "src" / "deltamem", ROOT / "bench" / "src")
             for p in sorted(src.rglob("*.py"))
             if p != jvm_options and (lines := _environ_reads(p))}
    assert set(found) == {"src/deltamem/config.py", "src/deltamem/faces/env.py",
                          "src/deltamem/integrations/env.py"}, found


def test_every_constructor_defaults_to_the_environment(tmp_path, monkeypatch):
    """DeltaMem(...), DeltaMem.open, SpacePool and create_app: the same settings from one env."""
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    want = Settings.from_env()
    assert (want.tau_task, want.k_cons, want.style, want.embedder) == (0.61, 7, "patches",
                                                                      "hashing")
    direct = DeltaMem(SQLiteStore(tmp_path / "a.db"), HashingEmbedder(), TraceExtractor())
    opened = DeltaMem.open(tmp_path / "b.db")
    pool = SpacePool(tmp_path / "c.db")
    try:
        assert direct.settings == opened.settings == pool.settings == want
        assert opened.embedder.name == HashingEmbedder().name  # settings.embedder, from the env
        served = pool.get("default", create=True)
        assert served.settings == want and served.embedder.name == opened.embedder.name
    finally:
        direct.close(), opened.close(), pool.close()
    create_app(tmp_path / "d.db", require_keys=False)  # builds with the env's settings


def test_every_constructor_keeps_given_settings(tmp_path, monkeypatch):
    """Given settings win over the environment, the same way in every constructor."""
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    given = Settings(tau_task=0.3, embedder="hashing")
    direct = DeltaMem(SQLiteStore(tmp_path / "a.db"), HashingEmbedder(), TraceExtractor(),
                      settings=given)
    opened = DeltaMem.open(tmp_path / "b.db", settings=given)
    pool = SpacePool(tmp_path / "c.db", settings=given)
    try:
        assert direct.settings is opened.settings is pool.settings is given
        assert pool.get("default", create=True).settings is given
    finally:
        direct.close(), opened.close(), pool.close()


def test_llm_endpoint_cache_dir_and_debug_come_from_the_environment(tmp_path):
    """The three readers besides Settings.from_env, on an explicit environment."""
    assert config.llm_endpoint({}) == {"base_url": None, "model": None, "api_key": None}
    assert config.llm_endpoint({"DELTAMEM_LLM_BASE_URL": "http://127.0.0.1:9/v1",
                                "DELTAMEM_LLM_MODEL": "", "DELTAMEM_LLM_API_KEY": "k"}) == {
        "base_url": "http://127.0.0.1:9/v1", "model": None, "api_key": "k"}
    assert config.cache_dir({"DELTAMEM_CACHE": str(tmp_path)}) == tmp_path
    assert config.cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "deltamem"
    assert config.cache_dir({}) == Path.home() / ".cache" / "deltamem"
    assert faces_env.debug({"DELTAMEM_DEBUG": "1"}) and not faces_env.debug({})


@pytest.mark.parametrize(("name", "raw"), [("DELTAMEM_K_CONS", "many"),
                                           ("DELTAMEM_AUTO_CONSOLIDATE", "maybe")])
def test_a_bad_variable_is_one_config_error_naming_it(name, raw):
    """A malformed variable names itself (and no constructor half-starts)."""
    with pytest.raises(config.ConfigError, match=name):
        Settings.from_env({name: raw})
