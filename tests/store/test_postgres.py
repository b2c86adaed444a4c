"""The PostgreSQL + pgvector store: the shared conformance suite plus what only it can show."""

from __future__ import annotations

import socket
from typing import Any

import psycopg
import pytest

from deltamem.core.model import Tree
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.errors import ConfigError, SchemaError, StoreError
from deltamem.extract.trace import TraceExtractor
from deltamem.store import open_store
from deltamem.store._sql_postgres import MIGRATIONS
from deltamem.store.copy import copy_spaces
from deltamem.store.postgres import PostgresStore
from deltamem.store.sqlite import SQLiteStore
from deltamem.store.transfer import export_records
from deltamem.testing.conformance import DIM, SPACE, StoreConformance, make_root, vec
from helpers import TEST_SETTINGS, make_episode
from pg_fixture import pg_server, pg_url  # noqa: F401 - fixtures

pytestmark = pytest.mark.postgres


class TestPostgres(StoreConformance):
    """PostgreSQL on a real TCP server, one fresh schema per test."""

    @pytest.fixture
    def store_factory(self, pg_url):  # noqa: F811 - the imported fixture
        return lambda: PostgresStore(pg_url)


# -- behaviour only a server store has ----------------------------------------------------------
def test_scan_inside_a_block_merges_own_uncommitted_nodes(pg_url):  # noqa: F811
    """In a block, own new nodes join the committed ones; exact ties go to the newer node."""
    with _store(pg_url) as store:
        with store.write(SPACE):
            store.add_node(SPACE, make_root("old"), vec(1))
            store.add_node(SPACE, make_root("other"), vec(3))
        with pytest.raises(RuntimeError), store.write(SPACE):
            store.add_node(SPACE, make_root("new"), vec(1))  # same vector, same depth: a tie
            got = store.scan(SPACE, Tree.TASK, vec(1), penalty=0.0, k=3)
            assert [c.id for c in got] == ["new", "old", "other"]
            assert got[0].score == got[1].score
            raise RuntimeError("roll back")
        assert [c.id for c in store.scan(SPACE, Tree.TASK, vec(1), penalty=0.0, k=3)] == [
            "old", "other"]


def test_scan_inside_a_block_hides_its_own_deletions(pg_url):  # noqa: F811
    """A block that deleted a node no longer finds it, before and after commit."""
    with _store(pg_url) as store:
        with store.write(SPACE):
            store.add_node(SPACE, make_root("a"), vec(1))
            store.add_node(SPACE, make_root("b"), vec(2))
        assert store.scan(SPACE, Tree.TASK, vec(2), penalty=0.0)[0].id == "b"
        with store.write(SPACE):
            store.delete_subtree(SPACE, "b")
            store.add_node(SPACE, make_root("c"), vec(3))
            inside = store.scan(SPACE, Tree.TASK, vec(2), penalty=0.0, k=5)
            assert {c.id for c in inside} == {"a", "c"}
        assert {c.id for c in store.scan(SPACE, Tree.TASK, vec(2), penalty=0.0, k=5)} == {"a",
                                                                                        "c"}


def test_a_writer_gives_up_after_lock_timeout_and_writes_nothing(pg_url):  # noqa: F811
    """Another writer holds the space: this one waits ``lock_timeout``, then says why (it used
    to wait forever); its node is not there, and the space is writable once free."""
    with _store(pg_url) as holder, _store(pg_url, lock_timeout=0.3) as waiter:
        with holder.write(SPACE):
            holder.add_node(SPACE, make_root("held"), vec(1))
            with pytest.raises(StoreError, match="stayed locked.*lock_timeout"), \
                    waiter.write(SPACE):
                waiter.add_node(SPACE, make_root("lost"), vec(2))  # pragma: no cover
        assert [n.id for n in waiter.nodes(SPACE)] == ["held"]
        with waiter.write(SPACE):
            waiter.add_node(SPACE, make_root("later"), vec(2))
        assert {n.id for n in holder.nodes(SPACE)} == {"held", "later"}


def test_refuses_other_spaces_and_wrong_dimensions_inside_a_block(pg_url):  # noqa: F811
    """A block changes only its own space, and vectors must have the space's dimension."""
    with _store(pg_url) as store:
        store.ensure_space("other", "e", DIM)
        with pytest.raises(StoreError, match="inside a write block"), store.write(SPACE):
            store.add_node("other", make_root("x"), vec(1))
        with pytest.raises(StoreError, match="8-d"), store.write(SPACE):
            store.add_node(SPACE, make_root("x"), vec(1, dim=4))
        with pytest.raises(StoreError, match="do not nest"), store.write(SPACE), store.write(SPACE):
            pass
        assert list(store.nodes(SPACE)) == [] and list(store.nodes("other")) == []


