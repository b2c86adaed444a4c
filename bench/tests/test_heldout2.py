"""heldout-2 preparation: the agent-rule selection protocol (played by a double), the draft
suite, the power and wall-time script and the writer check on the committed archives."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class NoneArmDouble:
    """Test double of the none arm's dev play: each rule adds a fixed amount to every episode's
    progress (rules combine additively); every call is recorded."""

    def __init__(self, effects: dict[str, float]) -> None:
        self.effects = effects
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def __call__(self, entry: dict[str, Any], rules: Sequence[str]) -> list[float]:
        self.calls.append((entry["name"], tuple(rules)))
        return [0.3 + sum(self.effects.get(r, 0.0) for r in rules)] * 10


def test_the_protocol_keeps_rules_that_help_the_none_arm_and_plays_each_once() -> None:
    select = script("select_agent_rules")
    play = NoneArmDouble({"no_put_back": 0.05, "examine_penalty": 0.02,
                          "unvisited_bonus": -0.01, "look_before_focus": 0.0})
    chosen = select.select([{"name": "alfworld-warm"}], play)["alfworld-warm"]
    assert chosen["kept"] == ["no_put_back", "examine_penalty"]
    assert chosen["agent_rules"] == "no_put_back,examine_penalty"
    assert chosen["combined_gain"] == 0.07
    # baseline, four single rules, one combination; nothing else was played
    assert len(play.calls) == 6 and play.calls[0] == ("alfworld-warm", ())


def test_a_demoting_rule_whose_trigger_the_baseline_never_played_is_not_played() -> None:
    """ScienceWorld's none arm never takes "X from Y" nor examines: no_put_back and
    examine_penalty can change none of its steps, so they tie the baseline unplayed (recorded
    as inert); a bonus (unvisited_bonus) and a gate (look_before_focus) are always played, and
    a demoting rule whose trigger was played once is played."""
    select = script("select_agent_rules")
    play = NoneArmDouble({"unvisited_bonus": 0.02, "look_before_focus": 0.05})
    science = [["look around", "focus on red wire", "move red wire to workbench"], ["pick up egg"]]
    chosen = select.select([{"name": "scienceworld-warm"}], play,
                           actions=lambda entry: science)["scienceworld-warm"]
    assert chosen["inert"] == ["no_put_back", "examine_penalty"]
    assert chosen["gains"]["no_put_back"] == chosen["gains"]["examine_penalty"] == 0.0
    assert ("scienceworld-warm", ("no_put_back",)) not in play.calls
    assert chosen["agent_rules"] == "unvisited_bonus,look_before_focus"
    assert len(play.calls) == 4  # baseline, the two played rules, their combination
    assert not select.inert("no_put_back", [["take apple 1 from table 1"]])
    assert not select.inert("examine_penalty", [["go to desk 1", "examine desk 1"]])
    assert not select.inert("unvisited_bonus", science)


def test_a_combination_worse_than_the_best_single_rule_is_not_chosen() -> None:
    select = script("select_agent_rules")
    singles = {"a": [0.5, 0.5], "b": [0.4, 0.4]}
    chosen = select.choose([0.3, 0.3], singles, lambda kept: [0.35, 0.35])
    assert chosen["kept"] == ["a", "b"] and chosen["agent_rules"] == "a"
    nothing = select.choose([0.3, 0.3], {"a": [0.3, 0.3]}, lambda kept: [1.0, 1.0])
    assert nothing["agent_rules"] == "" and nothing["combined_gain"] is None


def test_the_suite_names_the_placebo_and_the_rules_chosen_on_dev() -> None:
    """heldout-2: ALFWorld 300 and ScienceWorld 200 with the placebo arm, the two replications at
    150; the warm entries run the agent rules the selection chose on dev by the none arm alone
    (results/select-rules/selection.json), the replications heldout-1's agent (no rule)."""
    import json

    select = script("select_agent_rules")
    entries = {e["name"]: e for e in select.suite_entries("heldout-2")}
    assert entries["alfworld-warm"]["episodes"] == 300
    assert entries["scienceworld-warm"]["episodes"] == 200
    assert "placebo" in entries["alfworld-warm"]["memory"].split(",")
    assert {entries[n]["episodes"] for n in ("twx-twc-online", "twx-coin-online")} == {150}
    chosen = json.loads((BENCHMARKS.parent / "results" / "select-rules" / "selection.json")
                        .read_text())
    for name in ("alfworld-warm", "scienceworld-warm"):
        assert entries[name]["agent_rules"] == chosen[name]["agent_rules"], name
    replications = ("twx-twc-online", "twx-coin-online")
    assert [entries[name]["agent_rules"] for name in replications] == ["", ""]


def test_power_script_on_the_committed_archives(capsys: Any) -> None:
    """From heldout-1's ALFWorld warm paired SD (0.287), +0.05 needs about 260 pairs at α 0.05
    (the audit's normal approximation: 259); the draft's wall time is summed from the logs."""
    import json

    from deltamem_bench.stats import n_for_paired_mean

    power = script("power")
    assert power.main(["--json"]) == 0
    out = capsys.readouterr().out
    report = json.loads(out[out.index("{"):])
    row = next(r for r in report["power"] if r["source"] == "heldout-1/alfworld-warm")
    assert row["n"] == 40 and abs(row["sd"] - 0.287) < 0.001
    assert row["n_progress_0.05"] == n_for_paired_mean(row["sd"], 0.05)
    assert 255 <= row["n_progress_0.05"] <= 265 and row["draft_n"] == 300
    hours = {r["entry"]: r["hours"] for r in report["wall_time_hours"]}
    assert set(hours) == {"alfworld-warm", "scienceworld-warm", "twx-twc-online",
                          "twx-coin-online"}
    assert report["total_hours"] == round(sum(hours.values()), 1) > 0


