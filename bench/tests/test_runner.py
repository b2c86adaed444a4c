"""The runner (streams, protocols, resume), the report built from its logs, and ``bench``."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from deltamem.embed.hashing import HashingEmbedder
from deltamem.errors import ConfigError
from deltamem.llm.base import Message
from deltamem.testing.llm import FunctionLLM
from deltamem_bench.agent import AgentConfig
from deltamem_bench.cli import register
from deltamem_bench.envs.base import EpisodeSpec
from deltamem_bench.factory import MEMORY_KINDS
from deltamem_bench.report import summarize, table, verdict, write_report
from deltamem_bench.runner import RunOptions, episode_stream, read_log, run_bench
from deltamem_bench.stats import wilson
from support import TEST_SETTINGS
from test_agent import CoinRoomDouble

ENV = "coinroom-double"


def coin_player(messages: Sequence[Message], schema: dict[str, Any] | None) -> str:
    """Wins odd seeds (east, then take), idles on even ones; answers memory prompts too."""
    prompt = messages[0]["content"]
    if "strategy notes" in prompt:
        return json.dumps({"items": [{"title": "go east", "description": "coin is east",
                                      "content": "move east then take coin"}]})
    if "workflow" in prompt and "Your next action" not in messages[-1]["content"]:
        return "1. move east\n2. take <object>"
    seed = int(re.findall(r"seed (\d+)", prompt)[-1])  # the task comes after any memory
    if seed % 2 == 0:
        return "Action: look around"
    return "Action: take coin" if "take coin" in messages[-1]["content"] else "Action: move east"


def options(**changes: Any) -> RunOptions:
    base = {"episodes": 4, "seed": 7, "extractor": "trace", "settings": TEST_SETTINGS,
            "agent_kind": "react", "agent": AgentConfig(max_invalid=2)}
    return RunOptions(**{**base, **changes})


def test_stream_is_fixed_by_the_seed() -> None:
    """The same seed gives the same episodes in the same order; another seed differs."""
    env = CoinRoomDouble()
    first = episode_stream(env, "test", 5, seed=1)
    assert first == episode_stream(env, "test", 5, seed=1)
    assert first != episode_stream(env, "test", 5, seed=2)
    assert episode_stream(env, "test", 3, seed=1) == first[:3]


def test_online_run_logs_every_episode_and_learns(tmp_path: Path) -> None:
    """Each kind logs one record per episode with trajectory, recall, writes and usage."""
    llm = FunctionLLM(coin_player)
    logs = run_bench(ENV, ["none", "deltamem", "synapse"], llm, out=tmp_path,
                     embedder=HashingEmbedder(), options=options(), env=CoinRoomDouble())
    none, delta, synapse = (read_log(logs[k]) for k in ("none", "deltamem", "synapse"))
    assert [r["index"] for r in delta] == [0, 1, 2, 3]
    assert [r["spec"] for r in none] == [r["spec"] for r in delta] == [r["spec"] for r in synapse]
    for record in delta:
        assert record["success"] == (record["spec"]["variation"] % 2 == 1)
        assert record["trajectory"] and record["usage"]["agent"]["llm_calls"] >= 1
        assert record["written"]["task"]["action"] in ("root", "delta", "dedup")
    assert delta[0]["memory_chars"] == 0 and delta[-1]["memory_size"]["entries"] > 0
    assert any(r["recall"]["task"]["matched"] for r in delta[1:])
    assert all(r["memory_size"]["entries"] == 0 for r in none)
    assert synapse[-1]["memory_size"]["entries"] == sum(r["success"] for r in synapse)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["env"] == ENV and config["kinds"] == ["none", "deltamem", "synapse"]


def test_rerun_resumes_and_skips_logged_episodes(tmp_path: Path) -> None:
    """A rerun with more episodes plays only the new ones; a different stream is refused."""
    llm = FunctionLLM(coin_player)
    def play(llm: FunctionLLM, **changes: Any) -> Path:
        return run_bench(ENV, ["deltamem"], llm, out=tmp_path, embedder=HashingEmbedder(),
                         options=options(**changes), env=CoinRoomDouble())["deltamem"]

    play(llm, episodes=3)
    calls = len(llm.calls)
    again = FunctionLLM(coin_player)
    log = play(again, episodes=3)
    assert not again.calls and len(read_log(log)) == 3
    records = read_log(play(again, episodes=5))
    assert [r["index"] for r in records] == [0, 1, 2, 3, 4]
    # The resumed run made exactly the calls of the two new episodes: those a fresh run of five
    # makes beyond its first three.
    fresh = FunctionLLM(coin_player)
    run_bench(ENV, ["deltamem"], fresh, out=tmp_path / "fresh", embedder=HashingEmbedder(),
              options=options(episodes=5), env=CoinRoomDouble())
    assert len(again.calls) == len(fresh.calls) - calls > 0
    assert records[3]["memory_size"]["entries"] >= records[2]["memory_size"]["entries"]
    with pytest.raises(ConfigError, match="another configuration .*seed"):
        play(again, episodes=5, seed=99)
    with pytest.raises(ConfigError, match="another configuration .*extractor"):
        play(again, episodes=5, extractor="llm")
    # A run written before a setting existed resumes when the setting is at its default, and
    # is refused when it is not.
    config_path = log.parent.parent / "config.json"
    config = json.loads(config_path.read_text())
    del config["settings"]["ann_from"]
    config_path.write_text(json.dumps(config))
    assert len(read_log(play(again, episodes=5))) == 5
    with pytest.raises(ConfigError, match="another configuration .*settings"):
        play(again, episodes=5, settings=replace(TEST_SETTINGS, ann_from=10))


def test_a_run_whose_worlds_were_made_otherwise_is_refused(tmp_path: Path) -> None:
    """An environment that says how it makes its worlds has that in the run's configuration:
    a run written before (ScienceWorld's episodes then shared one JVM) is not resumed."""
    class FreshWorlds(CoinRoomDouble):
        worlds = "a fresh engine per episode"

    def play(env: CoinRoomDouble, out: Path) -> None:
        run_bench(ENV, ["none"], FunctionLLM(coin_player), out=out, embedder=HashingEmbedder(),
                  options=options(episodes=2), env=env)

    play(FreshWorlds(), tmp_path / "new")
    config = json.loads((tmp_path / "new" / "config.json").read_text())
    assert config["worlds"] == "a fresh engine per episode"
    play(CoinRoomDouble(), tmp_path / "old")
    with pytest.raises(ConfigError, match="another configuration .*worlds"):
        play(FreshWorlds(), tmp_path / "old")


def test_warm_start_learns_gold_then_evaluates_frozen(tmp_path: Path) -> None:
    """Warm start: train records come from gold replays; a frozen memory does not grow."""
    llm = FunctionLLM(coin_player)
    log = run_bench(ENV, ["synapse"], llm, out=tmp_path, embedder=HashingEmbedder(),
                    options=options(episodes=3, seed=0, protocol="warm", train_episodes=2),
                    env=CoinRoomDouble())["synapse"]
    records = read_log(log)
    train = [r for r in records if r["phase"] == "train"]
    evals = [r for r in records if r["phase"] == "eval"]
    assert len(train) == 2 and all(r["success"] for r in train)
    assert all(r["spec"]["split"] == "train" for r in train)
    assert all(r["spec"]["split"] == "test" for r in evals) and len(evals) == 3
    assert {r["memory_size"]["entries"] for r in evals} == {2}
    assert all(r["written"] == {} for r in evals)
    assert all(r["recall"]["matched"] for r in evals)


class WanderingGoldDouble(CoinRoomDouble):
    """Test double whose gold path differs on every call, like TextWorldExpress's Coin
    Collector gold agent (a random walk): call n looks around n times first."""

    calls: int = 0

    def gold_actions(self) -> list[str] | None:
        self.calls += 1
        return ["look around"] * self.calls + ["move east", "take coin"]


def test_every_kind_learns_the_same_gold_episodes_and_a_rerun_reuses_them(tmp_path: Path) -> None:
    """Bad case: each arm replayed Coin Collector's random gold walk itself, so the arms of one
    run learned from different trajectories (and a rerun from others again)."""
    llm = FunctionLLM(coin_player)
    env = WanderingGoldDouble()
    opts = options(episodes=1, seed=0, protocol="warm", train_episodes=3)
    logs = run_bench(ENV, ["deltamem", "synapse"], llm, out=tmp_path, embedder=HashingEmbedder(),
                     options=opts, env=env)
    assert env.calls == 3  # played once per train episode, not once per kind
    steps = {kind: [r["steps"] for r in read_log(log) if r["phase"] == "train"]
             for kind, log in logs.items()}
    assert steps["deltamem"] == steps["synapse"] == [3, 4, 5]
    gold = read_log(tmp_path / "gold.jsonl")
    assert [len(r["episode"]["steps"]) for r in gold] == [3, 4, 5]
    # A kind added later (here on a resumed run) learns the recorded episodes, not new walks.
    later = run_bench(ENV, ["long-context"], llm, out=tmp_path, embedder=HashingEmbedder(),
                      options=opts, env=env)["long-context"]
    assert env.calls == 3
    assert [r["steps"] for r in read_log(later) if r["phase"] == "train"] == [3, 4, 5]


def test_a_gold_record_of_another_stream_or_a_damaged_one_is_refused(tmp_path: Path) -> None:
    llm = FunctionLLM(coin_player)
    opts = options(episodes=1, seed=0, protocol="warm", train_episodes=2)
    run_bench(ENV, ["synapse"], llm, out=tmp_path / "a", embedder=HashingEmbedder(),
              options=opts, env=CoinRoomDouble())
    gold = tmp_path / "a" / "gold.jsonl"
    records = read_log(gold)
    records[0]["spec"]["variation"] += 100
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "gold.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with pytest.raises(ConfigError, match="another episode stream"):
        run_bench(ENV, ["synapse"], llm, out=tmp_path / "b", embedder=HashingEmbedder(),
                  options=opts, env=CoinRoomDouble())
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "gold.jsonl").write_text('{"index": 0}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="not a gold record"):
        run_bench(ENV, ["synapse"], llm, out=tmp_path / "c", embedder=HashingEmbedder(),
                  options=opts, env=CoinRoomDouble())


def test_report_numbers_match_the_logs(tmp_path: Path) -> None:
    """summary.json, plots and report.html are written; SR and CI come from the JSONL."""
    llm = FunctionLLM(coin_player)
    logs = run_bench(ENV, ["none", "awm", "reasoningbank"], llm, out=tmp_path,
                     embedder=HashingEmbedder(), options=options(episodes=5), env=CoinRoomDouble())
    (tmp_path / "tree.html").write_text("<html></html>")
    summary = write_report(tmp_path)
    for name in ("summary.json", "verdict.png", "curve.png", "report.html"):
        assert (tmp_path / name).stat().st_size > 0
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    rows = {r["kind"]: r for r in summary["kinds"]}
    assert list(rows) == ["none", "awm", "reasoningbank"]
    for kind, path in logs.items():
        records = read_log(path)
        wins = sum(r["success"] for r in records)
        assert rows[kind]["successes"] == wins and rows[kind]["episodes"] == 5
        assert rows[kind]["success_rate"] == pytest.approx(wins / 5)
        low, high = wilson(wins, 5)
        assert rows[kind]["sr_ci95"] == [round(low, 4), round(high, 4)]
        steps = sum(r["steps"] for r in records) / 5
        assert rows[kind]["mean_steps"] == pytest.approx(steps)
    assert rows["awm"]["memory_llm_calls_total"] == rows["awm"]["successes"]
    assert rows["reasoningbank"]["memory_entries"] == 5
    none = {r["index"]: r for r in read_log(logs["none"])}
    for kind in ("awm", "reasoningbank"):
        diff = summary["paired"]["vs_none"][kind]
        records = read_log(logs[kind])
        expected = sum(r["score"] - none[r["index"]]["score"] for r in records) / 5
        assert diff["episodes"] == 5
        assert diff["progress"]["mean"] == pytest.approx(expected, abs=1e-4)
        assert diff["progress"]["low"] <= diff["progress"]["mean"] <= diff["progress"]["high"]
        wins = sum(r["success"] and not none[r["index"]]["success"] for r in records)
        assert diff["mcnemar"]["a_only"] == wins
    assert len(verdict(summary)) == 2 and verdict(summary)[0].startswith("awm is ")
    page = (tmp_path / "report.html").read_text()
    assert 'href="tree.html"' in page and page.count("data:image/png;base64,") == 2
    assert page.index("Verdict") < page.index("Arms") < page.index("Configuration")
    assert page.count("<details>") == 15  # 5 episodes x 3 arms, each with what it recalled
    assert table(summarize(tmp_path)).row_count == 3


def test_paired_comparison_refuses_different_streams(tmp_path: Path) -> None:
    """Two logs with different episodes at the same index are not compared."""
    from deltamem_bench.report import compare

    a = [{"phase": "eval", "index": 0, "spec": {"task_name": "coin", "variation": 1,
                                                "split": "test"}, "score": 1.0,
          "success": True}]
    b = [{**a[0], "spec": {**a[0]["spec"], "variation": 2}}]
    with pytest.raises(ValueError, match="same stream"):
        compare(a, b)
    assert compare(a, []) is None


def test_bad_options_are_refused() -> None:
    """Unknown protocols and empty runs raise ConfigError."""
    with pytest.raises(ConfigError):
        RunOptions(protocol="offline")
    with pytest.raises(ConfigError):
        RunOptions(episodes=0)


@pytest.mark.envs
@pytest.mark.llm
@pytest.mark.slow
def test_bench_runs_every_memory_kind_with_the_local_model(tmp_path: Path) -> None:
    """One short coin game per memory kind; logs, summary and report are written."""
    app = typer.Typer()
    register(app)

    @app.callback()
    def _root() -> None:
        """Group callback so that 'bench' is a subcommand, as in the real CLI."""

    out = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "bench", "--env", "twx-coin", "--memory", ",".join(MEMORY_KINDS), "--llm", "local",
        "--episodes", "1", "--seed", "0", "--protocol", "online", "--max-steps", "3",
        "--game-params", "numLocations=1,includeDoors=0,numDistractorItems=0",
        "--extractor", "trace", "--n-ctx", "2048", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert [row["kind"] for row in summary["kinds"]] == list(MEMORY_KINDS)
    for row in summary["kinds"]:
        records = [json.loads(line) for line in
                   (out / row["kind"] / "episodes.jsonl").read_text().splitlines()]
        assert len(records) == 1 and 1 <= records[0]["steps"] <= 3
        assert row["successes"] == int(records[0]["success"])
        assert records[0]["usage"]["agent"]["llm_calls"] == records[0]["steps"]
    assert (out / "report.html").stat().st_size > 0


class TwoFamilies:
    """A double of an environment's episode listing: family ``a`` has three times ``b``'s
    episodes (as ScienceWorld's tasks differ in their numbers of variations)."""

    name = "two-families-double"
    splits = ("train", "test")

    def specs(self, split: str, *, count: int, families: Any = None) -> list[EpisodeSpec]:
        return ([EpisodeSpec("a", v, split) for v in range(30)]
                + [EpisodeSpec("b", v, split) for v in range(10)])


def test_stream_deals_the_families_in_turn() -> None:
    """Any prefix of the stream holds the families evenly, whatever their sizes; each family's
    episodes are shuffled by the seed; a family that runs out leaves the rest to the others."""
    stream = episode_stream(TwoFamilies(), "test", 40, seed=3)
    assert [s.task_name for s in stream[:20]] == ["a", "b"] * 10
    assert [s.task_name for s in stream[20:]] == ["a"] * 20
    assert sorted(s.variation for s in stream if s.task_name == "b") == list(range(10))
    assert [s.variation for s in stream if s.task_name == "b"] != list(range(10))
    assert episode_stream(TwoFamilies(), "test", 6, seed=3) == stream[:6]


def test_one_family_stream_is_the_plain_shuffle() -> None:
    """With one family the stream is the seed's shuffle of the pool, as before families were
    balanced (so earlier one-family runs resume on the same episodes)."""
    env = CoinRoomDouble()
    pool = list(env.specs("test", count=5))
    random.Random(1).shuffle(pool)
    assert episode_stream(env, "test", 5, seed=1) == pool[:5]


def test_a_run_from_before_balanced_families_is_not_resumed(tmp_path: Path) -> None:
    """A run of several families records its balanced stream; its config without that record
    (written when the whole pool was shuffled) is another configuration."""
    run_bench(ENV, [], None, out=tmp_path, embedder=HashingEmbedder(), options=options(),
              env=TwoFamilies())
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["stream"] == "families in turn"
    del config["stream"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="another configuration .*stream"):
        run_bench(ENV, [], None, out=tmp_path, embedder=HashingEmbedder(), options=options(),
                  env=TwoFamilies())


def test_a_run_from_before_the_pins_and_the_focus_rule_resumes(tmp_path: Path) -> None:
    """A run written before pins were recorded, in an environment without irreversible actions
    (where the focus rule cannot act), resumes; changed pins are refused."""
    def play(**extra: Any) -> None:
        run_bench(ENV, ["none"], FunctionLLM(coin_player), out=tmp_path,
                  embedder=HashingEmbedder(), options=options(episodes=2), env=CoinRoomDouble(),
                  extra_config=extra or None)

    play()
    config = json.loads((tmp_path / "config.json").read_text())
    assert "focus_guard" not in config["choice"]
    play(pins={"model": {"sha256": "a"}})
    with pytest.raises(ConfigError, match="another configuration .*pins"):
        play(pins={"model": {"sha256": "b"}})