def test_newer_schema_is_refused(pg_url):  # noqa: F811
    """A database written by a newer deltamem is not opened."""
    with _store(pg_url) as store:
        assert store.schema_version() == len(MIGRATIONS)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO deltamem_schema (version) VALUES (%s)", (len(MIGRATIONS) + 1,))
    with pytest.raises(SchemaError, match="newer"):
        PostgresStore(pg_url)


def test_open_store_routes_urls_and_unreachable_servers_fail_clearly(pg_url):  # noqa: F811
    """open_store gives a PostgresStore; a closed port is a StoreError, not a hang."""
    store = open_store(pg_url)
    try:
        assert isinstance(store, PostgresStore)
    finally:
        store.close()
    with pytest.raises(StoreError, match="cannot open"):
        PostgresStore(f"postgresql://postgres@127.0.0.1:{_closed_port()}/postgres",
                      connect_timeout=2)


# -- the facade on both backends ------------------------------------------------------------------
def test_facade_learns_the_same_memory_as_sqlite(pg_url, tmp_path):  # noqa: F811
    """Same episodes into SQLite and Postgres: same trees, recalls and exports (ids mapped)."""
    episodes = [workload_episode(i) for i in range(48)]
    with _mem(SQLiteStore(tmp_path / "m.db")) as lite, _mem(PostgresStore(pg_url)) as pg:
        for episode in episodes:
            a, b = lite.learn(episode), pg.learn(episode)
            assert (a.task.action, a.env.action, len(a.consolidated)) == (
                b.task.action, b.env.action, len(b.consolidated))
        names = _id_map(lite, pg)
        assert lite.stats() == pg.stats()
        for task, env in {(e.task, e.env) for e in episodes[:12]}:
            want = lite.recall(task, env).to_dict()
            got = pg.recall(task, env).to_dict()
            want.pop("usage"), got.pop("usage")
            assert _canon(got, names) == _canon(want, names)
        assert _canon(list(export_records(pg.store, "default")), names) == _canon(
            list(export_records(lite.store, "default")), names)
        assert lite.check() == [] and pg.check() == []
        actions = {r["task"]["action"] for r in (e.result for e in pg.store.episodes("default"))}
        assert {"root", "delta", "dedup"} <= actions


# -- migration ------------------------------------------------------------------------------------
def test_migrate_sqlite_to_postgres_and_back_is_exact(pg_url, tmp_path):  # noqa: F811
    """sqlite -> postgres -> sqlite keeps every record of every space bit for bit."""
    src = tmp_path / "src.db"
    with _mem(SQLiteStore(src)) as mem:
        for i in range(30):
            mem.learn(workload_episode(i))
        mem.delete(next(n.id for n in mem.nodes() if n.depth == 1))
    with _mem(SQLiteStore(src), space="second") as mem:
        mem.learn(workload_episode(3))
    counts = copy_spaces(f"sqlite:{src}", pg_url)
    assert set(counts) == {"default", "second"}
    assert counts["second"] == {"nodes": 2, "episodes": 1}
    back = tmp_path / "back.db"
    assert copy_spaces(pg_url, f"sqlite:{back}", space="default") == {"default": counts["default"]}
    stores = [SQLiteStore(src), PostgresStore(pg_url), SQLiteStore(back)]
    try:
        exports = [list(export_records(s, "default")) for s in stores]
        assert exports[0] == exports[1] == exports[2]
        assert len(exports[0]) == 1 + counts["default"]["nodes"] + counts["default"]["episodes"]
        assert list(export_records(stores[0], "second")) == list(
            export_records(stores[1], "second"))
    finally:
        for s in stores:
            s.close()


def test_migrate_refuses_a_non_empty_destination_and_unknown_spaces(pg_url, tmp_path):  # noqa: F811
    """Nothing is copied into a space that already has data, or from a space that is absent."""
    src = tmp_path / "src.db"
    with _mem(SQLiteStore(src)) as mem:
        mem.learn(workload_episode(0))
    copy_spaces(f"sqlite:{src}", pg_url)
    with pytest.raises(StoreError, match="not empty"):
        copy_spaces(f"sqlite:{src}", pg_url)
    with pytest.raises(ConfigError, match="no space"):
        copy_spaces(f"sqlite:{src}", pg_url, space="missing")
    with _store(pg_url) as store:
        assert store.count_episodes("default") == 1


# -- helpers --------------------------------------------------------------------------------------
TASKS = {
    "heat the apple": ("go to kitchen", "take apple", "heat apple"),
    "cool the mug": ("go to kitchen", "take mug", "open fridge", "cool mug"),
    "clean the plate": ("go to sink", "take plate", "clean plate"),
}
ENVS = ("a kitchen with a fridge, a microwave and a table",
        "a kitchen with a sink, a stove and a shelf")
