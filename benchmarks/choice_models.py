"""How fast each local model drives the choice agent: SmolLM2-135M-Instruct (the default) and
Gemma-3-270M (base), measured in the same run on the same prompts.

One episode-like sequence per model: a first step (system turn, memory block, task, observation:
the whole prompt is evaluated) and then ``--steps`` steps that each append an action and an
observation (only the new tokens are evaluated; the KV cache keeps the rest), each step
ranking 15 candidate actions. Prints a table and JSON: seconds per step (first and later),
evaluated tokens per second, and how often both models put the same candidate first.

Usage:
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/choice_models.py --steps 8
Gemma needs ``pip install 'deltamem-bench[gemma]'`` (the row is skipped, with the reason,
without it).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from deltamem.errors import ConfigError
from deltamem_bench.models import GEMMA, resolve_model
from deltamem_bench.scorer import LlamaScorer

SYSTEM = ("<|im_start|>system\nYou are an agent in a text game. Each turn, choose exactly one "
          "action from the list of valid actions and answer 'Action: <action>'.<|im_end|>\n")
MEMORY = ("# Skill memory (procedural)\nWhen: Your task is to pick up objects, then place them in "
          "their usual locations in the environment.\n1. look around\n2. take toilet paper\n"
          "3. put toilet paper in toilet roll holder\n4. open trash can\n"
          "5. put wastepaper in trash can\n# Scene knowledge (declarative)\n"
          "- In the bathroom: a dressing table; a sink; a toilet roll holder; a towel rack; a "
          "bath tub; a shower; a trash can (closed); a bathroom cabinet (closed)\n"
          "- put hair brush in bathroom cabinet in the bathroom: You put the hair brush in the "
          "bathroom cabinet.\n")
SCENE = ("You are in the bathroom. In one part of the room you see a dressing table, that has "
         "nothing on it. There is also a sink, that has nothing on it. You also see a toilet "
         "roll holder. In another part of the room you see a trash can that is closed. There is "
         "also a bathroom cabinet that is closed. You also see a hair brush and a lip gloss.")
OBJECTS = ["hair brush", "lip gloss", "toilet paper", "eyeliner", "wastepaper"]
PLACES = ["bathroom cabinet", "trash can", "dressing table", "sink", "toilet roll holder"]


def candidates(step: int) -> list[str]:
    objects = OBJECTS[step % 5:] + OBJECTS[:step % 5]
    return (["look around", "inventory", *(f"take {o}" for o in objects[:3])]
            + [f"put {o} in {p}" for o in objects[:2] for p in PLACES])[:15]


def episode(scorer: LlamaScorer, steps: int) -> dict[str, Any]:
    prompt = (f"{SYSTEM}<|im_start|>user\n{MEMORY}Task: put things away.\nObservation: "
              f"{SCENE}")
    times: list[float] = []
    firsts: list[str] = []
    for step in range(steps + 1):
        options = candidates(step)
        text = (prompt + f"\nValid actions: {', '.join(options)}<|im_end|>\n"
                "<|im_start|>assistant\nAction:")
        started = time.perf_counter()
        scores = scorer.score(text, [" " + o for o in options])
        times.append(time.perf_counter() - started)
        best = options[max(range(len(options)), key=scores.__getitem__)]
        firsts.append(best)
        prompt += (f"<|im_end|>\n<|im_start|>assistant\nAction: {best}<|im_end|>\n"
                   f"<|im_start|>user\nObservation: You {best} (step {step}).")
    later = times[1:] or times
    return {"first_step_s": round(times[0], 3), "later_step_s": round(sum(later) / len(later), 3),
            "tokens_per_s": round(scorer.stats.tokens_per_s, 1),
            "tokens_cached": scorer.stats.cached_tokens, "chosen": firsts}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    rows: dict[str, dict[str, Any]] = {}
    for name in ("smollm2-135m", GEMMA):
        try:
            path = resolve_model(GEMMA) if name == GEMMA else None
        except ConfigError as exc:
            rows[name] = {"skipped": str(exc)}
            continue
        scorer = LlamaScorer(path, n_ctx=4096, n_threads=args.threads)
        try:
            rows[name] = episode(scorer, args.steps)
        finally:
            scorer.close()
    table = Table(title=f"Choice scorer per model ({args.steps + 1} steps, 15 candidates each, "
                        f"{args.threads} thread(s))")
    for column in ("model", "first step s", "later step s", "tokens/s", "tokens reused"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for name, row in rows.items():
        if "skipped" in row:
            table.add_row(name, "skipped", row["skipped"], "", "")
        else:
            table.add_row(name, f"{row['first_step_s']:.2f}", f"{row['later_step_s']:.2f}",
                          f"{row['tokens_per_s']:.0f}", str(row["tokens_cached"]))
    Console(width=120).print(table)
    chosen = [r["chosen"] for r in rows.values() if "chosen" in r]
    agree = (sum(a == b for a, b in zip(*chosen, strict=True)) / len(chosen[0])
             if len(chosen) == 2 else None)
    print(json.dumps({"steps": args.steps + 1, "threads": args.threads, "models": rows,
                      "same_first_choice": agree}, indent=2))


if __name__ == "__main__":
    main()
