"""Pre-registration: what a registration holds, and the runs it refuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deltamem.embed.hashing import HashingEmbedder
from deltamem.errors import ConfigError
from deltamem.testing.llm import FunctionLLM
from deltamem_bench.cli import plan_bench
from deltamem_bench.envs.base import EpisodeSpec
from deltamem_bench.registration import (
    ENDPOINTS,
    check_run,
    code_hash,
    llama_build,
    load_registration,
    register,
)
from deltamem_bench.registry import Registry, episode_key
from deltamem_bench.runner import read_log, run_bench
from test_agent import CoinRoomDouble
from test_runner import ENV, coin_player, options

ENTRY = {"name": "coin-online", "env": ENV, "memory": "none,deltamem", "episodes": 3,
         "protocol": "online", "max_steps": 4}


def double(name: str, **kwargs: Any) -> CoinRoomDouble:
    return CoinRoomDouble()


def registered(tmp_path: Path, name: str = "r1", **changes: Any) -> dict[str, Any]:
    path = register(name, [ENTRY], seed=changes.pop("seed", 1),
                    fresh=changes.pop("fresh", True), registry_path=tmp_path / "registry.jsonl",
                    results=tmp_path / "results", make_env=double, **changes)
    return load_registration(path)


def test_a_registration_fixes_code_options_streams_endpoints_and_pins(tmp_path: Path) -> None:
    reg = registered(tmp_path)
    assert reg["code"]["code_sha256"] == code_hash()
    assert reg["endpoints"] == json.loads(json.dumps(ENDPOINTS))
    assert "Holm" in reg["endpoints"]["primary"]["correction"]
    assert reg["family"] == ["coin-online"]
    entry = reg["entries"][0]
    assert entry["kinds"] == ["none", "deltamem"] and entry["options"]["seed"] == 1
    assert entry["run_options"]["episodes"] == 3 and entry["run_options"]["fresh"] is True
    assert len(entry["streams"]["eval"]) == 3 and entry["streams"]["train"] == []
    pins = reg["pins"]
    assert "GGML_NATIVE=OFF" in (pins["llama_cpp_build"]["cmake_args"] or "")
    assert pins["packages"]["deltamem"] and "model" in pins
    # Its evaluation episodes are registered at once: a second fresh draw avoids them.
    registry = Registry(tmp_path / "registry.jsonl")
    played = {episode_key(ENV, EpisodeSpec(**s)) for s in entry["streams"]["eval"]}
    assert played <= registry.episodes()
    second = registered(tmp_path, "r2")["entries"][0]["streams"]["eval"]
    assert not played & {episode_key(ENV, EpisodeSpec(**s)) for s in second}


def test_a_registration_is_written_once_and_seen_episodes_are_refused(tmp_path: Path) -> None:
    registered(tmp_path, fresh=False)
    with pytest.raises(ConfigError, match="written once"):
        registered(tmp_path, fresh=False)
    with pytest.raises(ConfigError, match="in .*registry.jsonl already"):
        registered(tmp_path, "again", fresh=False)
    allowed = registered(tmp_path, "again", fresh=False, allow_seen=True)
    assert allowed["entries"][0]["seen_before"] == 3


def test_a_run_whose_code_options_or_arms_differ_is_refused(tmp_path: Path) -> None:
    reg = registered(tmp_path)
    entry = reg["entries"][0]
    plan = plan_bench(**entry["options"])
    assert check_run(reg, "coin-online", run_options=plan.options.to_dict(),
                     kinds=plan.kinds)["name"] == "coin-online"
    with pytest.raises(ConfigError, match="code differs"):
        check_run(reg, "coin-online", run_options=plan.options.to_dict(), kinds=plan.kinds,
                  current_code="0" * 64)
    other = plan_bench(**{**entry["options"], "plan_bonus": 0.5})
    with pytest.raises(ConfigError, match="changed: choice"):
        check_run(reg, "coin-online", run_options=other.options.to_dict(), kinds=other.kinds)
    with pytest.raises(ConfigError, match="changed: arms"):
        check_run(reg, "coin-online", run_options=plan.options.to_dict(), kinds=["none"])
    with pytest.raises(ConfigError, match="no entry"):
        check_run(reg, "alfworld", run_options=plan.options.to_dict(), kinds=plan.kinds)


def test_a_registered_run_plays_the_registered_stream(tmp_path: Path) -> None:
    reg = registered(tmp_path)
    streams = reg["entries"][0]["streams"]
    log = run_bench(ENV, ["none"], FunctionLLM(coin_player), out=tmp_path / "run",
                    embedder=HashingEmbedder(), env=CoinRoomDouble(),
                    options=options(episodes=3, fresh=True), planned=streams,
                    extra_config={"registration": {"name": reg["name"]}})["none"]
    assert [r["spec"] for r in read_log(log)] == streams["eval"]
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["registration"] == {"name": "r1"}


def test_llama_build_reads_the_setup_script(tmp_path: Path) -> None:
    script = tmp_path / "setup.sh"
    script.write_text('LLAMA_VERSION=0.3.36\nLLAMA_CMAKE="-DGGML_NATIVE=OFF -DGGML_AVX=ON"\n')
    assert llama_build(script) == {"version": "0.3.36",
                                   "cmake_args": "-DGGML_NATIVE=OFF -DGGML_AVX=ON"}
    assert llama_build(tmp_path / "missing.sh") == {"version": None, "cmake_args": None}


def test_a_damaged_registration_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "registration.json"
    path.write_text('{"format": 0}')
    with pytest.raises(ConfigError, match="not a registration"):
        load_registration(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_registration(tmp_path / "missing.json")


def test_entries_on_one_environment_draw_disjoint_fresh_streams(tmp_path: Path) -> None:
    """Warm and online on the same environment: each entry evaluates its own episodes."""
    online = dict(ENTRY)
    warm = {**ENTRY, "name": "coin-warm", "protocol": "warm", "train_episodes": 2}
    path = register("both", [online, warm], seed=1, fresh=True,
                    registry_path=tmp_path / "registry.jsonl", results=tmp_path / "results",
                    make_env=double)
    streams = [{(s["task_name"], s["variation"]) for s in e["streams"]["eval"]}
               for e in load_registration(path)["entries"]]
    assert len(streams[0]) == len(streams[1]) == 3 and not streams[0] & streams[1]
    assert len(Registry(tmp_path / "registry.jsonl").episodes()) == 6
