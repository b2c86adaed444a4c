"""Summaries, paired comparisons, plots and an HTML report of a run directory.

Everything is recomputed from the episode logs (``<run>/<kind>/episodes.jsonl``), so a report can
be made for a finished, interrupted or resumed run alike. Arms are compared on the episodes they
all played (same stream, same order): the paired difference of progress (the engine's score,
0..1) with a 95% bootstrap interval, and the exact McNemar test on success. Outputs in the run
directory: ``summary.json``, ``verdict.png`` (every arm's difference against no memory),
``curve.png`` (cumulative progress over the stream), ``report.html``.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from deltamem_bench.runner import LOG_NAME, read_log
from deltamem_bench.stats import holm, mcnemar_exact, paired_bootstrap, sign_flip, wilson

BASELINE = "none"


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _usage(record: dict[str, Any], part: str, key: str) -> int:
    usage = record.get("usage", {}).get(part) or {}
    return int(usage.get(key, 0))


def _evals(records: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {int(r["index"]): r for r in records if r["phase"] == "eval"}


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
        "memory_chars_per_episode": _mean([float(r.get("memory_chars", 0)) for r in evals]),
        "agent_llm_calls_per_episode": _mean([float(c) for c in agent_calls]),
        "memory_llm_calls_total": sum(memory_calls),
        "tokens_per_episode": _mean([float(t) for t in tokens]),
        "memory_entries": int(last.get("entries", 0)),
        "memory_chars": int(last.get("chars", 0)),
        "wall_s_per_episode": _mean([float(r.get("wall_s", 0.0)) for r in evals]),
    }


def compare(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Paired comparison of arm ``a`` against arm ``b`` on the evaluation episodes both played.

    Returns None when they share no episode. Raises ValueError when the two logs hold
    different episodes at the same index (they were not run on the same stream).
    """
    ea, eb = _evals(a), _evals(b)
    shared = sorted(set(ea) & set(eb))
    if not shared:
        return None
    for i in shared:
        if ea[i]["spec"] != eb[i]["spec"]:
            raise ValueError(f"episode {i} differs between arms: {ea[i]['spec']} vs "
                             f"{eb[i]['spec']}; they did not play the same stream")
    progress = paired_bootstrap([float(ea[i]["score"] or 0) for i in shared],
                                [float(eb[i]["score"] or 0) for i in shared])
    success = paired_bootstrap([float(bool(ea[i]["success"])) for i in shared],
                               [float(bool(eb[i]["success"])) for i in shared])
    test = mcnemar_exact([bool(ea[i]["success"]) for i in shared],
                         [bool(eb[i]["success"]) for i in shared])
    exact = sign_flip([float(ea[i]["score"] or 0) for i in shared],
                      [float(eb[i]["score"] or 0) for i in shared])
    diffs = [float(ea[i]["score"] or 0) - float(eb[i]["score"] or 0) for i in shared]
    # The stream in thirds (its order): an online memory's gain should grow along the stream.
    cuts = [round(len(diffs) * k / 3) for k in range(4)]
    thirds = [round(_mean(diffs[cuts[k]:cuts[k + 1]]), 4) for k in range(3)]
    return {"episodes": len(shared), "progress": progress.to_dict(),
            "success": success.to_dict(), "mcnemar": test.to_dict(),
            "progress_by_thirds": thirds, "sign_flip": exact.to_dict()}


PRIMARY = ("deltamem", BASELINE)
# The primary tests a registration can name (``endpoints.primary.test_id``): where each one's
# p-value sits in a comparison (:func:`compare`). A registration without the key (heldout-1)
# registered the bootstrap.
PRIMARY_TESTS = {"bootstrap": "progress", "sign-flip": "sign_flip"}


