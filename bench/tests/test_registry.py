"""The registry of evaluated episodes and the fresh streams drawn around it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltamem.embed.hashing import HashingEmbedder
from deltamem.errors import ConfigError
from deltamem.testing.llm import FunctionLLM
from deltamem_bench.envs.base import EpisodeSpec
from deltamem_bench.registry import Registry, episode_key, fresh_stream
from deltamem_bench.runner import episode_stream, read_log, run_bench
from test_agent import CoinRoomDouble
from test_runner import ENV, coin_player, options


def test_registry_records_each_episode_once_and_survives_a_reload(tmp_path: Path) -> None:
    path = tmp_path / "registry.jsonl"
    registry = Registry(path)
    specs = [EpisodeSpec("coin", v, "test") for v in (3, 5)]
    assert registry.add("twx-coin", specs, stream_seed=0, run="a") == 2
    assert registry.add("twx-coin", specs, stream_seed=0, run="a") == 0
    assert registry.add("twx-coin", specs[:1], stream_seed=1, run="b") == 1
    again = Registry(path)
    assert len(again) == 3 and episode_key("twx-coin", specs[0]) in again
    assert again.runs_of(episode_key("twx-coin", specs[0])) == ["a", "b"]
    assert again.episodes("twx-coin", "test") == {("twx-coin", "test", "coin", 3),
                                              ("twx-coin", "test", "coin", 5)}
    assert again.episodes("twx-coin", "dev") == set()
    # Another environment's episode with the same variation is another episode.
    assert ("twx-twc", "test", "coin", 3) not in again


def test_a_damaged_registry_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "registry.jsonl"
    path.write_text('{"env": "twx-coin"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="not a registry record"):
        Registry(path)


def test_fresh_stream_skips_registered_episodes_and_is_fixed_by_the_seed(tmp_path: Path) -> None:
    env = CoinRoomDouble()
    registry = Registry(tmp_path / "registry.jsonl")
    seen = episode_stream(env, "test", 4, seed=0)
    registry.add(ENV, seen, stream_seed=0, run="earlier")
    fresh = fresh_stream(env, ENV, "test", 6, 1, registry)
    assert len(fresh) == 6 and not set(fresh) & set(seen)
    assert fresh == fresh_stream(env, ENV, "test", 6, 1, registry)
    assert fresh != fresh_stream(env, ENV, "test", 6, 2, registry)
    with pytest.raises(ConfigError, match="only 6 episodes"):
        fresh_stream(env, ENV, "test", 7, 1, registry)


def test_a_fresh_run_plays_unregistered_episodes_and_resumes_on_the_same_ones(
        tmp_path: Path) -> None:
    """The drawn stream is kept in the run directory: registering it afterwards (which fills
    the registry with the run's own episodes) does not change what a resumed run plays."""
    registry = Registry(tmp_path / "registry.jsonl")
    registry.add(ENV, episode_stream(CoinRoomDouble(), "test", 5, seed=7), stream_seed=7,
                 run="earlier")

    def play(episodes: int) -> list[EpisodeSpec]:
        log = run_bench(ENV, ["none"], FunctionLLM(coin_player), out=tmp_path / "run",
                        embedder=HashingEmbedder(), env=CoinRoomDouble(), registry=registry,
                        options=options(episodes=episodes, fresh=True))["none"]
        return [EpisodeSpec(**r["spec"]) for r in read_log(log)]

    played = play(3)
    assert len(played) == 3 and not {episode_key(ENV, s) for s in played} & registry.episodes()
    stream = json.loads((tmp_path / "run" / "stream.json").read_text())
    assert [EpisodeSpec(**s) for s in stream["eval"]] == played
    registry.add(ENV, played, stream_seed=7, run="this one")
    assert play(3) == played
    with pytest.raises(ConfigError, match="not extended"):
        play(4)


def test_a_fresh_run_needs_a_registry(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs a registry"):
        run_bench(ENV, ["none"], FunctionLLM(coin_player), out=tmp_path,
                  embedder=HashingEmbedder(), env=CoinRoomDouble(),
                  options=options(fresh=True))


def test_a_directory_drawn_for_another_stream_is_refused(tmp_path: Path) -> None:
    run_bench(ENV, ["none"], FunctionLLM(coin_player), out=tmp_path, embedder=HashingEmbedder(),
              env=CoinRoomDouble(), options=options(episodes=2))
    stream = json.loads((tmp_path / "stream.json").read_text())
    stream["eval"][0]["variation"] += 100
    (tmp_path / "stream.json").write_text(json.dumps(stream))
    with pytest.raises(ConfigError, match="another episode stream"):
        run_bench(ENV, ["none"], FunctionLLM(coin_player), out=tmp_path,
                  embedder=HashingEmbedder(), env=CoinRoomDouble(), options=options(episodes=2))


def test_committed_registry_holds_the_documented_streams() -> None:
    """The backfilled registry is readable and holds the seed-0 test streams of the documented
    entries (spot checks: the ScienceWorld variations the audit re-derived on its own)."""
    path = Path(__file__).resolve().parents[2] / "results" / "registry.jsonl"
    registry = Registry(path)
    audited = [("find-plant", 271), ("chemistry-mix", 27), ("find-non-living-thing", 247),
               ("lifespan-longest-lived", 124), ("test-conductivity", 718),
               # the threshold fixture's test episodes
               ("lifespan-longest-lived", 94), ("power-component", 16), ("chemistry-mix", 25)]
    for task, variation in audited:
        assert ("scienceworld", "test", task, variation) in registry
    assert len(registry.episodes("twx-twc", "test")) >= 120
    assert len(registry.episodes("twx-coin", "test")) >= 120
    assert len(registry.episodes("alfworld-generated", "unseen")) >= 40
