"""Cold starts: the first recall of a fresh process, and `deltamem mcp` answering `initialize`.

Every figure is a fresh Python process, timed from outside or from its own first line, ``--runs``
times, the variants interleaved, with their references measured in the same run:

* **first recall** -- a process imports deltamem, opens a memory of ``--episodes`` learned
  episodes and recalls once (what the hook daemon does at a session's first prompt), then once
  more (warm). Per embedder (``--embedders``): ``import`` (ms to import deltamem), ``first``
  (the first recall: loads the embedder), ``warm`` (the second). For ``minilm`` (ONNX Runtime)
  the variant ``empty cache`` runs with a cache folder of its own, emptied before each run: the
  first process ever, which builds and keeps the ONNX graph; the plain rows find it kept.
* **mcp initialize** -- ``deltamem mcp`` (stdio) is started as the ``deltamem`` command runs it
  (the entry point ``[project.scripts]`` names in pyproject.toml) and sent a JSON-RPC
  ``initialize``; the figure is the time from the start to the answer. Twice: as shipped (the
  fast front answers while the SDK and the engine import) and with ``DELTAMEM_MCP_FRONT=0``
  (the SDK server answers, after those imports: the state before the front); then the time
  to the answer to the ``tools/list`` sent next (with the front: the front's, from the SDK
  server's own table, ``listings.json``), and to the answer to a first tool call (``stats``:
  the SDK server's in both, once the imports are done), and the time from closing its stdin
  to its exit (what a client waits for at a session's end; with the front the process ends
  without tearing the interpreter down, ``deltamem_launch.end_now``). References: the
  interpreter alone (``python -c pass``), and the imports the SDK server needs before it can
  answer (``import deltamem``; the MCP SDK's ``mcp.server``), each in a fresh process.

Prints a table (p50 / max ms) and one JSON object.

    python benchmarks/cold_start.py [--runs 5] [--embedders minilm,static]
    python benchmarks/cold_start.py --tiny
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))
from e2e import episodes  # noqa: E402

CHILD = """
import time, sys, json
t0 = time.perf_counter()
from deltamem import DeltaMem
t1 = time.perf_counter()
mem = DeltaMem.open(sys.argv[1], embedder=sys.argv[2], create=False)
t2 = time.perf_counter()
mem.recall("heat the apple and put it on the table", "You are in the kitchen.")
t3 = time.perf_counter()
mem.recall("cool the mug and put it in the cabinet", "You are in the hallway.")
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "open": t2 - t1, "first": t3 - t2, "warm": t4 - t3}))
"""

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "cold_start", "version": "1"}}}


def environ(cache: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "bench" / "src"),
                                          os.environ.get("PYTHONPATH", "")])}
    if cache is not None:
        env["DELTAMEM_CACHE"] = str(cache)
    return env


def first_recall(db: Path, embedder: str, cache: Path | None) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD, str(db), embedder], env=environ(cache),
                          capture_output=True, text=True, check=True, timeout=600)
    times: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return {k: v * 1000 for k, v in times.items()}


def command() -> list[str]:
    """What the ``deltamem`` console script runs (its target in pyproject.toml), as a Python
    command line: the same imports, whether or not the installed script is up to date."""
    target = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["deltamem"]
    module, _, func = target.partition(":")
    return [sys.executable, "-c", f"import sys; sys.argv[0] = 'deltamem'; from {module} import "
            f"{func}; sys.exit({func}())"]


def mcp_initialize(db: Path, embedder: str, front: bool) -> tuple[float, float, float, float]:
    """ms from starting ``deltamem mcp`` to its answer to ``initialize``, to its answer to the
    ``tools/list`` sent right after, and to its answer to the tool call sent then; and ms from
    closing its stdin (as a client ends a session) to its exit."""
    started = time.perf_counter()
    proc = subprocess.Popen([*command(), "mcp", "--db", str(db), "--embedder", embedder],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True,
                            env={**environ(), "DELTAMEM_MCP_FRONT": "1" if front else "0"})
    times = []
    try:
        assert proc.stdin is not None and proc.stdout is not None
        for rid, lines in ((1, [INITIALIZE]), (2, [INITIALIZED, TOOLS_LIST]), (3, [CALL])):
            proc.stdin.write("".join(json.dumps(line) + "\n" for line in lines))
            proc.stdin.flush()
            answer = json.loads(proc.stdout.readline())
            times.append((time.perf_counter() - started) * 1000)
            if answer.get("id") != rid or "result" not in answer:
                raise SystemExit(f"deltamem mcp answered {answer!r}")
        closed = time.perf_counter()
        proc.stdin.close()
        proc.wait(60)
        return times[0], times[1], times[2], (time.perf_counter() - closed) * 1000
    finally:
        proc.kill()
        proc.wait(10)


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
CALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "stats", "arguments": {}}}
MCP_ROWS = {False: "deltamem mcp, SDK answers: initialize",
            True: "deltamem mcp (front): initialize answered"}
TOOLS_ROWS = {False: "deltamem mcp, SDK answers: tools/list",
              True: "deltamem mcp (front): tools/list"}
CALL_ROWS = {False: "deltamem mcp, SDK answers: first tool call",
             True: "deltamem mcp (front): first tool call"}
EXIT_ROWS = {False: "deltamem mcp, SDK answers: exit after stdin closed",
             True: "deltamem mcp (front): exit after stdin closed"}


def mcp_round(db: Path, embedder: str, add: Callable[[str, float], None]) -> None:
    """One run of the mcp rows and their references."""
    add("python -c pass", python_alone("pass"))
    add("import deltamem", python_alone("import deltamem"))
    add("import mcp.server", python_alone("import mcp.server"))
    for front in (False, True):
        init, tools, call, ended = mcp_initialize(db, embedder, front)
        add(MCP_ROWS[front], init)
        add(TOOLS_ROWS[front], tools)
        add(CALL_ROWS[front], call)
        add(EXIT_ROWS[front], ended)


def python_alone(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=environ(), check=True, timeout=120,
                   capture_output=True)
    return (time.perf_counter() - started) * 1000


def summary(samples: list[float]) -> dict[str, float]:
    return {"p50": statistics.median(samples), "max": max(samples), "n": len(samples)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--embedders", default="minilm,static")
    parser.add_argument("--no-mcp", action="store_true", help="skip deltamem mcp")
    parser.add_argument("--tiny", action="store_true", help="seconds (the test suite)")
    args = parser.parse_args()
    if args.tiny:
        args.runs, args.episodes, args.embedders = 1, 5, "static"
    embedders = [e.strip() for e in args.embedders.split(",") if e.strip()]
    samples: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        samples.setdefault(name, []).append(value)

    from deltamem import DeltaMem  # builds the memories (and distils the static embedder once)

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        dbs = {}
        for embedder in embedders:
            dbs[embedder] = tmp / f"{embedder.replace(':', '-')}.db"
            with DeltaMem.open(dbs[embedder], embedder=embedder) as mem:
                mem.learn_many(episodes(args.episodes, 1))
        first_recall(dbs[embedders[0]], embedders[0], None)  # the kept caches exist
        empty = tmp / "empty-cache"
        for _ in range(args.runs):
            for embedder in embedders:
                got = first_recall(dbs[embedder], embedder, None)
                for part in ("import", "first", "warm"):
                    add(f"{embedder}: {part}", got[part])
                if embedder == "minilm":
                    shutil.rmtree(empty, ignore_errors=True)
                    empty.mkdir()
                    got = first_recall(dbs[embedder], embedder, empty)
                    add(f"{embedder}, empty cache: first", got["first"])
            if not args.no_mcp:
                mcp_round(dbs[embedders[0]], embedders[0], add)
    rows = {name: summary(values) for name, values in samples.items()}
    print(f"cold starts, fresh processes, {args.runs} runs interleaved "
          f"({platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.2f})")
    width = max(len(name) for name in rows)
    print(f"{'what':<{width}} {'p50 ms':>9} {'max ms':>9}")
    for name, row in rows.items():
        print(f"{name:<{width}} {row['p50']:>9.1f} {row['max']:>9.1f}")
    report: dict[str, Any] = {"benchmark": "cold_start", "runs": args.runs, "rows": rows,
                              "load": os.getloadavg()[0]}
    if "minilm: first" in rows and "minilm, empty cache: first" in rows:
        report["minilm_first_empty_over_kept"] = (rows["minilm, empty cache: first"]["p50"]
                                                  / rows["minilm: first"]["p50"])
    if MCP_ROWS[True] in rows:
        report["mcp_initialize_over_python"] = (rows[MCP_ROWS[True]]["p50"]
                                                / rows["python -c pass"]["p50"])
        report["mcp_initialize_front_over_sdk"] = (rows[MCP_ROWS[True]]["p50"]
                                                   / rows[MCP_ROWS[False]]["p50"])
        report["mcp_tools_list_front_over_sdk"] = (rows[TOOLS_ROWS[True]]["p50"]
                                                   / rows[TOOLS_ROWS[False]]["p50"])
    print(json.dumps(report))


if __name__ == "__main__":
    main()
