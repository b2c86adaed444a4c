"""Turn ``prompts.txt`` (``label | stack | prompt``, written by hand) into ``prompts.jsonl`` with
a ``split`` (``dev``/``test``) per prompt fixed by a hash of its id, written before any rule.

    python benchmarks/coding_sets/make_prompts.py
"""

from __future__ import annotations

import json
from pathlib import Path

from make_identities import split_of

HERE = Path(__file__).resolve().parent
LABELS = ("new-task", "continuation", "negative-feedback", "convention", "question-or-request")


def main() -> None:
    rows = []
    for line in (HERE / "prompts.txt").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        label, stack, prompt = (part.strip() for part in line.split("|", 2))
        assert label in LABELS, line
        rid = f"pr{len(rows):03d}"
        rows.append({"id": rid, "label": label, "stack": stack, "prompt": prompt,
                     "split": split_of(rid)})
    (HERE / "prompts.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"{len(rows)} prompts -> {HERE / 'prompts.jsonl'}")


if __name__ == "__main__":
    main()
