"""The writer check over committed run archives: per run and per model-written arm (AWM,
ReasoningBank, DeltaMem-LLM), the share of shown memory items that are well-formed items of
their schema (:mod:`deltamem_bench.writer`). No model runs; the logs are read as archived.

Usage:
    .venv/bin/python benchmarks/writer_check.py                 # results/dev-2 and heldout-1
    .venv/bin/python benchmarks/writer_check.py results/heldout-1/alfworld-warm.tar.gz --json
"""

from __future__ import annotations

import argparse
import json
import tarfile
from pathlib import Path
from typing import Any

from deltamem_bench.writer import WRITERS, writer_report

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ("results/dev-2", "results/heldout-1")


def logs(archive: Path) -> dict[str, list[dict[str, Any]]]:
    """Each writer arm's log records in a run archive."""
    found: dict[str, list[dict[str, Any]]] = {}
    with tarfile.open(archive, "r:gz") as tar:
        for writer in WRITERS:
            try:
                member = tar.extractfile(f"{writer}/episodes.jsonl")
            except KeyError:
                continue
            if member is not None:
                found[writer] = [json.loads(line) for line in
                                 member.read().decode("utf-8").splitlines() if line.strip()]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path,
                        help="archives or folders of archives (default: results/dev-2 and "
                        "results/heldout-1)")
    parser.add_argument("--json", action="store_true", help="also print the rows as JSON")
    args = parser.parse_args(argv)
    archives: list[Path] = []
    for path in args.paths or [ROOT / p for p in DEFAULT]:
        archives += sorted(path.glob("*.tar.gz")) if path.is_dir() else [path]
    rows = []
    for archive in archives:
        for writer, records in logs(archive).items():
            rows.append({"run": f"{archive.parent.name}/{archive.name.removesuffix('.tar.gz')}",
                         **writer_report(records, writer)})
    print("| run | arm | items shown | well-formed (shown) | distinct | well-formed (distinct) "
          "| problems (distinct) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        share = "-" if r["share_shown"] is None else f"{r['share_shown']:.2f}"
        dshare = "-" if r["share_distinct"] is None else f"{r['share_distinct']:.2f}"
        problems = ", ".join(f"{k} {v}" for k, v in r["problems_distinct"].items()) or "-"
        print(f"| {r['run']} | {r['writer']} | {r['items_shown']} | {r['well_formed_shown']} "
              f"({share}) | {r['distinct_items']} | {r['well_formed_distinct']} ({dshare}) | "
              f"{problems} |")
    if not rows:
        print("(no archive holds a model-written arm: dev-2 plays none and deltamem only)")
    if args.json:
        print(json.dumps({"rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
