"""Every script under benchmarks/ runs at a smoke size, so none can rot unnoticed.

Each runs in a subprocess with its arguments cut to seconds (the figures are not asserted: a
smoke size measures nothing); what is asserted is that it exits 0 and prints its result. Scripts
that need the real model, environments or PostgreSQL carry those markers. A new script must be
added to :data:`SMOKE`: a test fails on any script that is not listed.
"""

from __future__ import annotations

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
    "write_cost.py": (["--episodes", "1", "--passes", "1"], ["llm", "slow"]),
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
}


def _params() -> list[object]:
    return [pytest.param(name, args, marks=[getattr(pytest.mark, m) for m in marks], id=name)
            for name, (args, marks) in SMOKE.items()]


def test_every_script_has_a_smoke_run() -> None:
    scripts = {p.name for p in BENCHMARKS.glob("*.py")}
    assert scripts == set(SMOKE), f"add a smoke run for {sorted(scripts - set(SMOKE))}"


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
