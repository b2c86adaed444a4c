"""A damaged or hostile export is refused as a whole, and `check` finds damage already stored.

Each case is one record of a sound export changed the way a corrupt file or a hostile client
would change it. Before the import was verified as a whole, each of these was stored: a parent
cycle then hung `recall` forever, a NaN or huge vector disabled or hijacked recall, and the
others crashed recall/learn/show with an uncaught PatchError.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from typing import Any

import numpy as np
import pytest

from deltamem.core.model import Tree
from deltamem.errors import StoreError
from deltamem.store.transfer import export_lines, export_records, import_records
from helpers import make_episode

DIM = 256  # the hashing test embedder's width
STEPS = ("go to kitchen", "open microwave", "take apple", "heat apple")


@pytest.fixture
def exported(mem) -> list[dict[str, Any]]:
    """A sound export: a task root with a delta child, an env root, two episodes."""
    mem.learn(make_episode())
    mem.learn(make_episode(actions=STEPS))
    return list(export_records(mem.store, mem.space))


def first(records: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    return next(r for r in records if all(r.get(k) == v for k, v in match.items()))


def b64(vector: Any) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()


def _cycle(records: list[dict[str, Any]]) -> None:
    delta = first(records, record="node", kind="delta")
    records.append({**delta, "id": "t-loop", "parent_id": "t-loop", "depth": 3})


def _nan_vector(records: list[dict[str, Any]]) -> None:
    first(records, record="node", tree="task")["vector"] = b64(np.full(DIM, np.nan))


def _huge_vector(records: list[dict[str, Any]]) -> None:
    first(records, record="node", tree="task")["vector"] = b64(np.full(DIM, 1e30))


def _wrong_width(records: list[dict[str, Any]]) -> None:
    first(records, record="node", tree="task")["vector"] = b64(np.ones(DIM + 1) / np.sqrt(DIM + 1))


def _missing_parent(records: list[dict[str, Any]]) -> None:
    first(records, record="node", kind="delta")["parent_id"] = "t-nowhere"


def _root_without_content(records: list[dict[str, Any]]) -> None:
    first(records, record="node", kind="root")["content"] = None


def _patch_does_not_apply(records: list[dict[str, Any]]) -> None:
    delta = first(records, record="node", kind="delta")
    delta["patch"] = [{"op": "splice", "field": "steps", "start": 7, "stop": 9, "items": ["x"]}]


def _parent_in_other_tree(records: list[dict[str, Any]]) -> None:
    env_root = first(records, record="node", tree="env")
    first(records, record="node", kind="delta")["parent_id"] = env_root["id"]


def _integer_id(records: list[dict[str, Any]]) -> None:
    first(records, record="node", kind="delta")["id"] = 5


def _success_list(records: list[dict[str, Any]]) -> None:
    first(records, record="episode")["success"] = [1]


def _too_deep(records: list[dict[str, Any]]) -> None:
    parent = first(records, record="node", kind="delta")
    for depth in range(3, 8):  # max_depth is 5
        child = {**parent, "id": f"t-deep{depth}", "parent_id": parent["id"], "depth": depth,
                 "patch": []}
        records.append(child)
        parent = child


def _lone_surrogate(records: list[dict[str, Any]]) -> None:
    first(records, record="node", kind="root")["key"] = "heat \ud800"


def _nan_score(records: list[dict[str, Any]]) -> None:
    first(records, record="episode")["score"] = float("nan")


def _duplicate_id(records: list[dict[str, Any]]) -> None:
    records.append(dict(first(records, record="node", kind="root")))


def _unknown_field(records: list[dict[str, Any]]) -> None:
    first(records, record="node")["colour"] = "red"


def _empty_episode_id(records: list[dict[str, Any]]) -> None:
    first(records, record="episode")["id"] = ""


def _negative_time(records: list[dict[str, Any]]) -> None:
    first(records, record="node", kind="delta")["created_at"] = -5.0


DAMAGE = {
    "empty episode id": (_empty_episode_id, "'id' must not be empty"),
    "negative created_at": (_negative_time, "'created_at' must be"),
    "parent cycle": (_cycle, "depth 3 disagrees"),
    "NaN vector": (_nan_vector, "NaN"),
    "huge vector": (_huge_vector, "norm"),
    "wrong width": (_wrong_width, "shape"),
    "missing parent": (_missing_parent, "'t-nowhere' is missing"),
    "root without content": (_root_without_content, "root must have"),
    "patch does not apply": (_patch_does_not_apply, "does not compose"),
    "parent in the other tree": (_parent_in_other_tree, "other tree"),
    "integer id": (_integer_id, "'id' must be str"),
    "success [1]": (_success_list, "'success' must be bool"),
    "deeper than max_depth": (_too_deep, "exceeds 5"),
    "lone surrogate": (_lone_surrogate, "surrogate"),
    "NaN score": (_nan_score, "not a finite number"),
    "duplicate id": (_duplicate_id, "duplicate id"),
    "unknown field": (_unknown_field, "unknown field 'colour'"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_import_is_refused_whole_naming_the_record(mem, exported, case):
    """Nothing is written, the error names the record, and the target space stays sound."""
    damage, message = DAMAGE[case]
    records = json.loads(json.dumps(exported))
    damage(records)
    mem.learn(make_episode(task="an unrelated chore", actions=("sweep",)))
    before = list(export_records(mem.store, mem.space))
    with pytest.raises(StoreError, match="record \\d+") as caught:
        import_records(mem.store, "copy", iter(records), max_depth=5)
    assert message in str(caught.value)
    assert "nothing was imported" in str(caught.value)
    assert all(s.space != "copy" for s in mem.store.spaces())
    # importing into the space that holds data is refused the same way and changes nothing
    with pytest.raises(StoreError):
        mem.import_records(iter(records))
    assert list(export_records(mem.store, mem.space)) == before
    assert mem.check() == []


def test_import_into_a_space_with_data_may_hang_under_its_nodes(mem, exported):
    """Nodes whose parents the space already holds are accepted; the result is sound."""
    delta = first(exported, record="node", kind="delta")
    child = {**delta, "id": "t-child", "parent_id": delta["id"], "depth": 3, "patch": []}
    assert mem.import_records(iter([exported[0], child])).wire() == {"nodes": 1, "episodes": 0}
    assert mem.check() == []
    assert [n.id for n in mem.chain("t-child")][-2:] == [delta["id"], "t-child"]


def test_header_without_embedder_or_dim_is_a_store_error(mem):
    """A header missing fields is refused as a StoreError, not a KeyError."""
    for header in ({"format": "deltamem-export", "version": 1},
                   {"format": "deltamem-export", "version": 1, "embedder": "hashing",
                    "dim": "256"}):
        with pytest.raises(StoreError, match="header"):
            mem.import_records(iter([header]))


# -- damage that reached the database some other way: check finds it, reads fail cleanly ----------
def _raw(mem) -> sqlite3.Connection:
    return sqlite3.connect(mem.store.path, isolation_level=None)


def test_check_finds_every_kind_of_damage(mem, exported):
    """`check` names the node for each damage written straight into the database."""
    delta = first(exported, record="node", kind="delta")
    roots = [r for r in exported if r.get("record") == "node" and r["kind"] == "root"]
    db = _raw(mem)
    db.execute("UPDATE nodes SET vector = ? WHERE id = ?",
               (np.full(DIM, np.nan, dtype="<f4").tobytes(), roots[0]["id"]))
    db.execute("UPDATE nodes SET vector = ? WHERE id = ?",
               (np.full(DIM, 1e30, dtype="<f4").tobytes(), roots[1]["id"]))
    db.execute("UPDATE nodes SET parent_id = id WHERE id = ?", (delta["id"],))
    db.close()
    problems = mem.check()
    assert any(p.startswith(roots[0]["id"]) and "NaN" in p for p in problems)
    assert any(p.startswith(roots[1]["id"]) and "norm" in p for p in problems)
    assert any(p.startswith(delta["id"]) and "disagrees" in p for p in problems)


def test_check_finds_a_vector_of_the_wrong_width(mem, exported):
    """A stored vector of another width is named by check (and scans fail as StoreError)."""
    root = first(exported, record="node", kind="root")
    db = _raw(mem)
    db.execute("UPDATE nodes SET vector = ? WHERE id = ?",
               (np.ones(3, dtype="<f4").tobytes(), root["id"]))
    db.close()
    assert any(p.startswith(root["id"]) and "3 dimensions" in p for p in mem.check())


def test_recall_over_a_stored_cycle_ends_with_a_store_error(mem, exported):
    """A parent cycle in the database never hangs: recall, learn, show and delete end."""
    delta = first(exported, record="node", kind="delta")
    db = _raw(mem)
    db.execute("UPDATE nodes SET parent_id = id WHERE id = ?", (delta["id"],))
    db.close()
    assert mem.recall("heat the apple", "").task.matched_node.kind == "root"  # the shallower tie
    with pytest.raises(StoreError, match="does not compose"):
        mem.learn(make_episode(actions=STEPS))
    with pytest.raises(StoreError, match="does not compose"):
        mem.show(delta["id"])
    assert mem.delete(delta["id"]).deleted == [delta["id"]]


@pytest.mark.parametrize("breakage", ["missing parent", "root without content",
                                      "patch does not apply", "parent in the other tree"])
def test_reads_of_damaged_chains_are_store_errors(mem, exported, breakage):
    """Recall and show over damaged chains raise StoreError (never an uncaught PatchError)."""
    delta = first(exported, record="node", kind="delta")
    env_root = first(exported, record="node", tree="env")
    root = first(exported, record="node", kind="root", tree="task")
    update = {
        "missing parent": ("UPDATE nodes SET parent_id = 'gone' WHERE id = ?", delta["id"]),
        "root without content": ("UPDATE nodes SET content = NULL WHERE id = ?", root["id"]),
        "patch does not apply": ("UPDATE nodes SET patch = '[{\"op\":\"splice\",\"field\":"
                                 "\"steps\",\"start\":7,\"stop\":9,\"items\":[]}]' WHERE id = ?",
                                 delta["id"]),
        "parent in the other tree": (f"UPDATE nodes SET parent_id = '{env_root['id']}' "
                                     "WHERE id = ?", delta["id"]),
    }[breakage]
    db = _raw(mem)
    db.execute(update[0], (update[1],))
    db.close()
    assert mem.check() != []
    with pytest.raises(StoreError):
        mem.show(delta["id"])
    with pytest.raises(StoreError):
        mem.experience(delta["id"])


def test_export_never_writes_bare_nan(mem, exported):
    """A NaN that reached the database is an export error, never an invalid `NaN` line."""
    db = _raw(mem)
    db.execute("UPDATE episodes SET score = 'nan'")
    db.execute("UPDATE nodes SET meta = '{\"x\": NaN}' WHERE tree = ?", (Tree.ENV.value,))
    db.close()
    with pytest.raises(StoreError, match="cannot export"):
        list(export_lines(mem.store, mem.space))


@pytest.mark.parametrize("value", [np.nan, 1e30])
def test_a_damaged_vector_already_stored_cannot_poison_recall(mem, value):
    """A NaN or huge vector written straight into the database: `check` names it, and a
    scan leaves that node out, so recall still finds the sound nodes (NaN made the tree match
    nothing; 1e30 won every recall, whatever the task)."""
    from deltamem.engine.memory import DeltaMem
    from deltamem.store.sqlite import SQLiteStore

    mem.learn(make_episode())
    mem.learn(make_episode(task="cool the milk", actions=("go to fridge", "cool milk"),
                           env="a pantry with shelves"))
    milk = next(n for n in mem.nodes(Tree.TASK) if "milk" in n.key)
    db = _raw(mem)
    db.execute("UPDATE nodes SET vector = ? WHERE id = ?",
               (np.full(DIM, value, dtype="<f4").tobytes(), milk.id))
    db.close()
    assert any(p.startswith(milk.id) for p in mem.check())
    fresh = DeltaMem(SQLiteStore(mem.store.path), mem.embedder, mem.extractor,
                     settings=mem.settings)  # a process whose index is built from the file
    try:
        recalled = fresh.recall("heat the apple", "")
        assert recalled.task.node is not None and recalled.task.node != milk.id
        best = recalled.task.best
        assert best is not None and np.isfinite(best.score) and best.score <= 1.0 + 1e-6
        other = fresh.recall("cool the milk", "")
        assert other.task.node is None or other.task.node != milk.id
        assert all(c.id != milk.id for c in other.task.candidates)
    finally:
        fresh.close()
