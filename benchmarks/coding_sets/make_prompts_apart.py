"""Turn ``prompts_apart.txt`` (``label | stack | prompt``, written by hand apart from the prompt
classifier and from ``prompts.txt``) into ``prompts_apart.jsonl`` with a ``split``
(``dev``/``test``) per prompt fixed by a hash of its id, before any evaluation.

    python benchmarks/coding_sets/make_prompts_apart.py
"""

from __future__ import annotations

import json
from pathlib import Path

from make_identities import split_of
from make_prompts import LABELS

HERE = Path(__file__).resolve().parent


def main() -> None:
    rows = []
    for line in (HERE / "prompts_apart.txt").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        label, stack, prompt = (part.strip() for part in line.split("|", 2))
        assert label in LABELS, line
        assert prompt, line
        rid = f"pa{len(rows):03d}"
        rows.append({"id": rid, "label": label, "stack": stack, "prompt": prompt,
                     "split": split_of(rid)})
    (HERE / "prompts_apart.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"{len(rows)} prompts -> {HERE / 'prompts_apart.jsonl'}")


if __name__ == "__main__":
    main()
