"""SQL of the PostgreSQL backend, name for name and in the same order as :mod:`._sql_sqlite`.

:class:`deltamem.store.sql.SQLStore` runs these statements; diff this module against the SQLite
one to see every difference between the backends' SQL. Placeholders are ``%s``, and
``%(space)s``/``%(id)s`` in the two recursive queries. A list parameter (``ids``) is a JSON
array. Tables live in the first schema of the connection's ``search_path`` (``public`` by
default). The statements only PostgreSQL needs (its advisory locks and lock timeout) come last.
"""

from __future__ import annotations

from deltamem.store.rows import EPISODE_COLUMNS, KEY_COLUMNS, NODE_COLUMNS

# -- schema migrations --------------------------------------------------------------------------
# Append-only: position i holds the statements that take a database from version i to i + 1.
MIGRATIONS: list[list[str]] = [
    [
        "CREATE EXTENSION IF NOT EXISTS vector",
        # `revision` is bumped once by every write transaction that adds nodes, under the row
        # lock of its space; nodes carry it as `rev`. Unlike a sequence, it is commit-ordered
        # within a space, which is what lets a reader catch up with "rev > what I have read".
        """CREATE TABLE spaces (
            space TEXT PRIMARY KEY, embedder TEXT NOT NULL, dim INTEGER NOT NULL,
            generation BIGINT NOT NULL DEFAULT 0, revision BIGINT NOT NULL DEFAULT 0,
            created_at DOUBLE PRECISION NOT NULL)""",
        # `embedding` is an untyped vector: each space has its own dimension (checked on insert).
        """CREATE TABLE nodes (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            space TEXT NOT NULL REFERENCES spaces(space),
            id TEXT NOT NULL,
            tree TEXT NOT NULL CHECK (tree IN ('task', 'env')),
            kind TEXT NOT NULL CHECK (kind IN ('root', 'delta')),
            outcome TEXT NOT NULL CHECK (outcome IN ('success', 'failure')),
            parent_id TEXT,
            depth INTEGER NOT NULL,
            key TEXT NOT NULL,
            content TEXT,
            patch TEXT,
            hits INTEGER NOT NULL DEFAULT 0,
            successes INTEGER NOT NULL DEFAULT 0,
            failures INTEGER NOT NULL DEFAULT 0,
            consolidated BOOLEAN NOT NULL DEFAULT FALSE,
            lineage TEXT NOT NULL DEFAULT '[]',
            episode_id TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            meta TEXT NOT NULL DEFAULT '{}',
            rev BIGINT NOT NULL,
            embedding vector NOT NULL,
            UNIQUE (space, id))""",
        "CREATE INDEX nodes_by_tree ON nodes (space, tree, rev, seq)",
        "CREATE INDEX nodes_by_parent ON nodes (space, parent_id)",
        """CREATE TABLE episodes (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            space TEXT NOT NULL REFERENCES spaces(space),
            id TEXT NOT NULL,
            task TEXT NOT NULL, env TEXT NOT NULL, success BOOLEAN NOT NULL,
            score DOUBLE PRECISION,
            steps TEXT NOT NULL, meta TEXT NOT NULL, result TEXT NOT NULL,
            flat_chars INTEGER NOT NULL, created_at DOUBLE PRECISION NOT NULL,
            UNIQUE (space, id))""",
        """CREATE TABLE audit (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, space TEXT NOT NULL,
            action TEXT NOT NULL, detail TEXT NOT NULL, at DOUBLE PRECISION NOT NULL)""",
    ],
    [
        # API keys of the REST server: salted hashes only (see deltamem.faces.server.keys).
        """CREATE TABLE api_keys (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, salt BYTEA NOT NULL, hash BYTEA NOT NULL,
            spaces TEXT NOT NULL, scopes TEXT NOT NULL, rate_limit INTEGER,
            created_at DOUBLE PRECISION NOT NULL, last_used_at DOUBLE PRECISION,
            revoked_at DOUBLE PRECISION)""",
    ],
    [
        # Steps and facts stored once per space (store/texts.py): node rows refer to them by id.
        # Unique by digest: a btree entry holds at most about 2.7 kB, a text may be longer.
        """CREATE TABLE texts (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            space TEXT NOT NULL REFERENCES spaces(space),
            text TEXT NOT NULL)""",
        "CREATE UNIQUE INDEX texts_by_text ON texts (space, md5(text))",
    ],
]

HAS_VERSION_TABLE = ("SELECT 1 FROM pg_tables WHERE schemaname = current_schema() "
                     "AND tablename = 'deltamem_schema'")
CREATE_VERSION_TABLE = "CREATE TABLE IF NOT EXISTS deltamem_schema (version INTEGER NOT NULL)"
READ_VERSION = "SELECT coalesce(max(version), 0) FROM deltamem_schema"
WRITE_VERSION = "INSERT INTO deltamem_schema (version) VALUES (%s)"

