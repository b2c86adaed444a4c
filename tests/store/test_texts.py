"""Steps and facts stored once per space (issue 48 item 2, ``store/texts.py``).

The conformance suite checks every backend (``test_steps_and_facts_are_stored_once``,
``test_deleting_nodes_deletes_the_texts_only_they_held``); here: the row encoding itself, a
database written before the texts table, and what ``stats`` reports.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from deltamem.core.delta import Put, Splice, diff
from deltamem.core.model import Knowledge, Lesson, Node, NodeKind, Outcome, Skill, Tree
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.errors import StoreError
from deltamem.extract.trace import TraceExtractor
from deltamem.store import _sql_sqlite
from deltamem.store.rows import node_from_row, node_to_row
from deltamem.store.sqlite import SQLiteStore
from deltamem.store.texts import INTERN_FROM, node_texts
from deltamem.testing.conformance import DIM, vec
from helpers import make_episode

STEP = "open the door to the kitchen and look around"
FACT = "kitchen: a fridge (closed), a counter, a sink"


def delta(before, after, node_id="d") -> Node:
    return Node(node_id, Tree.TASK, NodeKind.DELTA, Outcome.SUCCESS, "k", parent_id="r", depth=2,
                patch=diff(before, after), created_at=1.0)


def test_long_list_items_become_numbers_and_read_back() -> None:
    """Items longer than INTERN_FROM (not scalars, not short items, not one holding a NUL)
    are written as numbers, in contents, splices and whole replacements alike."""
    nul = "a step that holds a \x00 NUL char"
    root = Node("r", Tree.TASK, NodeKind.ROOT, Outcome.SUCCESS, "k",
                content=Skill(STEP * 2, (STEP, "go", nul), "done"), created_at=1.0)
    put = delta(Skill("x"), Lesson("heat", (FACT,), ("short",), (STEP,)))
    assert isinstance(put.patch[0], Put)
    splice = delta(Skill("x", ("go",)), Skill("x", ("go", FACT)))
    assert isinstance(splice.patch[0], Splice)
    assert node_texts(root) == [STEP] and len("go") <= INTERN_FROM
    assert node_texts(put) == [FACT, STEP] and node_texts(splice) == [FACT]
    ids = {STEP: 7, FACT: 8}
    texts = {7: STEP, 8: FACT}
    for node in (root, put, splice):
        row = node_to_row(node, ids)
        stored = (row["content"] or "") + (row["patch"] or "")
        assert json.dumps(STEP) not in stored and json.dumps(FACT) not in stored
        assert node_from_row(row, texts) == node
        assert len(stored) < len((node_to_row(node)["content"] or "")
                                 + (node_to_row(node)["patch"] or ""))
    assert json.loads(node_to_row(root, ids)["content"])["steps"] == [7, "go", nul]
    with pytest.raises(StoreError, match="text 8"):
        node_from_row(node_to_row(splice, ids), {7: STEP})
    with pytest.raises(ValueError, match="list of strings"):  # an export file's row
        node_from_row(node_to_row(root, ids))


def test_a_database_from_before_the_texts_table_is_upgraded(tmp_path: Path) -> None:
    """A version-2 file (rows hold their texts inline) opens, reads as before, and new rows
    share their texts with each other."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for migration in _sql_sqlite.MIGRATIONS[:2]:
        for statement in migration:
            conn.execute(statement)
    conn.execute(_sql_sqlite.CREATE_VERSION_TABLE)
    conn.execute(_sql_sqlite.WRITE_VERSION, (2,))
    conn.execute(_sql_sqlite.INSERT_SPACE, ("s", "test-embedder", DIM, time.time()))
    old = Node("old", Tree.ENV, NodeKind.ROOT, Outcome.SUCCESS, "k",
               content=Knowledge("kitchen", (FACT,)), created_at=1.0)
    row = node_to_row(old)
    conn.execute(_sql_sqlite.INSERT_NODE, ("s", *row.values(), vec(1).tobytes()))
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    try:
        assert store.schema_version() == len(_sql_sqlite.MIGRATIONS) == 3
        assert store.get_node("s", "old") == old
        assert store.footprint("s").text_count == 0
        new = [Node(f"n{i}", Tree.ENV, NodeKind.ROOT, Outcome.SUCCESS, "k",
                    content=Knowledge(f"room {i}", (FACT,)), created_at=1.0) for i in range(2)]
        with store.write("s"):
            for i, node in enumerate(new):
                store.add_node("s", node, vec(2 + i))
        assert list(store.nodes("s")) == [old, *new]
        assert (store.footprint("s").text_count, store.footprint("s").texts) == (1, len(FACT))
    finally:
        store.close()


def test_stats_count_each_repeated_step_once(tmp_path: Path) -> None:
    """Two tasks that share long steps: ``stored_chars`` counts each step once (before, each
    root's copy was counted), and splits into the trees' rows and the texts."""
    mem = DeltaMem(SQLiteStore(tmp_path / "m.db"), HashingEmbedder(), TraceExtractor())
    try:
        steps = ("walk to the kitchen counter", "open the microwave door slowly",
                 "take the apple from the fridge")
        mem.learn(make_episode(task="heat the apple in the microwave", actions=steps))
        mem.learn(make_episode(task="wash every plate in the sink", actions=steps[::-1]))
        stats = mem.stats().wire()
        assert stats["task"]["roots"] == 2
        held = {t for n in mem.nodes() for t in node_texts(n)}
        assert set(steps) <= held
        assert stats["texts"]["count"] == len(held)
        assert stats["texts"]["chars"] == sum(map(len, held))
        inline = sum(len((node_to_row(n)["content"] or "") + (node_to_row(n)["patch"] or ""))
                     for n in mem.nodes())
        assert stats["stored_chars"] == stats["task"]["stored_chars"] + \
            stats["env"]["stored_chars"] + stats["texts"]["chars"]
        assert stats["stored_chars"] <= inline - sum(map(len, steps))
    finally:
        mem.close()
