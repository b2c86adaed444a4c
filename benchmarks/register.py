"""Pre-register a held-out run: write its registration before the first episode is played.

The registration (``<results>/<name>/registration.json``, to be committed) fixes the code
version (git commit and a hash of the played code), every option of every entry, the arms,
each entry's episode streams, the endpoints (primary: DeltaMem − none on progress, 95% paired
bootstrap, Holm over the entries; secondary: exact McNemar on success) and the pins that change
trajectories (llama.cpp build flags, the model file's SHA-256, package versions). The evaluation
episodes go into the registry at once, so no later fresh stream draws them. Then play it with
``benchmarks/agent_success.py --registration <file>``, which refuses other code or options.

Usage (the held-out protocol, docs/evaluation-protocol.md):
    .venv/bin/python benchmarks/register.py --name heldout-1 --suite heldout --seed 1 --fresh
    .venv/bin/python benchmarks/register.py --name heldout-2 --suite heldout-2 --seed 2 \
        --fresh --test sign-flip      # the draft in results/heldout-2/DRAFT.md, once frozen
    .venv/bin/python benchmarks/agent_success.py \
        --registration results/heldout-1/registration.json --out runs/heldout-1
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from deltamem.errors import DeltaMemError
from deltamem_bench.registration import (
    DRAFT_NAME,
    ENDPOINT_SETS,
    draft_registration,
    normal,
    register,
)
from deltamem_bench.registry import DEFAULT_REGISTRY

HERE = Path(__file__).resolve().parent


def suites() -> dict[str, list[dict[str, Any]]]:
    """The suites of ``benchmarks/agent_success.py``."""
    spec = importlib.util.spec_from_file_location("agent_success", HERE / "agent_success.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("agent_success", module)
    spec.loader.exec_module(module)
    found: dict[str, list[dict[str, Any]]] = module.SUITES
    return found


def main(argv: list[str] | None = None) -> int:
    known = suites()
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--name", required=True, help="the registration's name (a folder)")
    parser.add_argument("--suite", choices=sorted(known), default="heldout")
    parser.add_argument("--only", help="comma list of entry names (default: all)")
    parser.add_argument("--seed", type=int, required=True, help="draws the streams")
    parser.add_argument("--fresh", action="store_true",
                        help="draw only episodes no registered run has evaluated")
    parser.add_argument("--registry", type=Path, default=DEFAULT_REGISTRY)
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--allow-seen", action="store_true",
                        help="register episodes already in the registry (not held out)")
    parser.add_argument("--test", choices=sorted(ENDPOINT_SETS), default="bootstrap",
                        help="the primary test the registration names (heldout-2 on: "
                        "sign-flip)")
    parser.add_argument("--draft", action="store_true",
                        help=f"write a DRAFT ({DRAFT_NAME}): no streams drawn, no registry "
                        "change, nothing playable")
    parser.add_argument("--notes", type=Path, help="with --draft: a JSON file of notes (the "
                        "power analysis, the wall-time estimate) kept in the draft")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    entries = [e for e in known[args.suite] if only is None or e["name"] in only]
    if not entries:
        parser.error(f"no entry of suite {args.suite!r} is selected")
    if args.draft:
        notes = json.loads(args.notes.read_text(encoding="utf-8")) if args.notes else {}
        draft = draft_registration(args.name, entries, seed=args.seed, fresh=args.fresh,
                                   registry=str(args.registry),
                                   endpoints=ENDPOINT_SETS[args.test], notes=notes)
        path = args.results / args.name / DRAFT_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(normal(draft), indent=1, ensure_ascii=False) + "\n",
                        encoding="utf-8")
        print(f"wrote a DRAFT of {len(entries)} entries: {path} (not registered)")
        return 0
    try:
        path = register(args.name, entries, seed=args.seed, fresh=args.fresh,
                        registry_path=args.registry, results=args.results,
                        allow_seen=args.allow_seen, endpoints=ENDPOINT_SETS[args.test])
    except DeltaMemError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"registered {len(entries)} entries: {path} (commit it, and {args.registry}, before "
          "the first episode)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
