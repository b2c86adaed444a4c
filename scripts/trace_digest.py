"""Digest of what the trace extractor and the memory make of the recorded gold episodes.

Learns ``tests/fixtures``' ScienceWorld and TextWorldExpress gold episodes with the trace
extractor and the hashing test embedder, then recalls each episode's task and scene, and prints
per fixture the placement actions, the composed nodes and the recalled contexts as short hashes.
Run it on two checkouts to show that a refactoring changed nothing::

    PYTHONPATH=/path/to/a/src python scripts/trace_digest.py tests/fixtures > a.json
    PYTHONPATH=/path/to/b/src python scripts/trace_digest.py tests/fixtures > b.json
    diff a.json b.json
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from deltamem.config import Settings
from deltamem.core.model import Episode, experience_to_dict
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.formats.episodes import read_episodes
from deltamem.store.sqlite import SQLiteStore

FIXTURES = ("scienceworld_gold.jsonl", "scienceworld_gold_12x10.jsonl.gz",
            "twx_coin_gold.jsonl.gz")
SETTINGS = Settings(tau_task=0.6, tau_env=0.6, embedder="hashing")


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def fixture_digest(path: Path) -> dict[str, Any]:
    episodes = [e for _, e in read_episodes(path) if isinstance(e, Episode)]
    with tempfile.TemporaryDirectory() as tmp, \
            DeltaMem(SQLiteStore(Path(tmp) / "m.db"), HashingEmbedder(), TraceExtractor(),
                     settings=SETTINGS) as mem:
        actions = [(r.task.action, r.env.action)
                   for r in (mem.learn(e) for e in episodes)]
        contexts = [mem.recall(e.task, e.env).context for e in episodes]
        nodes = sorted(json.dumps([n.tree.value, n.key, n.kind.value, n.depth,
                                   experience_to_dict(mem.experience(n.id))], sort_keys=True)
                       for n in mem.store.nodes(mem.space))
    return {"episodes": len(episodes), "nodes": len(nodes), "actions": digest(actions),
            "node_digest": digest(nodes), "recall_digest": digest(contexts),
            "roots/deltas/dedups": [sum(a == k for pair in actions for a in pair)
                                    for k in ("root", "delta", "dedup")]}


def main() -> None:
    fixtures = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("tests/fixtures")
    print(json.dumps({name: fixture_digest(fixtures / name) for name in FIXTURES}, indent=1))


if __name__ == "__main__":
    main()
