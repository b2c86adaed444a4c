"""LLM cost of learning: our LLM extractor vs the paper's scheme, on the same episodes.

The stream is the recorded ScienceWorld gold episodes (tests/fixtures/scienceworld_gold.jsonl),
train split, played ``--passes`` times in a row -- agents re-run the same tasks, and identical
trajectories are where the dedup-before-the-model rule pays.

* **ours** -- measured: ``DeltaMem`` with ``LLMExtractor`` on the chosen model (default: the
  embedded SmolLM2 via llama.cpp), K_cons = 3. Calls and tokens come from each result's usage.
* **paper** -- counted on the same stream: the reference code calls the model once per tree per
  episode (the skip decision is itself a model answer) plus once per consolidation. We count its
  consolidations with the same trigger our run used, so the comparison isolates the dedup rule.
* **trace** -- the deterministic extractor: no model calls at all (measured: its run over the
  same stream gives the consolidation count when there is no model run).

``--llm none`` (and ``--tiny``, what the test suite runs: 2 episodes, static embedder) runs no
model: the trace extractor's run and the paper's count over it.

    python benchmarks/write_cost.py [--episodes 8] [--passes 2] [--llm local]
    python benchmarks/write_cost.py --tiny
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from deltamem._util.usage import Usage
from deltamem.config import Settings
from deltamem.engine.memory import DeltaMem
from deltamem.extract.llm import LLMExtractor
from deltamem.formats.episodes import read_episodes
from deltamem.llm import make_llm

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "scienceworld_gold.jsonl"


def stream(n: int, passes: int) -> list[Any]:
    train = [e for _, e in read_episodes(FIXTURE)
             if not isinstance(e, Exception) and e.meta["split"] == "train"][:n]
    return train * passes


def run_ours(episodes: list[Any], llm_spec: str, embedder: str) -> dict[str, Any]:
    """The stream learned with the LLM extractor on ``llm_spec`` (``"none"``: the trace
    extractor, no model)."""
    extractor: Any = "trace" if llm_spec == "none" else LLMExtractor(make_llm(llm_spec))
    total = Usage()
    consolidations = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        mem = DeltaMem.open(Path(tmp) / "cost.db", embedder=embedder,
                            extractor=extractor, settings=Settings(k_cons=3))
        for episode in episodes:
            result = mem.learn(episode)
            total.add(Usage.of(result.usage))
            consolidations += len(result.consolidated)
        stats = mem.stats().wire()
        mem.close()
    n = len(episodes)
    scheme = "trace extractor" if llm_spec == "none" else "ours (llm extractor)"
    return {"scheme": scheme, "episodes": n, "llm_calls": total.llm_calls,
            "calls_per_episode": round(total.llm_calls / n, 3),
            "tokens_per_episode": round(total.total_tokens / n, 1),
            "calls_saved_by_dedup": total.llm_calls_saved, "consolidations": consolidations,
            "wall_s": round(time.perf_counter() - started, 1),
            "nodes": stats["task"]["nodes"] + stats["env"]["nodes"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=8, help="distinct episodes per pass")
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--llm", default="local")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--tiny", action="store_true",
                        help="seconds, no model (the test suite): --episodes 2 --passes 1 "
                             "--llm none --embedder static")
    args = parser.parse_args()
    if args.tiny:
        args.episodes, args.passes, args.llm, args.embedder = 2, 1, "none", "static"
    episodes = stream(args.episodes, args.passes)
    ours = run_ours(episodes, args.llm, args.embedder)
    n = len(episodes)
    paper_calls = 2 * n + ours["consolidations"]
    paper = {"scheme": "paper (2 calls/episode + compilations)", "episodes": n,
             "llm_calls": paper_calls, "calls_per_episode": round(paper_calls / n, 3),
             "tokens_per_episode": None, "calls_saved_by_dedup": 0,
             "consolidations": ours["consolidations"]}
    trace = {"scheme": "trace extractor", "episodes": n, "llm_calls": 0, "calls_per_episode": 0.0,
             "tokens_per_episode": 0.0, "calls_saved_by_dedup": 0, "consolidations": None}
    rows = [paper, ours] if args.llm == "none" else [ours, paper, trace]
    print(f"{'scheme':<42} {'calls':>6} {'calls/ep':>9} {'tokens/ep':>10} {'saved':>6}")
    for r in rows:
        print(f"{r['scheme']:<42} {r['llm_calls']:>6} {r['calls_per_episode']:>9} "
              f"{str(r['tokens_per_episode']):>10} {r['calls_saved_by_dedup']:>6}")
    ratio = ours["llm_calls"] / paper_calls if paper_calls else None
    print(json.dumps({"benchmark": "write_cost", "llm": args.llm, "rows": rows,
                      "ours_vs_paper_calls": None if ratio is None else round(ratio, 3)}))


if __name__ == "__main__":
    main()