def endpoints(summaries: dict[str, dict[str, Any]],
              family: Sequence[str] | None = None, *,
              primary_test: str = "bootstrap") -> dict[str, Any]:
    """The registered endpoints over a suite's entries (``{entry name: summary}``).

    Primary: DeltaMem − none on progress, the p-value of ``primary_test``
    (:data:`PRIMARY_TESTS`: the bootstrap's, or the exact sign-flip test's) Holm-adjusted;
    secondary:
    exact McNemar on success, Holm-adjusted likewise. An entry is above zero when its adjusted
    primary p is below 0.05 and its mean above 0.

    The correction runs over ``family`` (a registration's entry names) followed by any other
    entry that holds both arms; without ``family``, over those entries alone. An entry of the
    family not played yet counts with p = 1. Each played entry's adjusted p is then at least
    what it will be once every entry is played (its rank among the played entries is never
    later than among all, and the played entries above it carry the larger multipliers), so an
    interim claim of "above zero" stays true as the rest is played.
    """
    diffs = {n: s["paired"][f"vs_{BASELINE}"][PRIMARY[0]] for n, s in summaries.items()
             if PRIMARY[0] in s.get("paired", {}).get(f"vs_{BASELINE}", {})}
    if primary_test not in PRIMARY_TESTS:
        raise ValueError(f"unknown primary test {primary_test!r}; one of {sorted(PRIMARY_TESTS)}")
    names = list(family or ()) + [n for n in diffs if n not in (family or ())]
    primary = PRIMARY_TESTS[primary_test]
    missing = [n for n in diffs if primary not in diffs[n]]
    if missing:
        raise ValueError(f"the summaries of {missing} hold no {primary_test} test; re-derive "
                         "them from their logs")

    def adjusted(test: str) -> list[float]:
        return holm([float(diffs[n][test]["p_value"]) if n in diffs else 1.0 for n in names])

    rows = {}
    for n, p_adj, q_adj in zip(names, adjusted(primary), adjusted("mcnemar"), strict=True):
        if n not in diffs:
            continue
        d = diffs[n]
        rows[n] = {"episodes": d["episodes"], "progress": d["progress"],
                   "primary_p": round(float(d[primary]["p_value"]), 6),
                   "primary_p_holm": round(p_adj, 4),
                   "above_zero": bool(p_adj < 0.05 and d["progress"]["mean"] > 0),
                   "mcnemar": d["mcnemar"], "secondary_p_holm": round(q_adj, 4),
                   "progress_by_thirds": d.get("progress_by_thirds")}
    return {"contrast": f"{PRIMARY[0]} - {PRIMARY[1]}", "correction": "holm",
            "primary_test": primary_test,
            "family": names, "played": list(rows), "entries": rows}


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
    """The run's summary: config, one row per kind, and the paired comparisons.

    ``paired["vs_none"][kind]`` compares each arm with no memory, ``paired["vs_deltamem"]``
    with DeltaMem (when both arms are in the run).
    """
    config_path = run_dir / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
    runs = load_run(run_dir)
    rows = [summarize_kind(k, recs) for k, recs in runs.items()]
    paired: dict[str, dict[str, Any]] = {}
    for reference in (BASELINE, "deltamem"):
        if reference not in runs:
            continue
        against = {k: compare(recs, runs[reference]) for k, recs in runs.items()
                   if k != reference}
        paired[f"vs_{reference}"] = {k: v for k, v in against.items() if v is not None}
    return {"run": str(run_dir), "config": config, "kinds": rows, "paired": paired}


def _interval(diff: dict[str, Any] | None, key: str = "progress") -> str:
    if not diff:
        return "-"
    d = diff[key]
    return f"{d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"


def verdict(summary: dict[str, Any]) -> list[str]:
    """The comparison in words, one sentence per arm against no memory."""
    lines: list[str] = []
    for kind, diff in summary.get("paired", {}).get(f"vs_{BASELINE}", {}).items():
        p = diff["progress"]
        if p["low"] > 0:
            word = "better than"
        elif p["high"] < 0:
            word = "worse than"
        else:
            word = "not distinguishable from"
        m = diff["mcnemar"]
        lines.append(
            f"{kind} is {word} no memory on progress: {p['mean']:+.3f} "
            f"(95% CI {p['low']:+.3f} to {p['high']:+.3f}, {diff['episodes']} paired episodes); "
            f"success {diff['success']['mean']:+.2f}, won {m['a_only']} / lost {m['b_only']} "
            f"discordant episodes, McNemar p = {m['p_value']:.3f}.")
    return lines


