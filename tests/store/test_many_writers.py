"""Several processes learning into ONE space at the same time, on PostgreSQL and on SQLite.

Each process runs the real facade. The tasks overlap across processes, so writers race to place
variations of the same task (dedups, deltas, consolidations). Afterwards every episode must be
stored, every write accounted for, and the trees sound.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.store import open_store
from helpers import TEST_SETTINGS, make_episode
from pg_fixture import pg_server, pg_url  # noqa: F401 - fixtures

TASKS = {
    "heat the apple": ("go to kitchen", "take apple", "heat apple"),
    "cool the mug": ("go to kitchen", "take mug", "open fridge", "cool mug"),
    "clean the plate": ("go to sink", "take plate", "clean plate"),
    "slice the bread": ("go to counter", "take knife", "slice bread"),
}
ENVS = ("a kitchen with a fridge, a microwave and a table",
        "a kitchen with a sink, a stove and a shelf",
        "a small kitchen with a counter and a bread box")
EXTRAS = ("look around", "open drawer", "check the counter", "wait")


def episode(worker: int, i: int):
    """The i-th episode of a worker; every worker cycles through the same tasks and variants."""
    task = list(TASKS)[(i + worker) % len(TASKS)]
    base = TASKS[task]
    variant = (i // len(TASKS) + worker) % 6
    actions = base if variant < 2 else (base[0], EXTRAS[variant - 2], *base[1:])
    return make_episode(task=task, actions=actions, success=variant != 5,
                        env=ENVS[(i + 2 * worker) % len(ENVS)], worker=worker)


def _learn_worker(url: str, worker: int, count: int, barrier: Any, out: Any) -> None:
    """Child process: learn ``count`` episodes through the facade; report results or the error."""
    try:
        mem = DeltaMem(open_store(url), HashingEmbedder(), TraceExtractor(),
                       settings=TEST_SETTINGS)
        try:
            barrier.wait(timeout=120)
            out.put((worker, [mem.learn(episode(worker, i)).wire() for i in range(count)]))
        finally:
            mem.close()
    except BaseException:
        out.put((worker, traceback.format_exc()))


def run_writers(url: str, workers: int, count: int) -> list[dict[str, Any]]:
    """Run ``workers`` processes at once; return every LearnResult dict, failing on any error."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(workers), ctx.Queue()
    procs = [ctx.Process(target=_learn_worker, args=(url, w, count, barrier, out))
             for w in range(workers)]
    for p in procs:
        p.start()
    reports = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    errors = [r for _, r in reports if isinstance(r, str)]
    assert not errors, "\n".join(errors)
    assert all(p.exitcode == 0 for p in procs)
    return [result for _, results in reports for result in results]


def assert_accounted_for(url: str, results: list[dict[str, Any]], expected: int) -> None:
    """Every episode stored; per tree, new nodes + dedup hits == episodes; trees sound."""
    mem = DeltaMem(open_store(url), HashingEmbedder(), TraceExtractor(), settings=TEST_SETTINGS)
    try:
        assert len(results) == expected
        assert mem.store.count_episodes(mem.space) == expected
        stored = {e.id: e.result for e in mem.store.episodes(mem.space)}
        assert set(stored) == {r["episode"] for r in results}
        # the nodes episodes wrote: live, or retired by consolidation (kept in the audit log)
        retired = [n for e in mem.store.audit_log(mem.space) if e["action"] == "retire"
                   for n in e["detail"]["nodes"]]
        nodes = list(mem.nodes())
        written = [*nodes, *(SimpleNamespace(id=n["id"], tree=n["tree"], episode_id=n["episode"])
                             for n in retired)]
        for tree in ("task", "env"):
            actions = Counter(r[tree]["action"] for r in results)
            learned = [n for n in written if n.tree == tree and n.episode_id is not None]
            assert len(learned) + actions["dedup"] == expected
            assert {n.id for n in learned} == {
                r[tree]["node"] for r in results if r[tree]["action"] != "dedup"}
            assert actions["dedup"] > 0 and actions["delta"] > 0
            assert {r[tree]["node"] for r in results} <= {n.id for n in written}
        # Racing writers never place against a stale tree: the hashing double gives one key one
        # vector, so each key has at most one learned root per outcome (a failure lesson is a
        # root of its own).
        roots = Counter((n.tree, n.key, n.outcome) for n in nodes
                        if n.is_root and not n.lineage)
        assert all(c == 1 for c in roots.values()), roots
        # Two writers racing to compile one chain must not both do it.
        sources = Counter(n.meta.get("consolidated_from") for n in nodes if n.lineage)
        assert all(c == 1 for c in sources.values())
        assert mem.check() == []
    finally:
        mem.close()


@pytest.mark.postgres
@pytest.mark.slow
def test_four_processes_share_one_postgres_space(pg_url):  # noqa: F811 - the imported fixture
    """4 processes x 50 episodes into one Postgres space: 200 episodes, all accounted for."""
    results = run_writers(pg_url, workers=4, count=50)
    assert_accounted_for(pg_url, results, expected=200)


@pytest.mark.slow
def test_three_processes_share_one_sqlite_file(tmp_path):
    """3 processes x 40 episodes into one SQLite file: 120 episodes, all accounted for."""
    url = f"sqlite:{tmp_path / 'shared.db'}"
    open_store(url).close()  # create the schema once, before the race
    results = run_writers(url, workers=3, count=40)
    assert_accounted_for(url, results, expected=120)