def test_writer_check_script_on_a_committed_archive(capsys: Any) -> None:
    """heldout-1's ALFWorld warm: no AWM workflow the 135M writer wrote is well-formed."""
    import json

    writer = script("writer_check")
    archive = BENCHMARKS.parent / "results" / "heldout-1" / "alfworld-warm.tar.gz"
    assert writer.main([str(archive), "--json"]) == 0
    out = capsys.readouterr().out
    rows = {r["writer"]: r for r in json.loads(out[out.index("{"):])["rows"]}
    assert set(rows) == {"awm", "reasoningbank", "deltamem-llm"}
    assert rows["awm"]["items_shown"] == 40 and rows["awm"]["well_formed_shown"] == 0
    assert "| heldout-1/alfworld-warm | awm | 40 |" in out


def test_a_draft_registration_draws_nothing_and_cannot_be_played(tmp_path: Path) -> None:
    """``register.py --draft`` writes the registration's fields that exist before the code is
    frozen (options, run options with the agent rules, arms, the exact-test endpoints), draws
    no stream, leaves the registry alone, and the loader refuses it as a registration."""
    import json

    import pytest

    from deltamem.errors import ConfigError
    from deltamem_bench.registration import load_registration

    register = script("register")
    registry = tmp_path / "registry.jsonl"
    assert register.main(["--name", "h2", "--suite", "heldout-2", "--seed", "2", "--fresh",
                          "--test", "sign-flip", "--draft", "--results", str(tmp_path),
                          "--registry", str(registry)]) == 0
    path = tmp_path / "h2" / "registration.DRAFT.json"
    draft = json.loads(path.read_text())
    assert draft["format"] == "draft" and draft["status"].startswith("DRAFT - NOT REGISTERED")
    assert draft["endpoints"]["primary"]["test_id"] == "sign-flip"
    assert draft["code"] is None and all(e["streams"] is None for e in draft["entries"])
    alf = draft["entries"][0]
    assert alf["kinds"] == ["none", "deltamem", "synapse", "long-context", "placebo"]
    assert alf["run_options"]["choice"]["no_put_back"] is False
    assert not registry.exists() and not (tmp_path / "h2" / "registration.json").exists()
    with pytest.raises(ConfigError, match="not a registration"):
        load_registration(path)


def test_the_committed_registration_matches_the_suite() -> None:
    """results/heldout-2/registration.json: registered (not a draft), its entries the suite's
    with their agent rules and sizes, the exact primary test, fresh streams of the sizes."""
    import json

    from deltamem_bench.registration import load_registration

    folder = BENCHMARKS.parent / "results" / "heldout-2"
    registration = load_registration(folder / "registration.json")
    suite = script("select_agent_rules").suite_entries("heldout-2")
    assert registration["family"] == [e["name"] for e in suite]
    assert registration["fresh"] is True and registration["seed"] == 2
    assert registration["endpoints"]["primary"]["test_id"] == "sign-flip"
    assert not registration["code"]["uncommitted_changes"]
    for entry, planned in zip(registration["entries"], suite, strict=True):
        assert entry["options"]["episodes"] == planned["episodes"]
        assert entry["options"].get("agent_rules", "") == planned["agent_rules"]
        assert len(entry["streams"]["eval"]) == planned["episodes"]
    draft = json.loads((folder / "registration.DRAFT.json").read_text())
    assert draft["family"] == registration["family"]


def test_rule_firings_are_counted_on_played_actions() -> None:
    """On the recorded dev-2 episode 38 prefix (test_choice.DEV2_EPISODE_38): two put-backs,
    five repeated examines (steps 9, 11, 12, 17, 18), five go-to revisits; a ScienceWorld-like
    sequence with a focus before any look or move counts once, one after "go to" does not."""
    from test_choice import DEV2_EPISODE_38

    select = script("select_agent_rules")
    counts = select.firings([DEV2_EPISODE_38, ["focus on egg"],
                             ["go to kitchen", "focus on egg"]])
    assert counts["episodes"] == 3 and counts["steps"] == 20 + 1 + 2
    assert counts["no_put_back"] == 2 and counts["examine_penalty"] == 5
    assert counts["unvisited_bonus (revisits)"] == 5 and counts["look_before_focus"] == 1


def test_rederive_rereads_by_another_test_but_never_writes_it(tmp_path: Path) -> None:
    """``--test sign-flip`` re-reads heldout-1 by the exact test (no entry passes Holm over the
    eight: the smallest adjusted p is Coin warm's 2/2**8 x 8 = 0.0625); with ``--write`` it is
    refused, so a document never quotes a test other than the registered one."""
    import json

    import pytest

    rederive = script("rederive")
    folder = BENCHMARKS.parent / "results" / "heldout-1"
    assert rederive.main([str(folder), "--out", str(tmp_path), "--test", "sign-flip"]) == 0
    report = json.loads((tmp_path / "heldout-1" / "endpoints.json").read_text())
    rows = report["endpoints"]["entries"]
    assert report["endpoints"]["primary_test"] == "sign-flip"
    assert not any(r["above_zero"] for r in rows.values())
    assert rows["twx-coin-warm"]["primary_p_holm"] == 0.0625
    with pytest.raises(SystemExit):
        rederive.main([str(folder), "--out", str(tmp_path), "--test", "sign-flip", "--write",
                       str(tmp_path / "doc.md")])
