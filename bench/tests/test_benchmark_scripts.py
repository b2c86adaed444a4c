"""Every script under benchmarks/ runs at a smoke size, so none can rot unnoticed.

Each runs in a subprocess with its arguments cut to seconds (the figures are not asserted: a
smoke size measures nothing); what is asserted is that it exits 0 and prints its report: a table
(lines of text) and one valid JSON object (on stdout, or in its ``--out`` file). Scripts that
need the real model, environments or PostgreSQL carry those markers; a script with no run that
avoids them says why in :data:`NEEDS`, and the few that are tools rather than measurements (they
print no table) in :data:`TOOLS`. A new script must be added to :data:`SMOKE`: a test fails on
any script that is not listed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"

# script -> (smoke arguments, the markers its run needs); {tmp} is the test's own folder.
SMOKE: dict[str, tuple[list[str], list[str]]] = {
    "recall.py": (["--sizes", "200", "--queries", "5"], []),
    "scale.py": (["--sizes", "1000", "--queries", "5", "--centres", "10", "--tmp", "{tmp}"],
                 []),
    "rederive.py": (["--results", "{tmp}", "--out", "{tmp}/out"], []),
    "e2e.py": (["--episodes", "5", "--pad", "100", "--queries", "5"], ["slow"]),
    "embed.py": (["--n", "10", "--pairs", "5"], ["slow"]),
    "blas_threads.py": (["--writers", "1", "--episodes", "2"], ["slow"]),
    "recall_quality.py": (["--embedder", "hashing"], ["slow"]),
    "server.py": (["--clients", "1", "--requests", "2", "--embedder", "hashing"], ["server"]),
    "recall_pg.py": (["--sizes", "200", "--queries", "5"], ["postgres", "slow"]),
    "serve_scale.py": (["--replicas", "1", "--clients", "1", "--requests", "2", "--embedder",
                        "hashing"], ["postgres", "server", "slow"]),
    "write_cost.py": (["--tiny"], []),
    "learn_cost.py": (["--tiny", "--profile"], []),
    "scale_listing.py": (["--tiny"], []),
    "bench_all.py": (["--tiny"], ["slow"]),
    "cold_start.py": (["--tiny"], ["slow"]),
    "write_lock.py": (["--steps", "30", "--old-steps", "5"], ["slow"]),
    "recall_roundtrips.py": (["--episodes", "4"], ["postgres", "slow"]),
    "open.py": (["--sizes", "400", "--repeats", "1"], ["slow"]),
    "peers.py": (["--smoke", "--out", "{tmp}/peers.json"], ["slow"]),
    "embed_int8.py": (["--calls", "2", "--agreement", "10", "--cache-dir", "{tmp}/cache"],
                      ["slow"]),
    "coding_memory.py": (["--smoke", "--embedder", "hashing", "--out", "{tmp}/coding.json"],
                         ["slow"]),
    "filtered_recall.py": (["--nodes", "200", "--queries", "2"], []),
    "placement.py": (["--prefill", "10", "--learns", "4", "--out", "{tmp}/placement.json"], []),
    "hook_latency.py": (["--calls", "2", "--cold-calls", "1", "--embedder", "hashing"],
                        ["slow"]),
    "serve_workers.py": (["--workers", "2", "--clients", "1", "--requests", "2"],
                         ["server", "slow"]),
    "choice_models.py": (["--steps", "1"], ["llm", "slow"]),
    "agent_success.py": (["--suite", "smoke", "--out", "{tmp}/suite"], ["llm", "envs", "slow"]),
    "register.py": (["--name", "smoke", "--suite", "smoke", "--seed", "1", "--fresh",
                     "--registry", "{tmp}/registry.jsonl", "--results", "{tmp}/results"],
                    ["envs"]),
    "backfill_registry.py": (["--registry", "{tmp}/registry.jsonl"], ["envs", "slow"]),
    "probe.py": (["--games", "2", "--train", "2", "--embedder", "hashing"], ["envs", "slow"]),
    "fuzz_faces.py": (["--n", "5", "--faces", "rest-sqlite,hook,mcp-http", "--timeout", "30"],
                      ["server", "slow"]),
    "hook_fail_open.py": (["--calls", "1", "--embedder", "hashing"], ["slow"]),
    "injection_notes.py": ([], []),
    "langgraph_store.py": (["--sizes", "20", "--baseline-max", "20"], ["slow"]),
    "power.py": (["--json"], []),
    "storage.py": (["--no-baseline", "--embedder", "hashing", "--json", "{tmp}/storage.json"], []),
    "writer_check.py": ([str(ROOT / "results" / "heldout-1" / "twx-coin-warm.tar.gz"), "--json"],
                        []),
    "baseline_keys.py": ([str(ROOT / "results" / "heldout-1" / "twx-coin-warm.tar.gz"),
                          "--json"], ["slow"]),
    # The tree against itself, on the ScienceWorld gold fixture: the timing loop and the
    # answers' comparison run; the before/after figure needs --before another tree.
    "recall_slots.py": (["--gold", str(ROOT / "tests" / "fixtures" / "scienceworld_gold.jsonl"),
                         "--before", str(ROOT), "--rounds", "1"], ["slow"]),
    "select_agent_rules.py": (["--only", "alfworld-warm", "--episodes", "1", "--out",
                               "{tmp}/select"], ["llm", "envs", "slow"]),
}


# Scripts whose smallest run still needs the model or the environments, and why no tiny mode
# without them can exist.
NEEDS = {
    "choice_models.py": "measures the local models' own speed: without them it has no subject",
    "agent_success.py": "plays real text games with the local model; its smoke suite is the "
                        "smallest run",
    "select_agent_rules.py": "chooses agent rules by the none arm's play of real games with the "
                             "local model; its protocol is tested with a double "
                             "(bench/tests/test_heldout2.py)",
}
# Not measurements: tools of the evaluation protocol, which print what they did (no table).
TOOLS = {"register.py", "rederive.py", "backfill_registry.py"}


def _params() -> list[object]:
    return [pytest.param(name, args, marks=[getattr(pytest.mark, m) for m in marks], id=name)
            for name, (args, marks) in SMOKE.items()]


def report_of(stdout: str) -> tuple[list[str], dict[str, object]]:
    """The table lines and the JSON object a script printed (its last one; it may span lines,
    as an indented dump does)."""
    lines = stdout.strip().splitlines()
    for start in range(len(lines) - 1, -1, -1):
        if not lines[start].startswith("{"):
            continue
        try:
            found = json.loads("\n".join(lines[start:]))
        except json.JSONDecodeError:
            try:
                found = json.loads(lines[start])
            except json.JSONDecodeError:
                continue
        if isinstance(found, dict):
            return [line for line in lines[:start] if line.strip()], found
    return [line for line in lines if line.strip()], {}


def test_every_script_has_a_smoke_run() -> None:
    scripts = {p.name for p in BENCHMARKS.glob("*.py")}
    assert scripts == set(SMOKE), f"add a smoke run for {sorted(scripts - set(SMOKE))}"
    assert set(NEEDS) | TOOLS <= set(SMOKE)


def test_a_report_is_a_table_and_one_json_object() -> None:
    table, found = report_of("name  ms\nscan  1.0\n{\n \"a\": 1\n}\n")
    assert table == ["name  ms", "scan  1.0"] and found == {"a": 1}
    assert report_of("no json here\n")[1] == {}


@pytest.mark.parametrize(("name", "args"), _params())
def test_script_runs_at_smoke_size(name: str, args: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "bench" / "src"),
                                          os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, str(BENCHMARKS / name),
               *[a.replace("{tmp}", str(tmp_path)) for a in args]]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, f"{name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    assert done.stdout.strip(), f"{name} printed nothing"
    if name in TOOLS:
        return
    table, found = report_of(done.stdout)
    if not found and "--out" in args:  # a script that writes its JSON to --out, not stdout
        out = Path(args[args.index("--out") + 1].replace("{tmp}", str(tmp_path)))
        found = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {}
    assert found, f"{name} printed no JSON object:\n{done.stdout[-2000:]}"
    assert len(table) >= 2, f"{name} printed no table:\n{done.stdout[-2000:]}"
