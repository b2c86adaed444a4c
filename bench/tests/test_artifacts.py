"""Run artifacts: packed by the runner's suite script, re-derived without playing."""

from __future__ import annotations

import importlib.util
import io
import json
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from deltamem.embed.hashing import HashingEmbedder
from deltamem.errors import ConfigError
from deltamem.testing.llm import FunctionLLM
from deltamem_bench.artifacts import members, pack, unpack
from deltamem_bench.report import endpoints, write_report
from deltamem_bench.runner import run_bench
from test_agent import CoinRoomDouble
from test_registration import registered
from test_runner import ENV, coin_player, options

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def played(tmp_path: Path) -> Path:
    """A registration and one entry played by the real runner at smoke size, archived."""
    reg = registered(tmp_path)
    streams = reg["entries"][0]["streams"]
    run_dir = tmp_path / "runs" / "coin-online"
    run_bench(ENV, ["none", "deltamem"], FunctionLLM(coin_player), out=run_dir,
              embedder=HashingEmbedder(), env=CoinRoomDouble(),
              options=options(episodes=3, fresh=True), planned=streams,
              extra_config={"registration": {"name": reg["name"], "entry": "coin-online"}})
    write_report(run_dir)
    folder = tmp_path / "results" / reg["name"]
    pack(run_dir, folder / "coin-online.tar.gz")
    return folder


def test_an_archive_keeps_the_logs_and_not_the_memories(tmp_path: Path) -> None:
    folder = played(tmp_path)
    names = {p.as_posix() for p in members(tmp_path / "runs" / "coin-online")}
    assert {"config.json", "stream.json", "summary.json", "none/episodes.jsonl",
            "deltamem/episodes.jsonl"} <= names
    assert not any(n.endswith((".db", "memory.json")) for n in names)
    restored = unpack(folder / "coin-online.tar.gz", tmp_path / "restored")
    assert (restored / "deltamem" / "episodes.jsonl").read_bytes() == (
        tmp_path / "runs" / "coin-online" / "deltamem" / "episodes.jsonl").read_bytes()
    with pytest.raises(ConfigError, match="no episode log"):
        pack(tmp_path / "restored" / "none", tmp_path / "x.tar.gz")


