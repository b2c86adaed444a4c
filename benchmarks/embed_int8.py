"""The quantised MiniLM embedder (``minilm:int8``) against the float model, in one run.

* **Speed** of what a first-time recall embeds: one call with a task goal and a scene
  description (two texts, never seen before, so no cache helps), ``minilm`` on ONNX Runtime and
  ``minilm:int8`` interleaved call by call (ABBA order), p50/p95 per call.
* **Agreement**: cosine between the two models' vectors of the same texts, and how often a
  text's nearest neighbour among the others is the same for both.
* **Retrieval quality** on labelled training episodes (``deltamem.engine.calibrate``, the same
  procedure as ``deltamem calibrate``): each embedder's recommended thresholds and its top-1
  precision / recall / F-beta there, and the int8 model's figures at the float model's
  thresholds. Default: the train split of ``tests/fixtures/scienceworld_gold_12x10.jsonl.gz``
  (12 ScienceWorld tasks x 8 training variations; its held-out episodes are not read).

Prints a table and JSON. ``--calls`` sets the number of timed calls per embedder.

    python benchmarks/embed_int8.py [--calls 300] [--out FILE]
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from deltamem.core.model import Episode  # noqa: E402
from deltamem.embed import MiniLMEmbedder  # noqa: E402
from deltamem.engine.calibrate import calibrate_episodes  # noqa: E402
from deltamem.formats.episodes import episode_from_dict  # noqa: E402
from embed import sentences  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "tests/fixtures/scienceworld_gold_12x10.jsonl.gz"


def train_episodes(path: Path) -> list[Episode]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [episode_from_dict(r) for r in rows if r.get("meta", {}).get("split") == "train"]


def p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1)))]


def timing(embedders: dict[str, MiniLMEmbedder], calls: int) -> dict[str, list[float]]:
    texts = sentences(4 * calls + 8, seed=11)
    for e in embedders.values():  # load, build and warm up outside the timed calls
        e.embed(texts[-8:-6])
    times: dict[str, list[float]] = {name: [] for name in embedders}
    names = list(embedders)
    for i in range(calls):
        order = names if i % 2 == 0 else names[::-1]
        for j, name in enumerate(order):
            pair = texts[4 * i + 2 * j: 4 * i + 2 * j + 2]  # unseen texts for every call
            t0 = time.perf_counter()
            embedders[name].embed(pair)
            times[name].append((time.perf_counter() - t0) * 1000)
    return times


def agreement(a: MiniLMEmbedder, b: MiniLMEmbedder, n: int) -> dict[str, float]:
    texts = sentences(n, seed=3)
    va, vb = a.embed(texts), b.embed(texts)
    cos = np.sum(va * vb, axis=1)
    sa, sb = va @ va.T, vb @ vb.T
    np.fill_diagonal(sa, -2.0)
    np.fill_diagonal(sb, -2.0)
    same_top1 = float(np.mean(sa.argmax(axis=1) == sb.argmax(axis=1)))
    return {"texts": n, "cos_min": float(cos.min()), "cos_mean": float(cos.mean()),
            "same_nearest_neighbour": same_top1}


def quality(embedder: MiniLMEmbedder, episodes: list[Episode],
            at: tuple[float, float] | None = None) -> dict[str, Any]:
    """Calibration figures; with ``at``, the curve's point at those (task, env) thresholds."""
    result = calibrate_episodes(episodes, embedder,
                                task_group=lambda e: e.meta.get("task_name"),
                                env_group=lambda e: e.env.split(".")[0], beta=2.0)
    out: dict[str, Any] = {}
    for tree, cal in (("task", result.task), ("env", result.env)):
        if cal is None:
            continue
        tau = cal.tau if at is None else (at[0] if tree == "task" else at[1])
        point = min(cal.top1_curve, key=lambda c: abs(c.tau - tau))
        out[tree] = {"tau": round(tau, 2), "precision": point.precision,
                     "recall": point.recall, "f_beta": point.f1}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--agreement", type=int, default=600)
    parser.add_argument("--episodes", type=Path, default=FIXTURE)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    float_e = MiniLMEmbedder(runtime="onnx")
    int8_e = MiniLMEmbedder(runtime="int8", cache=args.cache_dir)
    t0 = time.perf_counter()
    int8_e.embed(["build the quantised model if it is not cached yet"])
    first_use = time.perf_counter() - t0
    times = timing({"minilm": float_e, "minilm-int8": int8_e}, args.calls)
    speed = {name: {"p50_ms": statistics.median(t), "p95_ms": p(t, 0.95)}
             for name, t in times.items()}
    ratio = speed["minilm"]["p50_ms"] / speed["minilm-int8"]["p50_ms"]
    agree = agreement(float_e, int8_e, args.agreement)
    episodes = train_episodes(args.episodes)
    q_float = quality(float_e, episodes)
    q_int8 = quality(int8_e, episodes)
    at_float = quality(int8_e, episodes, (q_float["task"]["tau"], q_float["env"]["tau"]))

    print(f"{'embedder':<12} {'recall embed p50':>17} {'p95':>8} {'x minilm':>9}   "
          f"{'tau task':>8} {'F2 task':>8} {'tau env':>8} {'F2 env':>7}")
    for name, q in (("minilm", q_float), ("minilm-int8", q_int8)):
        s = speed[name]
        print(f"{name:<12} {s['p50_ms']:>15.2f}ms {s['p95_ms']:>6.2f}ms "
              f"{speed['minilm']['p50_ms'] / s['p50_ms']:>8.2f}x   {q['task']['tau']:>8.2f} "
              f"{q['task']['f_beta']:>8.3f} {q['env']['tau']:>8.2f} {q['env']['f_beta']:>7.3f}")
    print(f"int8 at minilm's thresholds: F2 task {at_float['task']['f_beta']:.3f}, env "
          f"{at_float['env']['f_beta']:.3f}; vectors: cos min {agree['cos_min']:.4f}, mean "
          f"{agree['cos_mean']:.4f}, same nearest neighbour {agree['same_nearest_neighbour']:.3f};"
          f" first use (build or load) {first_use:.1f} s")
    report = {"benchmark": "embed_int8", "machine": platform.processor() or platform.machine(),
              "python": platform.python_version(), "calls": args.calls, "speed": speed,
              "speedup_p50": ratio, "agreement": agree, "train_episodes": len(episodes),
              "quality": {"minilm": q_float, "minilm-int8": q_int8,
                          "minilm-int8_at_minilm_tau": at_float},
              "first_use_s": first_use}
    print(json.dumps(report))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
