"""Re-derive every table and plot of the registered runs from their committed artifacts.

No episode is played: each ``results/<registration>/<entry>.tar.gz`` (written by
``benchmarks/agent_success.py --registration``) is unpacked, its summary recomputed from the
episode logs (``deltamem_bench.report.summarize``: paired bootstrap, exact McNemar, thirds of
the stream), compared with the summary stored at run time, and its plots and report written
again; then the registered endpoints are judged over the entries (DeltaMem − none on progress,
Holm-adjusted; McNemar on success, Holm-adjusted). The correction runs over the registered
family, every entry of the registration: an entry not played yet counts with p = 1
(:func:`deltamem_bench.report.endpoints`), so an interim claim can only gain support as the
rest is played.

Usage:
    .venv/bin/python benchmarks/rederive.py                      # every registration in results/
    .venv/bin/python benchmarks/rederive.py results/heldout-1    # one registration
    .venv/bin/python benchmarks/rederive.py --out runs/rederived --json
    .venv/bin/python benchmarks/rederive.py --write docs/results.md
    .venv/bin/python benchmarks/rederive.py results/heldout-1 --test sign-flip   # descriptive

``--write`` replaces, in a markdown file, the text between ``<!-- rederive NAME -->`` and
``<!-- /rederive NAME -->`` with what this script prints for registration NAME, so a document
quotes the re-derivation verbatim; it writes nothing when an archive differs from its summary.
``--test`` judges by another primary test than the registered one (``sign-flip``: the exact
paired test): a descriptive re-reading, never written into a document (``--write`` refuses it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from deltamem.errors import DeltaMemError
from deltamem_bench.artifacts import unpack
from deltamem_bench.registration import (
    REGISTRATION_NAME,
    family_of,
    load_registration,
    primary_test_of,
)
from deltamem_bench.report import PRIMARY_TESTS, _interval, endpoints, write_report


def _strip(summary: dict[str, Any], keys: dict[str, Any] | None = None) -> dict[str, Any]:
    """What must agree between the stored and the re-derived summary (not the run's path).

    With ``keys`` (the stored summary), each paired comparison keeps only the statistics the
    stored one holds: a statistic added after the run (the exact sign-flip test after
    heldout-1) is new, not a difference.
    """
    kinds = [{k: v for k, v in row.items() if k != "wall_s_per_episode"}
             for row in summary.get("kinds", [])]
    paired = summary.get("paired", {})
    if keys is not None:
        stored = keys.get("paired", {})
        paired = {ref: {arm: {k: v for k, v in diff.items()
                              if k in stored.get(ref, {}).get(arm, diff)}
                        for arm, diff in arms.items()}
                  for ref, arms in paired.items()}
    return {"kinds": kinds, "paired": paired}


def rederive(folder: Path, out: Path, test: str | None = None) -> dict[str, Any]:
    """Re-derive one registration folder into ``out/<name>``; return its report (judged by
    ``test``, default the registered primary test)."""
    registration = load_registration(folder / REGISTRATION_NAME)
    summaries: dict[str, dict[str, Any]] = {}
    checks: dict[str, str] = {}
    for entry in registration["entries"]:
        archive = folder / f"{entry['name']}.tar.gz"
        if not archive.exists():
            checks[entry["name"]] = "not played yet (no archive)"
            continue
        run_dir = out / registration["name"] / entry["name"]
        with tempfile.TemporaryDirectory() as tmp:
            unpack(archive, Path(tmp))
            stored_path = Path(tmp) / "summary.json"
            stored = json.loads(stored_path.read_text(encoding="utf-8")) \
                if stored_path.exists() else None
            config = json.loads((Path(tmp) / "config.json").read_text(encoding="utf-8"))
            run_dir.mkdir(parents=True, exist_ok=True)
            unpack(archive, run_dir)
        played = (config.get("registration") or {}).get("name")
        if played != registration["name"]:
            checks[entry["name"]] = f"archive was played for registration {played!r}"
            continue
        summary = write_report(run_dir)
        summaries[entry["name"]] = summary
        if stored is None:
            checks[entry["name"]] = "re-derived (no stored summary to compare)"
        elif _strip(stored) == _strip(summary, stored):
            checks[entry["name"]] = "re-derived identically"
        else:
            checks[entry["name"]] = "DIFFERS from the stored summary"
    judged = endpoints(summaries, family=family_of(registration),
                       primary_test=test or primary_test_of(registration))
    report = {"registration": registration["name"], "checks": checks, "endpoints": judged,
              "arms": {name: arm_rows(summary) for name, summary in summaries.items()}}
    target = out / registration["name"] / "endpoints.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report


def arm_rows(summary: dict[str, Any]) -> list[dict[str, str]]:
    """One row per arm of an entry: progress, success, and the paired differences against
    no memory and against DeltaMem (descriptive, unadjusted)."""
    paired = summary.get("paired", {})
    rows = []
    for row in summary["kinds"]:
        kind = row["kind"]
        vs_none = paired.get("vs_none", {}).get(kind)
        rows.append({
            "arm": kind, "progress": f"{row['mean_score']:.3f}",
            "arm − none": _interval(vs_none),
            "success": f"{row['successes']}/{row['episodes']}",
            "McNemar p vs none": f"{vs_none['mcnemar']['p_value']:.3f}" if vs_none else "-",
            "arm − deltamem": _interval(paired.get("vs_deltamem", {}).get(kind)),
        })
    return rows


def markdown(report: dict[str, Any]) -> str:
    """The endpoints table docs/results.md leads with, then every entry's arm table."""
    judged = report["endpoints"]
    # Why only for the exact test: heldout-1's quoted block must stay as it was.
    test = " (exact sign-flip test)" if judged.get("primary_test") == "sign-flip" else ""
    lines = [f"Registration `{report['registration']}`: DeltaMem − none{test}, Holm over the "
             f"{len(judged['family'])} registered entries ({len(judged['played'])} played; an "
             "entry not played counts with p = 1)", "",
             "| entry | episodes | DeltaMem − none on progress [95% CI] | Holm p | above zero? "
             "| McNemar (wins/losses, Holm p) | by thirds |", "|---|---|---|---|---|---|---|"]
    for name, row in judged["entries"].items():
        p, m = row["progress"], row["mcnemar"]
        thirds = ", ".join(f"{t:+.3f}" for t in row.get("progress_by_thirds") or [])
        lines.append(f"| {name} | {row['episodes']} | {p['mean']:+.3f} [{p['low']:+.3f}, "
                     f"{p['high']:+.3f}] | {row['primary_p_holm']:.4f} | "
                     f"{'yes' if row['above_zero'] else 'no'} | {m['a_only']}/{m['b_only']}, "
                     f"{row['secondary_p_holm']:.4f} | {thirds} |")
    for name, rows in report.get("arms", {}).items():
        heads = list(rows[0]) if rows else []
        lines += ["", f"{name}, every arm (differences: 95% paired bootstrap, unadjusted):", "",
                  "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        lines += ["| " + " | ".join(r[h] for h in heads) + " |" for r in rows]
    return "\n".join(lines)


def block(report: dict[str, Any]) -> str:
    """What is printed for one registration: :func:`markdown`, then each entry's check."""
    checks = [f"* `{name}`: {check}" for name, check in report["checks"].items()]
    return "\n".join([markdown(report), "", *checks])


def write_blocks(path: Path, reports: list[dict[str, Any]]) -> None:
    """Replace each report's ``<!-- rederive NAME -->`` block in the markdown file ``path``.

    Raises ValueError, before anything is written, when a registration has no block there.
    """
    text = path.read_text(encoding="utf-8")
    for report in reports:
        name = re.escape(report["registration"])
        pattern = re.compile(rf"(<!-- rederive {name} -->\n).*?(\n<!-- /rederive {name} -->)",
                             re.DOTALL)
        found = pattern.search(text)
        if found is None:
            raise ValueError(f"{path} has no '<!-- rederive {report['registration']} -->' "
                             "block closed by its '<!-- /rederive ... -->' line")
        text = (text[:found.end(1)] + "\n" + block(report) + "\n"
                + text[found.start(2):])
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path,
                        help="registration folders (default: every one under results/)")
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--out", type=Path, default=Path("runs/rederived"))
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")
    parser.add_argument("--write", type=Path, metavar="MARKDOWN",
                        help="replace each registration's marked block in this file")
    parser.add_argument("--test", choices=sorted(PRIMARY_TESTS),
                        help="judge by this primary test instead of the registered one "
                        "(descriptive; not with --write)")
    args = parser.parse_args(argv)
    if args.test and args.write:
        parser.error("--test re-reads a registration by another test; it is never written "
                     "into a document (drop --write)")
    folders = args.folders or sorted(p.parent for p in args.results.glob(
        f"*/{REGISTRATION_NAME}"))
    reports = []
    try:
        for folder in folders:
            reports.append(rederive(folder, args.out, args.test))
    except DeltaMemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    bad = any("DIFFERS" in c for r in reports for c in r["checks"].values())
    if args.write is not None and bad:
        print(f"error: {args.write} left as it was: an archive differs from its stored summary",
              file=sys.stderr)
    elif args.write is not None:
        try:
            write_blocks(args.write, reports)
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(reports, indent=2))
    else:
        for report in reports:
            print(block(report), end="\n\n")
    if not reports:
        print(f"no registration under {args.results}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
