"""How long one learn holds the space's write lock: crafted episodes against an ordinary one.

Every case first learns a *stored* episode, then times learning a second episode of the same
task (so it is placed against the stored chain). The store's ``write`` block is wrapped to time
how long the lock is held; the whole ``learn`` is timed too (extraction and placement run
before the lock is taken). Cases:

* ``ordinary``  -- a 6-step episode, one step changed;
* ``words``     -- the reliability probe's attack: ``--steps`` steps of ~300 characters, each
  differing word by word from the stored one (``"a a a ..."`` vs ``"a b a b ..."``: the
  matcher's near-cubic case);
* ``repeated``  -- ``--steps`` identical long steps against ``--steps`` other identical ones;
* ``crowd``     -- ``words`` against 32 stored variants of the task (the whole candidate pool);
* ``raced``     -- ``words`` where another writer adds a node between the plan and the write, so
  placement is redone inside the lock (its worst case).

``unbounded`` is the baseline: the old rule (matcher without a budget) diffing the ``words``
pair at ``--old-steps`` steps, timed alone, outside any memory; the old code ran it inside the
lock. Prints a table and one JSON object.

    python benchmarks/write_lock.py [--steps 1000] [--old-steps 20]
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deltamem.config import Settings
from deltamem.core import delta
from deltamem.core.delta import Budget, diff
from deltamem.core.model import Episode, Skill, Step
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.store.sqlite import SQLiteStore

SETTINGS = Settings(tau_task=0.6, tau_env=0.6, embedder="hashing", auto_consolidate=False)
TASK = "many step probe"
A = ("a " * 150)[:299]
B = ("a b " * 75)[:299]


def episode(actions: list[str], task: str = TASK) -> Episode:
    return Episode(task, "a room", tuple(Step(a, "o") for a in actions), success=True)


class Timed:
    """Wraps a store's ``write`` to time every block."""

    def __init__(self, store: SQLiteStore):
        self.held: list[float] = []
        inner = store.write

        @contextmanager
        def write(space: str) -> Iterator[None]:
            started = time.perf_counter()
            try:
                with inner(space):
                    yield
            finally:
                self.held.append(time.perf_counter() - started)

        store.write = write  # type: ignore[method-assign]


def case(name: str, stored: list[Episode], probe: Episode, *, race: bool = False
         ) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "lock.db")
        mem = DeltaMem(store, HashingEmbedder(), TraceExtractor(), settings=SETTINGS)
        for e in stored:
            mem.learn(e)
        timer = Timed(store)
        if race:  # another writer lands between the plan and the write: placement is redone
            plan = mem.writer.plan

            def plan_then_race(*args: Any, **kwargs: Any) -> Any:
                planned = plan(*args, **kwargs)
                other = DeltaMem(SQLiteStore(Path(tmp) / "lock.db"), HashingEmbedder(),
                                 TraceExtractor(), settings=SETTINGS)
                other.learn(episode(["x"]))
                other.close()
                return planned

            mem.writer.plan = plan_then_race  # type: ignore[method-assign]
        started = time.perf_counter()
        result = mem.learn(probe)
        wall = time.perf_counter() - started
        mem.close()
    return {"case": name, "steps": len(probe.steps), "lock_s": round(max(timer.held), 4),
            "learn_s": round(wall, 3), "task": result.task.action,
            "patch_ops": result.task.patch_ops}


def unbounded(steps: int) -> dict[str, Any]:
    old = Skill(TASK, tuple(f"{i} {A}" for i in range(steps)), "done")
    new = Skill(TASK, tuple(f"{i} {B}" for i in range(steps)), "done")
    bound = delta.MAX_MATCH
    delta.MAX_MATCH = 10**15  # the old rule: no single-comparison bound either
    try:
        started = time.perf_counter()
        diff(old, new, budget=Budget(10**15))
    finally:
        delta.MAX_MATCH = bound
    return {"case": "unbounded (old rule, diff only)", "steps": steps,
            "lock_s": round(time.perf_counter() - started, 4), "learn_s": None, "task": "-",
            "patch_ops": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--old-steps", type=int, default=20)
    args = parser.parse_args()
    n = args.steps
    base = [f"step {i} of the usual route" for i in range(6)]
    words_old = [f"{i} {A}" for i in range(n)]
    words_new = [f"{i} {B}" for i in range(n)]
    rows = [
        case("ordinary", [episode(base)], episode([*base[:3], "open the door", *base[4:]])),
        case("words", [episode(words_old)], episode(words_new)),
        case("repeated", [episode([A] * n)], episode([B] * n)),
        case("crowd", [episode([f"{j} {s}" for s in words_old[: max(1, n // 32)]])
                       for j in range(32)], episode(words_new)),
        case("raced", [episode(words_old)], episode(words_new), race=True),
        unbounded(args.old_steps),
    ]
    ordinary = rows[0]["lock_s"]
    worst = max(rows[1:-1], key=lambda r: r["lock_s"])
    print(f"{'case':34} {'steps':>6} {'lock held s':>12} {'learn s':>9} {'task':>6} {'ops':>6}")
    for r in rows:
        learn = "-" if r["learn_s"] is None else f"{r['learn_s']:.3f}"
        ops = "-" if r["patch_ops"] is None else str(r["patch_ops"])
        print(f"{r['case']:34} {r['steps']:>6} {r['lock_s']:>12.4f} {learn:>9} {r['task']:>6} "
              f"{ops:>6}")
    print(f"worst crafted lock: {worst['case']} {worst['lock_s']:.4f} s "
          f"({worst['lock_s'] / max(ordinary, 1e-9):.1f}x the ordinary episode's)")
    print(json.dumps({"benchmark": "write_lock", "python": platform.python_version(),
                      "steps": n, "rows": rows, "worst": worst,
                      "worst_over_ordinary": round(worst["lock_s"] / max(ordinary, 1e-9), 2)}))


if __name__ == "__main__":
    main()