# -- spaces -------------------------------------------------------------------------------------
INSERT_SPACE = ("INSERT INTO spaces (space, embedder, dim, created_at) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (space) DO NOTHING")
SELECT_SPACE = "SELECT space, embedder, dim FROM spaces WHERE space = %s"
SELECT_SPACES = "SELECT space, embedder, dim FROM spaces ORDER BY space"
# What a scan needs: the generation (bumped by deletions), the index position of the newest
# rows (here the space's `revision`: a sequence is not commit-ordered, since a transaction may
# commit after a later one, but the revision is bumped under the space's row lock) and the width.
SPACE_STATE = "SELECT generation, revision, dim FROM spaces WHERE space = %s"
# A block's first node: bump the revision once (locking the space row); the block's nodes carry
# the new revision as `rev` and come after the previous one.
BEGIN_NODES = ("UPDATE spaces SET revision = revision + 1 WHERE space = %s "
               "RETURNING revision - 1, dim")
BUMP_GENERATION = "UPDATE spaces SET generation = generation + 1 WHERE space = %s"

# -- nodes --------------------------------------------------------------------------------------
_NODE_COLS = ", ".join(NODE_COLUMNS)
INSERT_NODE = (f"INSERT INTO nodes (space, {_NODE_COLS}, rev, embedding) "
               f"VALUES (%s, {', '.join(['%s'] * len(NODE_COLUMNS))}, %s, %b)")
# Many nodes in one round trip (`get_nodes`); the ids are a JSON array.
SELECT_NODES_BY_ID = (f"SELECT {_NODE_COLS} FROM nodes "
                      "WHERE space = %s AND id IN (SELECT jsonb_array_elements_text(%s::jsonb))")
SELECT_METAS_BY_ID = ("SELECT id, meta FROM nodes "
                      "WHERE space = %s AND id IN (SELECT jsonb_array_elements_text(%s::jsonb))")
SELECT_CHILDREN = (f"SELECT {_NODE_COLS} FROM nodes WHERE space = %s AND parent_id = %s "
                   "ORDER BY rev, seq")
SELECT_NODES = f"SELECT {_NODE_COLS} FROM nodes WHERE space = %s ORDER BY rev, seq"
SELECT_TREE_NODES = (f"SELECT {_NODE_COLS} FROM nodes WHERE space = %s AND tree = %s "
                     "ORDER BY rev, seq")
# Every node on the paths root -> each of many nodes (`chains`), in one round trip, walking up
# from every id of a JSON array. `n.depth < up.depth` ends the walk even if a damaged table
# held a parent cycle (depths strictly decrease towards the root).
CHAINS = f"""WITH RECURSIVE up(id, parent_id, depth) AS (
        SELECT id, parent_id, depth FROM nodes
        WHERE space = %(space)s AND id IN (SELECT jsonb_array_elements_text(%(ids)s::jsonb))
        UNION
        SELECT n.id, n.parent_id, n.depth FROM nodes n JOIN up ON n.id = up.parent_id
        WHERE n.space = %(space)s AND n.depth < up.depth)
    SELECT {_NODE_COLS} FROM nodes
    WHERE space = %(space)s AND id IN (SELECT id FROM up)"""
SUBTREE_IDS = """WITH RECURSIVE down(id, depth) AS (
        SELECT id, depth FROM nodes WHERE space = %(space)s AND id = %(id)s
        UNION ALL
        SELECT n.id, n.depth FROM nodes n JOIN down ON n.parent_id = down.id
        WHERE n.space = %(space)s AND n.depth > down.depth)
    SELECT id FROM down"""
SELECT_VECTORS = ("SELECT n.id, s.dim, n.embedding FROM nodes n JOIN spaces s ON s.space = n.space "
                  "WHERE n.space = %s AND n.id IN (SELECT jsonb_array_elements_text(%s::jsonb))")
# Index rows of one tree in commit order, between two positions.
INDEX_ROWS = ("SELECT id, outcome = 'failure', depth, embedding FROM nodes "
              "WHERE space = %s AND tree = %s AND rev > %s AND rev <= %s ORDER BY rev, seq")
BUMP_COUNTERS = ("UPDATE nodes SET hits = hits + %s, successes = successes + %s, "
                 "failures = failures + %s WHERE space = %s AND id = %s")
MARK_CONSOLIDATED = "UPDATE nodes SET consolidated = TRUE WHERE space = %s AND id = %s"
# Consolidation moves the compiled node's children under the new root (Store.retire).
MOVE_NODE = ("UPDATE nodes SET parent_id = %s, depth = %s, patch = %s "
             "WHERE space = %s AND id = %s")