EXTRAS = ("look around", "open drawer", "check the counter")


def workload_episode(i: int):
    """Episode ``i`` of a workload whose tasks repeat and vary: roots, deltas, dedups, lessons."""
    task = list(TASKS)[i % len(TASKS)]
    base = TASKS[task]
    variant = (i // len(TASKS)) % 5
    actions = base if variant in (0, 1) else (base[0], EXTRAS[variant - 2], *base[1:])
    return make_episode(task=task, actions=actions, success=variant != 4, env=ENVS[(i // 2) % 2])


class _store:
    """A PostgresStore registered with the conformance space, closed on exit."""

    def __init__(self, url: str, **options: Any):
        self.store = PostgresStore(url, **options)
        self.store.ensure_space(SPACE, "e", DIM)

    def __enter__(self) -> PostgresStore:
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.store.close()


def _mem(store, space: str = "default") -> DeltaMem:
    return DeltaMem(store, HashingEmbedder(), TraceExtractor(), space=space,
                    settings=TEST_SETTINGS)


def _id_map(lite: DeltaMem, pg: DeltaMem) -> dict[str, str]:
    """Canonical names for the random ids of both memories, paired by insertion order (the
    nodes consolidation retired, which lineages name, by their order in the history)."""
    names: dict[str, str] = {}
    for mem in (lite, pg):
        for i, node in enumerate(mem.nodes()):
            names[node.id] = f"node-{i}"
        retired = [n["id"] for e in mem.store.audit_log(mem.space) if e["action"] == "retire"
                   for n in e["detail"]["nodes"]]
        for i, node_id in enumerate(retired):
            names[node_id] = f"retired-{i}"
        for i, episode in enumerate(mem.store.episodes(mem.space)):
            names[episode.id] = f"episode-{i}"
    return names


def _canon(value, names: dict[str, str]):
    """``value`` with ids renamed and wall-clock timestamps dropped."""
    if isinstance(value, dict):
        return {k: _canon(v, names) for k, v in value.items() if k not in ("created_at", "at")}
    if isinstance(value, list | tuple):
        return [_canon(v, names) for v in value]
    if isinstance(value, str):  # an id, or a text naming ids (a rendered note's "Node <id>")
        if value in names:
            return names[value]
        for old, new in names.items():
            value = value.replace(old, new)
        return value
    return value


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_long_write_blocks_do_not_starve_reads(pg_url):  # noqa: F811
    """Every write connection is held by a long write block (other spaces): a read of another
    space still gets a connection at once (it used to wait for the pool, then fail); one more
    writer waits for a write connection and then fails clearly, writing nothing."""
    import threading

    with _store(pg_url, pool_size=2, connect_timeout=1) as store:
        for space in ("w1", "w2", "free"):
            store.ensure_space(space, "e", DIM)
        with store.write("free"):
            store.add_node("free", make_root("f"), vec(1))
        started, release = threading.Barrier(3), threading.Event()

        def hold(space: str) -> None:
            with store.write(space):
                store.add_node(space, make_root(f"{space}-n"), vec(2))
                started.wait()
                release.wait()

        holders = [threading.Thread(target=hold, args=(s,)) for s in ("w1", "w2")]
        for t in holders:
            t.start()
        try:
            started.wait()
            assert [n.id for n in store.nodes("free")] == ["f"]
            assert store.scan("free", Tree.TASK, vec(1), penalty=0.0)[0].id == "f"
            with pytest.raises(StoreError, match="write connection stayed busy"), \
                    store.write("free"):
                store.add_node("free", make_root("lost"), vec(3))  # pragma: no cover
        finally:
            release.set()
            for t in holders:
                t.join()
        assert {n.id for n in store.nodes("w1")} == {"w1-n"}
        assert [n.id for n in store.nodes("free")] == ["f"]


def test_a_statement_past_statement_timeout_is_cancelled(pg_url):  # noqa: F811
    """A statement that runs too long is cancelled (StoreError), and the connection is fine
    for the next one."""
    with _store(pg_url, statement_timeout=0.2) as store:
        with pytest.raises(StoreError, match="statement timeout"), store._read() as conn:
            conn.execute("SELECT pg_sleep(5)")
        assert store.schema_version() >= 1


def test_opening_while_another_process_migrates_waits_at_most_lock_timeout(pg_url):  # noqa: F811
    """Another connection holds the schema's migration lock (a migrator stuck mid-way): opening
    gives up after ``lock_timeout`` with a StoreError (it used to wait forever)."""
    with psycopg.connect(pg_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(hashtextextended('deltamem:migrate:' || "
                       "current_schema(), 0))")
        with pytest.raises(StoreError, match="lock"):
            PostgresStore(pg_url, lock_timeout=0.3).close()
    PostgresStore(pg_url).close()  # free again: opens
