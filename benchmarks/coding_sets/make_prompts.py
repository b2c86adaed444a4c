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


def convert(source: str, target: str, prefix: str) -> None:
    """Turn ``source`` (``label | stack | prompt`` lines) into ``target`` (JSON lines, ids
    ``<prefix>NNN``, each row's split fixed by a hash of its id)."""
    rows = []
    for line in (HERE / source).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        label, stack, prompt = (part.strip() for part in line.split("|", 2))
        assert label in LABELS and prompt, line
        rid = f"{prefix}{len(rows):03d}"
        rows.append({"id": rid, "label": label, "stack": stack, "prompt": prompt,
                     "split": split_of(rid)})
    (HERE / target).write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"{len(rows)} prompts -> {HERE / target}")


def main() -> None:
    convert("prompts.txt", "prompts.jsonl", "pr")


if __name__ == "__main__":
    main()
