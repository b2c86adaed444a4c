"""Turn ``prompts_apart.txt`` (``label | stack | prompt``, written by hand apart from the prompt
classifier and from ``prompts.txt``) into ``prompts_apart.jsonl`` with a ``split``
(``dev``/``test``) per prompt fixed by a hash of its id, before any evaluation.

    python benchmarks/coding_sets/make_prompts_apart.py
"""

from __future__ import annotations

from make_prompts import convert


def main() -> None:
    convert("prompts_apart.txt", "prompts_apart.jsonl", "pa")


if __name__ == "__main__":
    main()