DELETE_NODES = ("DELETE FROM nodes WHERE space = %s "
                "AND id IN (SELECT jsonb_array_elements_text(%s::jsonb))")
DELETE_SPACE_NODES = "DELETE FROM nodes WHERE space = %s"

# -- texts (store/texts.py) ---------------------------------------------------------------------
# Add the texts of a JSON array that the space lacks, then read the ids of all of them (by
# digest; the caller keeps the rows whose text is one it asked for).
INSERT_TEXTS = ("INSERT INTO texts (space, text) "
                "SELECT %s, jsonb_array_elements_text(%s::jsonb) "
                "ON CONFLICT (space, md5(text)) DO NOTHING")
SELECT_TEXT_IDS = ("SELECT id, text FROM texts WHERE space = %s AND md5(text) IN "
                   "(SELECT md5(jsonb_array_elements_text(%s::jsonb)))")
SELECT_TEXTS = ("SELECT id, text FROM texts WHERE space = %s "
                "AND id IN (SELECT jsonb_array_elements_text(%s::jsonb)::bigint)")
SELECT_TEXT_COLUMNS = "SELECT content, patch FROM nodes WHERE space = %s"
DELETE_TEXTS_EXCEPT = ("DELETE FROM texts WHERE space = %s "
                       "AND id NOT IN (SELECT jsonb_array_elements_text(%s::jsonb)::bigint)")
DELETE_SPACE_TEXTS = "DELETE FROM texts WHERE space = %s"
# What a space keeps for recall, in characters (Store.footprint).
NODES_FOOTPRINT = ("SELECT tree, coalesce(sum(length(content)), 0) + "
                   "coalesce(sum(length(patch)), 0) FROM nodes WHERE space = %s GROUP BY tree")
TEXTS_FOOTPRINT = "SELECT coalesce(sum(length(text)), 0), count(*) FROM texts WHERE space = %s"

# -- episodes -----------------------------------------------------------------------------------
INSERT_EPISODE = (f"INSERT INTO episodes (space, {', '.join(EPISODE_COLUMNS)}) "
                  f"VALUES (%s, {', '.join(['%s'] * len(EPISODE_COLUMNS))})")
SELECT_EPISODES = (f"SELECT {', '.join(EPISODE_COLUMNS)} FROM episodes WHERE space = %s "
                   "ORDER BY seq")
COUNT_EPISODES = "SELECT count(*) FROM episodes WHERE space = %s"
DELETE_SPACE_EPISODES = "DELETE FROM episodes WHERE space = %s"

# -- audit log ----------------------------------------------------------------------------------
INSERT_AUDIT = "INSERT INTO audit (space, action, detail, at) VALUES (%s, %s, %s, %s)"
SELECT_AUDIT = "SELECT action, detail, at FROM audit WHERE space = %s ORDER BY seq"
# The history of retired nodes (Store.retire) is the audit log's "retire" entries.
SELECT_HISTORY = "SELECT seq, detail FROM audit WHERE space = %s AND action = 'retire'"
DELETE_AUDIT_ROWS = ("DELETE FROM audit WHERE space = %s "
                     "AND seq IN (SELECT jsonb_array_elements_text(%s::jsonb)::bigint)")
DELETE_SPACE_HISTORY = "DELETE FROM audit WHERE space = %s AND action = 'retire'"

# -- API keys -----------------------------------------------------------------------------------
_KEY_COLS = ", ".join(KEY_COLUMNS)
INSERT_KEY = (f"INSERT INTO api_keys ({_KEY_COLS}) "
              f"VALUES ({', '.join(['%s'] * len(KEY_COLUMNS))})")
SELECT_KEYS = f"SELECT {_KEY_COLS} FROM api_keys ORDER BY created_at, id"
SELECT_KEY = f"SELECT {_KEY_COLS} FROM api_keys WHERE id = %s"
REVOKE_KEY = "UPDATE api_keys SET revoked_at = %s WHERE id = %s AND revoked_at IS NULL"
TOUCH_KEY = ("UPDATE api_keys SET last_used_at = %s "
             "WHERE id = %s AND (last_used_at IS NULL OR last_used_at < %s)")

# -- PostgreSQL only: locks -------------------------------------------------------------------
# Serialises concurrent first opens of one schema (two processes both migrating it).
MIGRATE_LOCK = (
    "SELECT pg_advisory_xact_lock(hashtextextended('deltamem:migrate:' || current_schema(), 0))"
)
# Writers of one space wait for each other here; the key includes the schema so that two
# deltamem databases sharing one server (or one database, in two schemas) never contend.
SPACE_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
# How long this transaction waits for a lock (milliseconds, as text), like SQLite's busy_timeout.
LOCK_TIMEOUT = "SELECT set_config('lock_timeout', %s, true)"