def test_unpack_refuses_a_member_outside_the_run(tmp_path: Path) -> None:
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("../outside.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(ConfigError, match="not a run file"):
        unpack(archive, tmp_path / "dest")
    assert not (tmp_path / "outside.txt").exists()


def test_rederive_recomputes_every_table_from_the_archives(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    folder = played(tmp_path)
    rederive = script("rederive")
    out = tmp_path / "rederived"
    assert rederive.main([str(folder), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "* `coin-online`: re-derived identically" in printed
    assert "| coin-online | 3 |" in printed
    # Every arm's row, with its differences against no memory and against DeltaMem.
    assert "coin-online, every arm" in printed
    assert printed.count("| none | ") == 1 and printed.count("| deltamem | ") == 1
    report = json.loads((out / "r1" / "endpoints.json").read_text())
    row = report["endpoints"]["entries"]["coin-online"]
    stored = json.loads((tmp_path / "runs" / "coin-online" / "summary.json").read_text())
    assert row["progress"] == stored["paired"]["vs_none"]["deltamem"]["progress"]
    assert (out / "r1" / "coin-online" / "curve.png").stat().st_size > 0
    # A log changed after the run no longer matches the summary stored with it.
    run_dir = tmp_path / "tampered"
    unpack(folder / "coin-online.tar.gz", run_dir)
    log = run_dir / "deltamem" / "episodes.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    records[0]["score"] = 1.0 - float(records[0]["score"])
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    pack(run_dir, folder / "coin-online.tar.gz")
    doc = tmp_path / "results.md"
    doc.write_text("<!-- rederive r1 -->\nas published\n<!-- /rederive r1 -->\n")
    assert rederive.main([str(folder), "--out", str(tmp_path / "again"),
                          "--write", str(doc)]) == 1
    captured = capsys.readouterr()
    assert "DIFFERS" in captured.out and "left as it was" in captured.err
    # A document never quotes a re-derivation that disagrees with the stored summary.
    assert "as published" in doc.read_text()


def test_rederive_writes_its_output_into_the_marked_block_of_a_document(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = played(tmp_path)
    rederive = script("rederive")
    doc = tmp_path / "results.md"
    doc.write_text("# Results\n\n<!-- rederive r1 -->\nstale table\n<!-- /rederive r1 -->\n\n"
                   "Prose after the block.\n")
    assert rederive.main([str(folder), "--out", str(tmp_path / "out"), "--write", str(doc)]) == 0
    printed = capsys.readouterr().out
    text = doc.read_text()
    assert "stale table" not in text and text.endswith("Prose after the block.\n")
    inside = text.split("<!-- rederive r1 -->\n", 1)[1].split("<!-- /rederive r1 -->", 1)[0]
    assert inside.strip() == printed.strip()
    assert "| coin-online | 3 |" in inside
    # Writing again changes nothing: the block is replaced, not appended to.
    assert rederive.main([str(folder), "--out", str(tmp_path / "out"), "--write", str(doc)]) == 0
    assert doc.read_text() == text
    # A document without the registration's block is refused and left as it was.
    other = tmp_path / "other.md"
    other.write_text("<!-- rederive r2 -->\n<!-- /rederive r2 -->\n")
    assert rederive.main([str(folder), "--out", str(tmp_path / "out"), "--write",
                          str(other)]) == 2
    assert "no '<!-- rederive r1 -->' block" in capsys.readouterr().err
    assert other.read_text() == "<!-- rederive r2 -->\n<!-- /rederive r2 -->\n"


def test_interim_holm_runs_over_the_registered_family_and_only_loosens_later() -> None:
    def summaries(p_values: dict[str, float]) -> dict[str, dict[str, Any]]:
        diff = {n: {"episodes": 40, "progress": {"p_value": p, "mean": 0.1},
                    "mcnemar": {"p_value": p}} for n, p in p_values.items()}
        return {n: {"paired": {"vs_none": {"deltamem": d}}} for n, d in diff.items()}

    family = ["a", "b", "c"]
    interim = endpoints(summaries({"a": 0.01, "b": 0.04}), family=family)
    rows = interim["entries"]
    # The unplayed entry counts with p = 1: the multipliers are 3 and 2, not 2 and 1.
    assert (rows["a"]["primary_p_holm"], rows["b"]["primary_p_holm"]) == (0.03, 0.08)
    assert rows["a"]["above_zero"] and not rows["b"]["above_zero"]
    assert interim["played"] == ["a", "b"] and interim["family"] == family
    # Without a family only the played entries count (multipliers 2 and 1).
    alone = endpoints(summaries({"a": 0.01, "b": 0.04}))["entries"]
    assert (alone["a"]["primary_p_holm"], alone["b"]["primary_p_holm"]) == (0.02, 0.04)
    # Whatever the last entry turns out to be, no adjusted p of a played entry rises.
    for last in (0.0001, 0.02, 0.5):
        final = endpoints(summaries({"a": 0.01, "b": 0.04, "c": last}), family=family)
        for name in ("a", "b"):
            assert final["entries"][name]["primary_p_holm"] <= rows[name]["primary_p_holm"]


def test_the_committed_registered_runs_rederive_identically(tmp_path: Path) -> None:
    """Every archive under results/ recomputes to the summary stored when it was played, and
    docs/results.md quotes that re-derivation as it is."""
    rederive = script("rederive")
    results = BENCHMARKS.parent / "results"
    docs = BENCHMARKS.parent / "docs" / "results.md"
    copy = tmp_path / "results.md"
    copy.write_text(docs.read_text(encoding="utf-8"), encoding="utf-8")
    assert rederive.main(["--results", str(results), "--out", str(tmp_path / "out"), "--json",
                          "--write", str(copy)]) == 0
    # docs/results.md quotes the re-derivation verbatim: rewriting its blocks changes nothing.
    assert copy.read_text(encoding="utf-8") == docs.read_text(encoding="utf-8")


def test_a_dev_pass_can_play_a_few_of_an_entrys_arms(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    agent_success = script("agent_success")
    played: list[dict[str, Any]] = []

    def recording_run_bench_command(**options: Any) -> dict[str, Any]:  # a test double
        played.append(options)
        return {"config": {}, "kinds": [], "paired": {}}

    monkeypatch.setattr(agent_success, "run_bench_command", recording_run_bench_command)
    console = agent_success.Console(file=io.StringIO())
    agent_success.run_suite("heldout", tmp_path, console, ["alfworld-warm"], seed=1,
                            eval_split="dev", arms=["deltamem", "none"])
    # The entry's own order and options are kept; only the arms are narrowed.
    assert played[0]["memory"] == "none,deltamem" and played[0]["eval_split"] == "dev"
    assert played[0]["train_episodes"] == 24 and played[0]["seed"] == 1
    with pytest.raises(agent_success.DeltaMemError, match="none of the arms"):
        agent_success.run_suite("heldout", tmp_path, console, ["alfworld-warm"], arms=["nosuch"])
    # A registered run plays every arm: --arms cannot narrow it.
    monkeypatch.setattr("sys.argv", ["agent_success.py", "--registration",
                                     "results/heldout-1/registration.json", "--arms", "none"])
    with pytest.raises(SystemExit) as exit_info:
        agent_success.main()
    assert exit_info.value.code == 2 and len(played) == 1


def synthetic_heldout2_run_double(run_dir: Path, registration: str, entry: str,
                                  scores: dict[str, list[float]]) -> None:
    """A test double of a played heldout-2 entry: hand-written episode logs (no agent, no
    model) of the draft's five arms, each episode's score given, success at score 1."""
    arms = list(scores)
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(
        {"kinds": arms, "registration": {"name": registration, "entry": entry}}))
    for arm, values in scores.items():
        (run_dir / arm).mkdir()
        lines = [json.dumps({"phase": "eval", "index": i, "kind": arm,
                             "spec": {"task_name": "t", "variation": i, "split": "test"},
                             "score": s, "success": s == 1.0, "steps": 3, "invalid": 0,
                             "memory_chars": 0 if arm == "none" else 100,
                             "memory_size": {"entries": i, "chars": 0}, "usage": {},
                             "wall_s": 1.0})
                 for i, s in enumerate(values)]
        (run_dir / arm / "episodes.jsonl").write_text("\n".join(lines) + "\n")


def test_rederive_judges_a_heldout2_style_registration_by_its_exact_test(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A registration naming the exact sign-flip test is judged by it: nine one-signed +1 pairs
    of 30 give p = 2 / 2**9 exactly (the bootstrap would give about 0.0002), Holm over the
    registered family of two (the unplayed entry at p = 1) doubles it."""
    from deltamem_bench.registration import ENDPOINTS_EXACT

    reg = registered(tmp_path, "h2", endpoints=ENDPOINTS_EXACT)
    assert reg["endpoints"]["primary"]["test_id"] == "sign-flip"
    reg["family"] = ["alfworld-warm", "coin-online"]
    folder = tmp_path / "results" / "h2"
    (folder / "registration.json").write_text(json.dumps(reg))
    n = 30
    none = [0.0] * 9 + [0.5] * (n - 9)
    deltamem = [1.0] * 9 + [0.5] * (n - 9)
    run_dir = tmp_path / "runs" / "alfworld-warm"
    synthetic_heldout2_run_double(run_dir, "h2", "alfworld-warm", {
        "none": none, "deltamem": deltamem, "synapse": none, "long-context": deltamem,
        "placebo": none})
    write_report(run_dir)
    pack(run_dir, folder / "alfworld-warm.tar.gz")
    reg["entries"] = [{**reg["entries"][0], "name": name} for name in reg["family"]]
    (folder / "registration.json").write_text(json.dumps(reg))
    rederive = script("rederive")
    out = tmp_path / "rederived"
    assert rederive.main([str(folder), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "DeltaMem − none (exact sign-flip test)" in printed
    assert "* `alfworld-warm`: re-derived identically" in printed
    assert "* `coin-online`: not played yet (no archive)" in printed
    assert "| placebo | " in printed
    report = json.loads((out / "h2" / "endpoints.json").read_text())
    row = report["endpoints"]["entries"]["alfworld-warm"]
    assert report["endpoints"]["primary_test"] == "sign-flip"
    assert row["primary_p"] == pytest.approx(2 / 2**9, abs=1e-6)
    assert row["primary_p_holm"] == pytest.approx(round(2 * 2 / 2**9, 4))
    assert row["mcnemar"]["a_only"] == 9 and row["above_zero"]
