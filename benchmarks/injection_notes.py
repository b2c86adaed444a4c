"""Instruction-like text in recalled notes: how much of a set of injection strings the quoting
rule (``deltamem.core.render.quote_text``) neutralises, and how many ordinary notes it changes.

The labelled set, split into dev and test before the rule was written (by a hash of each
text, :func:`split_of`, so the split never depends on the rule):

* **injection** (``benchmarks/injection/injections.txt``): hand-written strings of the shapes
  reported against agent memories -- override imperatives, chat-role markers, chat-template
  control tokens, tool-call markup and tool-call JSON, fake ends of data, other languages and
  obfuscations (which a structural rule is not expected to catch: they measure its limit);
* **ordinary**: hand-written hard negatives that use the same words harmlessly
  (``benchmarks/injection/hard_negatives.txt``: "ignore the flaky test", ``List<String>``,
  a ``{"name": ...}`` config), plus what notes are made of in the repository's own fixtures:
  ScienceWorld actions and observations, and the commands, tool outputs and replies of the
  recorded coding sessions (``benchmarks/coding_sessions``).

    python benchmarks/injection_notes.py [--show]

Prints a table (neutralised share of injections, changed share of ordinary notes, per split)
and one JSON object; ``--show`` lists what the rule missed and what it changed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ORDINARY_PER_SOURCE = 300


def split_of(text: str) -> str:
    """``dev`` or ``test``, from a hash of the text (fixed before any rule existed)."""
    return "dev" if hashlib.blake2b(text.encode("utf-8", "surrogatepass"),
                                     digest_size=8).digest()[0] % 2 == 0 else "test"


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _scienceworld() -> list[str]:
    out: list[str] = []
    for line in (ROOT / "tests" / "fixtures" / "scienceworld_gold.jsonl").read_text().splitlines():
        episode = json.loads(line)
        for step in episode.get("steps", []):
            out.append(str(step.get("action", "")))
            out += str(step.get("observation", "")).splitlines()[:3]
    return out


def _coding_sessions() -> list[str]:
    out: list[str] = []
    for path in sorted((ROOT / "benchmarks" / "coding_sessions").rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            out += _texts(record)
    return out


def _texts(value: Any) -> list[str]:
    """Commands, outputs and replies inside a transcript record (first lines of each)."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("command", "text", "content", "output", "cmd") and isinstance(item, str):
                found += item.splitlines()[:4]
            else:
                found += _texts(item)
    elif isinstance(value, list):
        for item in value:
            found += _texts(item)
    return found


def dataset() -> list[dict[str, str]]:
    """Every labelled text with its label and split (ordinary fixtures sampled, seeded)."""
    rng = random.Random(45)
    items = [{"text": t, "label": "injection"} for t in _lines(HERE / "injection" /
                                                               "injections.txt")]
    items += [{"text": t, "label": "ordinary"} for t in _lines(HERE / "injection" /
                                                              "hard_negatives.txt")]
    for source in (_scienceworld(), _coding_sessions()):
        pool = sorted({t.strip() for t in source if len(t.strip()) > 3})
        items += [{"text": t, "label": "ordinary"}
                  for t in rng.sample(pool, min(ORDINARY_PER_SOURCE, len(pool)))]
    for item in items:
        item["split"] = split_of(item["text"])
    return items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--show", action="store_true", help="list misses and changed notes")
    args = parser.parse_args(argv)
    from deltamem.core.render import quote_text

    rows: dict[str, dict[str, int]] = {}
    misses: list[str] = []
    changed: list[str] = []
    for item in dataset():
        hit = quote_text(item["text"]) != item["text"]
        row = rows.setdefault(item["split"], {"injection": 0, "neutralised": 0, "ordinary": 0,
                                              "changed": 0})
        row[item["label"]] += 1
        if item["label"] == "injection":
            row["neutralised"] += hit
            if not hit:
                misses.append(f"[{item['split']}] {item['text']}")
        else:
            row["changed"] += hit
            if hit:
                changed.append(f"[{item['split']}] {item['text']}")
    print("| split | injections | neutralised | rate | ordinary notes | changed | rate |")
    print("|---|---|---|---|---|---|---|")
    report: dict[str, Any] = {"benchmark": "injection_notes", "splits": {}}
    for split in ("dev", "test"):
        r = rows.get(split, {"injection": 0, "neutralised": 0, "ordinary": 0, "changed": 0})
        hit_rate = r["neutralised"] / max(1, r["injection"])
        fp_rate = r["changed"] / max(1, r["ordinary"])
        print(f"| {split} | {r['injection']} | {r['neutralised']} | {hit_rate:.3f} | "
              f"{r['ordinary']} | {r['changed']} | {fp_rate:.3f} |")
        report["splits"][split] = {**r, "neutralised_rate": round(hit_rate, 3),
                                   "changed_rate": round(fp_rate, 3)}
    if args.show:
        print("\nmissed:", *misses, sep="\n  ")
        print("\nchanged:", *changed, sep="\n  ")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
