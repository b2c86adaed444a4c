"""Summaries, plots and an HTML report of a run directory written by the runner.

Everything is recomputed from the episode logs (``<run>/<kind>/episodes.jsonl``), so a report can
be made for a finished, interrupted or resumed run alike. Outputs in the run directory:
``summary.json``, ``success.png``, ``memory.png`` and ``report.html`` (PNG images inlined as
base64; a link to ``tree.html`` when the run directory holds one).
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from deltamem.harness.runner import LOG_NAME, read_log


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95% for z=1.96); (0, 0) for n=0."""
    if n == 0:
        return 0.0, 0.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _usage(record: dict[str, Any], part: str, key: str) -> int:
    usage = record.get("usage", {}).get(part) or {}
    return int(usage.get(key, 0))


def summarize_kind(kind: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary row of one memory kind from its log records."""
    evals = [r for r in records if r["phase"] == "eval"]
    n = len(evals)
    wins = sum(bool(r["success"]) for r in evals)
    low, high = wilson(wins, n)
    last = records[-1]["memory_size"] if records else {"entries": 0, "chars": 0}
    agent_calls = [_usage(r, "agent", "llm_calls") for r in evals]
    memory_calls = [_usage(r, "memory", "llm_calls") for r in records]
    tokens = [_usage(r, "agent", "total_tokens") + _usage(r, "memory", "total_tokens")
              for r in evals]
    return {
        "kind": kind,
        "episodes": n,
        "successes": wins,
        "success_rate": wins / n if n else 0.0,
        "sr_ci95": [round(low, 4), round(high, 4)],
        "mean_score": _mean([float(r["score"] or 0.0) for r in evals]),
        "mean_steps": _mean([float(r["steps"]) for r in evals]),
        "invalid_per_episode": _mean([float(r.get("invalid", 0)) for r in evals]),
        "recall_rate": _mean([float(r.get("memory_chars", 0) > 0) for r in evals]),
        "agent_llm_calls_per_episode": _mean([float(c) for c in agent_calls]),
        "memory_llm_calls_total": sum(memory_calls),
        "tokens_per_episode": _mean([float(t) for t in tokens]),
        "memory_entries": int(last.get("entries", 0)),
        "memory_chars": int(last.get("chars", 0)),
        "wall_s_per_episode": _mean([float(r.get("wall_s", 0.0)) for r in evals]),
    }


def load_run(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Each kind's log records, in the order of ``config.json`` (else alphabetical)."""
    config = run_dir / "config.json"
    kinds: list[str] = []
    if config.exists():
        kinds = list(json.loads(config.read_text(encoding="utf-8")).get("kinds", []))
    found = sorted(p.parent.name for p in run_dir.glob(f"*/{LOG_NAME}"))
    ordered = [k for k in kinds if k in found] + [k for k in found if k not in kinds]
    return {k: read_log(run_dir / k / LOG_NAME) for k in ordered}


def summarize(run_dir: Path) -> dict[str, Any]:
    """The run's summary: its config and one row per memory kind."""
    config_path = run_dir / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
    rows = [summarize_kind(k, recs) for k, recs in load_run(run_dir).items()]
    return {"run": str(run_dir), "config": config, "kinds": rows}


def table(summary: dict[str, Any]) -> Table:
    """The summary as a rich table."""
    config = summary.get("config", {})
    title = (f"{config.get('env', '?')} · {config.get('protocol', '?')} · "
             f"{config.get('llm', '?')}")
    t = Table(title=title)
    for name in ("memory", "SR", "95% CI", "score", "steps", "invalid/ep", "recalled",
                 "LLM calls/ep", "tokens/ep", "entries", "chars"):
        t.add_column(name, justify="left" if name == "memory" else "right")
    for row in summary["kinds"]:
        n = row["episodes"]
        calls = row["agent_llm_calls_per_episode"] + (row["memory_llm_calls_total"] / n
                                                      if n else 0.0)
        t.add_row(
            row["kind"], f"{row['successes']}/{n} ({row['success_rate']:.0%})",
            f"{row['sr_ci95'][0]:.2f}-{row['sr_ci95'][1]:.2f}", f"{row['mean_score']:.2f}",
            f"{row['mean_steps']:.1f}", f"{row['invalid_per_episode']:.1f}",
            f"{row['recall_rate']:.0%}", f"{calls:.1f}", f"{row['tokens_per_episode']:.0f}",
            str(row["memory_entries"]), str(row["memory_chars"]),
        )
    return t


def _plots(runs: dict[str, list[dict[str, Any]]], run_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for kind, records in runs.items():
        evals = [r for r in records if r["phase"] == "eval"]
        wins = 0
        ys = []
        for i, r in enumerate(evals, 1):
            wins += bool(r["success"])
            ys.append(wins / i)
        ax.plot(range(1, len(ys) + 1), ys, marker="o", label=kind)
    ax.set(xlabel="evaluation episode", ylabel="cumulative success rate", ylim=(-0.02, 1.02),
           title="Success over episodes")
    ax.legend(loc="best", fontsize="small")
    success = run_dir / "success.png"
    fig.tight_layout()
    fig.savefig(success, dpi=100)
    plt.close(fig)

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for kind, records in runs.items():
        xs = list(range(1, len(records) + 1))
        left.plot(xs, [r["memory_size"]["entries"] for r in records], label=kind)
        right.plot(xs, [r["memory_size"]["chars"] for r in records], label=kind)
    left.set(xlabel="episode (train then eval)", ylabel="entries / nodes",
             title="Memory size")
    right.set(xlabel="episode (train then eval)", ylabel="stored characters",
              title="Memory characters")
    left.legend(loc="best", fontsize="small")
    memory = run_dir / "memory.png"
    fig.tight_layout()
    fig.savefig(memory, dpi=100)
    plt.close(fig)
    return [success, memory]


def _html(summary: dict[str, Any], images: list[Path], run_dir: Path) -> str:
    keys = ("kind", "episodes", "successes", "success_rate", "sr_ci95", "mean_score",
            "mean_steps", "invalid_per_episode", "recall_rate", "agent_llm_calls_per_episode",
            "memory_llm_calls_total", "tokens_per_episode", "memory_entries", "memory_chars")

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.3f}"
        if isinstance(value, list):
            return "-".join(f"{v:.2f}" for v in value)
        return html.escape(str(value))

    head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)
    rows = "".join("<tr>" + "".join(f"<td>{cell(r[k])}</td>" for k in keys) + "</tr>"
                   for r in summary["kinds"])
    pictures = "".join(
        f'<img alt="{p.stem}" src="data:image/png;base64,'
        f'{base64.b64encode(p.read_bytes()).decode()}">' for p in images)
    trees = sorted(str(p.relative_to(run_dir)) for p in run_dir.glob("**/tree.html"))
    links = "".join(f'<li><a href="{html.escape(t)}">{html.escape(t)}</a></li>' for t in trees)
    config = html.escape(json.dumps(summary.get("config", {}), indent=2, default=str))
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>deltamem bench</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}img{max-width:48%}"
        "</style></head><body><h1>deltamem bench</h1>"
        f"<table><tr>{head}</tr>{rows}</table>"
        "<p>SR: success rate with a 95% Wilson interval; tokens per episode include the "
        "memory's own model calls.</p>"
        f"{pictures}"
        + (f"<h2>Tree viewer</h2><ul>{links}</ul>" if links else "")
        + f"<h2>Config</h2><pre>{config}</pre></body></html>"
    )


def write_report(run_dir: Path) -> dict[str, Any]:
    """Write ``summary.json``, the PNG plots and ``report.html``; return the summary."""
    summary = summarize(run_dir)
    images = _plots(load_run(run_dir), run_dir)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    (run_dir / "report.html").write_text(_html(summary, images, run_dir), encoding="utf-8")
    return summary