def table(summary: dict[str, Any]) -> Table:
    """The summary as a rich table (fits 120 columns)."""
    config = summary.get("config", {})
    title = (f"{config.get('env', '?')} · {config.get('protocol', '?')} · "
             f"{config.get('llm', '?')}")
    t = Table(title=title)
    for name in ("memory", "success", "95% CI", "progress", "Δ progress vs none [95% CI]",
                 "steps", "tokens/ep", "s/ep", "stored"):
        t.add_column(name, justify="left" if name == "memory" else "right")
    vs_none = summary.get("paired", {}).get(f"vs_{BASELINE}", {})
    for row in summary["kinds"]:
        n = row["episodes"]
        t.add_row(
            row["kind"], f"{row['successes']}/{n}",
            f"{row['sr_ci95'][0]:.2f}-{row['sr_ci95'][1]:.2f}", f"{row['mean_score']:.3f}",
            _interval(vs_none.get(row["kind"])), f"{row['mean_steps']:.1f}",
            f"{row['tokens_per_episode']:.0f}", f"{row['wall_s_per_episode']:.1f}",
            str(row["memory_entries"]),
        )
    return t


def _plots(summary: dict[str, Any], runs: dict[str, list[dict[str, Any]]],
           run_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    images: list[Path] = []
    vs_none = summary.get("paired", {}).get(f"vs_{BASELINE}", {})
    if vs_none:
        kinds = list(vs_none)
        fig, ax = plt.subplots(figsize=(7, 0.5 * len(kinds) + 1.5))
        for y, kind in enumerate(kinds):
            p = vs_none[kind]["progress"]
            colour = "tab:green" if p["low"] > 0 else "tab:red" if p["high"] < 0 else "tab:gray"
            ax.errorbar(p["mean"], y, xerr=[[p["mean"] - p["low"]], [p["high"] - p["mean"]]],
                        fmt="o", color=colour, capsize=4)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_yticks(range(len(kinds)), kinds)
        ax.invert_yaxis()
        ax.set(xlabel="progress difference vs no memory (paired, 95% bootstrap CI)",
               title="Does the memory help?")
        fig.tight_layout()
        path = run_dir / "verdict.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        images.append(path)
    fig, ax = plt.subplots(figsize=(7, 4))
    for kind, records in runs.items():
        evals = [r for r in records if r["phase"] == "eval"]
        total, ys = 0.0, []
        for i, r in enumerate(evals, 1):
            total += float(r["score"] or 0.0)
            ys.append(total / i)
        ax.plot(range(1, len(ys) + 1), ys, marker=".", label=kind)
    ax.set(xlabel="evaluation episode", ylabel="mean progress so far", ylim=(-0.02, 1.02),
           title="Learning curve (cumulative mean progress)")
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    path = run_dir / "curve.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    images.append(path)
    return images


def _drilldown(runs: dict[str, list[dict[str, Any]]]) -> str:
    """Per-episode HTML: every arm's outcome, and what it recalled and did."""
    evals = {k: _evals(recs) for k, recs in runs.items()}
    indices = sorted({i for e in evals.values() for i in e})
    out = []
    for i in indices:
        spec = next(e[i]["spec"] for e in evals.values() if i in e)
        cells = []
        for kind, e in evals.items():
            r = e.get(i)
            if r is None:
                cells.append(f"<details><summary>{html.escape(kind)}: -</summary></details>")
                continue
            steps = "\n".join(f"> {s['action']}\n{s['observation'][:300]}"
                              for s in r.get("trajectory", []))
            cells.append(
                f"<details><summary>{html.escape(kind)}: "
                f"{'won' if r['success'] else 'lost'}, progress {float(r['score'] or 0):.2f}, "
                f"{r['steps']} steps</summary><h4>recalled</h4><pre>"
                f"{html.escape(r.get('memory_text') or '(nothing)')}</pre><h4>played</h4><pre>"
                f"{html.escape(steps)}</pre></details>")
        out.append(f"<h3>#{i} {html.escape(spec['task_name'])} variation {spec['variation']} "
                   f"({html.escape(spec['split'])})</h3>" + "".join(cells))
    return "".join(out)


def _html(summary: dict[str, Any], images: list[Path], runs: dict[str, list[dict[str, Any]]],
          run_dir: Path) -> str:
    vs_none = summary.get("paired", {}).get(f"vs_{BASELINE}", {})
    vs_dm = summary.get("paired", {}).get("vs_deltamem", {})
    head = ("<tr><th>memory</th><th>success</th><th>95% CI</th><th>progress</th>"
            "<th>Δ progress vs none [95% CI]</th><th>McNemar p vs none</th>"
            "<th>Δ progress vs DeltaMem</th><th>steps</th><th>tokens / episode</th>"
            "<th>seconds / episode</th><th>memory chars / episode</th><th>stored entries</th>"
            "</tr>")
    rows = ""
    for r in summary["kinds"]:
        k = r["kind"]
        p_value = f"{vs_none[k]['mcnemar']['p_value']:.3f}" if k in vs_none else "-"
        rows += (f"<tr><td>{html.escape(k)}</td><td>{r['successes']}/{r['episodes']}</td>"
                 f"<td>{r['sr_ci95'][0]:.2f}-{r['sr_ci95'][1]:.2f}</td>"
                 f"<td>{r['mean_score']:.3f}</td><td>{_interval(vs_none.get(k))}</td>"
                 f"<td>{p_value}</td><td>{_interval(vs_dm.get(k))}</td>"
                 f"<td>{r['mean_steps']:.1f}</td><td>{r['tokens_per_episode']:.0f}</td>"
                 f"<td>{r['wall_s_per_episode']:.1f}</td>"
                 f"<td>{r['memory_chars_per_episode']:.0f}</td><td>{r['memory_entries']}</td>"
                 "</tr>")
    pictures = "".join(
        f'<img alt="{p.stem}" src="data:image/png;base64,'
        f'{base64.b64encode(p.read_bytes()).decode()}">' for p in images)
    words = "".join(f"<li>{html.escape(line)}</li>" for line in verdict(summary))
    trees = sorted(str(p.relative_to(run_dir)) for p in run_dir.glob("**/tree.html"))
    links = "".join(f'<li><a href="{html.escape(t)}">{html.escape(t)}</a></li>' for t in trees)
    config = html.escape(json.dumps(summary.get("config", {}), indent=2, default=str))
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>deltamem bench</title>"
        "<style>body{font-family:sans-serif;margin:2em;max-width:1200px}"
        "table{border-collapse:collapse;font-size:90%}td,th{border:1px solid #ccc;"
        "padding:4px 6px;text-align:right}td:first-child{text-align:left}img{max-width:49%}"
        "pre{white-space:pre-wrap;background:#f6f6f6;padding:6px}</style></head><body>"
        "<h1>deltamem bench</h1><h2>Verdict</h2>"
        f"<ul>{words or '<li>no paired comparison (run the none arm too)</li>'}</ul>"
        f"{pictures}<h2>Arms</h2><table>{head}{rows}</table>"
        "<p>Progress is the engine's score (0-1). Δ: paired difference of the arm minus the "
        "reference over the episodes both played, with a 95% percentile-bootstrap interval "
        "(10,000 resamples); McNemar: exact two-sided test on paired success. Success "
        "intervals are Wilson 95%. Tokens per episode include the memory's own model calls.</p>"
        + (f"<h2>Tree viewer</h2><ul>{links}</ul>" if links else "")
        + f"<h2>Configuration</h2><pre>{config}</pre>"
        f"<h2>Episodes</h2>{_drilldown(runs)}</body></html>"
    )


def write_report(run_dir: Path) -> dict[str, Any]:
    """Write ``summary.json``, the PNG plots and ``report.html``; return the summary."""
    summary = summarize(run_dir)
    runs = load_run(run_dir)
    images = _plots(summary, runs, run_dir)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    (run_dir / "report.html").write_text(_html(summary, images, runs, run_dir),
                                         encoding="utf-8")
    return summary
