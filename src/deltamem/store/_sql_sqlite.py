"""SQL of the SQLite backend, name for name and in the same order as :mod:`._sql_postgres`.

:class:`deltamem.store.sql.SQLStore` runs these statements; diff this module against the
PostgreSQL one to see every difference between the backends' SQL. Placeholders are ``?``, and
``:space``/``:id`` in the two recursive queries. A list parameter (``ids``) is a JSON array.
"""

from __future__ import annotations

from deltamem.store.rows import EPISODE_COLUMNS, KEY_COLUMNS, NODE_COLUMNS

# -- schema migrations --------------------------------------------------------------------------
# Append-only: position i holds the statements that take a database from version i to i + 1.
MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE spaces (
            space TEXT PRIMARY KEY, embedder TEXT NOT NULL, dim INTEGER NOT NULL,
            generation INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL)""",
        """CREATE TABLE nodes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
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
            consolidated INTEGER NOT NULL DEFAULT 0,
            lineage TEXT NOT NULL DEFAULT '[]',
            episode_id TEXT,
            created_at REAL NOT NULL,
            meta TEXT NOT NULL DEFAULT '{}',
            vector BLOB NOT NULL,
            UNIQUE (space, id))""",
        "CREATE INDEX nodes_by_tree ON nodes (space, tree, seq)",
        "CREATE INDEX nodes_by_parent ON nodes (space, parent_id)",
        """CREATE TABLE episodes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            space TEXT NOT NULL REFERENCES spaces(space),
            id TEXT NOT NULL,
            task TEXT NOT NULL, env TEXT NOT NULL, success INTEGER NOT NULL, score REAL,
            steps TEXT NOT NULL, meta TEXT NOT NULL, result TEXT NOT NULL,
            flat_chars INTEGER NOT NULL, created_at REAL NOT NULL,
            UNIQUE (space, id))""",
        """CREATE TABLE audit (
            seq INTEGER PRIMARY KEY AUTOINCREMENT, space TEXT NOT NULL, action TEXT NOT NULL,
            detail TEXT NOT NULL, at REAL NOT NULL)""",
    ],
    [
        # API keys. Before this migration the key table was created outside the migrations,
        # by the server, with the first seven columns: adopt such a table, then extend it.
        # Legacy keys could do everything, so they keep every scope.
        """CREATE TABLE IF NOT EXISTS api_keys (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, salt BLOB NOT NULL, hash BLOB NOT NULL,
            spaces TEXT NOT NULL, created_at REAL NOT NULL, revoked_at REAL)""",
        """ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL
            DEFAULT '["read", "write", "admin"]'""",
        "ALTER TABLE api_keys ADD COLUMN rate_limit INTEGER",
        "ALTER TABLE api_keys ADD COLUMN last_used_at REAL",
    ],
    [
        # Steps and facts stored once per space (store/texts.py): node rows refer to them by id.
        """CREATE TABLE texts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            space TEXT NOT NULL REFERENCES spaces(space),
            text TEXT NOT NULL,
            UNIQUE (space, text))""",
    ],
]

HAS_VERSION_TABLE = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'deltamem_schema'"
CREATE_VERSION_TABLE = "CREATE TABLE IF NOT EXISTS deltamem_schema (version INTEGER NOT NULL)"
READ_VERSION = "SELECT coalesce(max(version), 0) FROM deltamem_schema"
WRITE_VERSION = "INSERT INTO deltamem_schema (version) VALUES (?)"

# -- spaces -------------------------------------------------------------------------------------
INSERT_SPACE = ("INSERT INTO spaces (space, embedder, dim, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (space) DO NOTHING")
SELECT_SPACE = "SELECT space, embedder, dim FROM spaces WHERE space = ?"
SELECT_SPACES = "SELECT space, embedder, dim FROM spaces ORDER BY space"
# What a scan needs: the generation (bumped by deletions), the index position of the newest
# row (here `seq`: SQLite has one writer at a time, so rows commit in `seq` order) and the width.
SPACE_STATE = ("SELECT generation, (SELECT coalesce(max(seq), 0) FROM nodes), dim "
               "FROM spaces WHERE space = ?")
# A block's first node: the position its rows come after, and the space's width.
BEGIN_NODES = ("SELECT (SELECT coalesce(max(seq), 0) FROM nodes), dim "
               "FROM spaces WHERE space = ?")
BUMP_GENERATION = "UPDATE spaces SET generation = generation + 1 WHERE space = ?"

# -- nodes --------------------------------------------------------------------------------------
_NODE_COLS = ", ".join(NODE_COLUMNS)
INSERT_NODE = (f"INSERT INTO nodes (space, {_NODE_COLS}, vector) "
               f"VALUES (?, {', '.join('?' * len(NODE_COLUMNS))}, ?)")
# Many nodes in one round trip (`get_nodes`); the ids are a JSON array.
SELECT_NODES_BY_ID = (f"SELECT {_NODE_COLS} FROM nodes "
                      "WHERE space = ? AND id IN (SELECT value FROM json_each(?))")
SELECT_METAS_BY_ID = ("SELECT id, meta FROM nodes "
                      "WHERE space = ? AND id IN (SELECT value FROM json_each(?))")
SELECT_CHILDREN = f"SELECT {_NODE_COLS} FROM nodes WHERE space = ? AND parent_id = ? ORDER BY seq"
SELECT_NODES = f"SELECT {_NODE_COLS} FROM nodes WHERE space = ? ORDER BY seq"
SELECT_TREE_NODES = f"SELECT {_NODE_COLS} FROM nodes WHERE space = ? AND tree = ? ORDER BY seq"
# Every node on the paths root -> each of many nodes (`chains`), in one round trip, walking up
# from every id of a JSON array. `n.depth < up.depth` ends the walk even if a damaged table
# held a parent cycle (depths strictly decrease towards the root).
CHAINS = f"""WITH RECURSIVE up(id, parent_id, depth) AS (
        SELECT id, parent_id, depth FROM nodes
        WHERE space = :space AND id IN (SELECT value FROM json_each(:ids))
        UNION
        SELECT n.id, n.parent_id, n.depth FROM nodes n JOIN up ON n.id = up.parent_id
        WHERE n.space = :space AND n.depth < up.depth)
    SELECT {_NODE_COLS} FROM nodes
    WHERE space = :space AND id IN (SELECT id FROM up)"""
SUBTREE_IDS = """WITH RECURSIVE down(id, depth) AS (
        SELECT id, depth FROM nodes WHERE space = :space AND id = :id
        UNION ALL
        SELECT n.id, n.depth FROM nodes n JOIN down ON n.parent_id = down.id
        WHERE n.space = :space AND n.depth > down.depth)
    SELECT id FROM down"""
SELECT_VECTORS = ("SELECT n.id, s.dim, n.vector FROM nodes n JOIN spaces s ON s.space = n.space "
                  "WHERE n.space = ? AND n.id IN (SELECT value FROM json_each(?))")
# Index rows of one tree in commit order, between two positions.
INDEX_ROWS = ("SELECT id, outcome = 'failure', depth, vector FROM nodes "
              "WHERE space = ? AND tree = ? AND seq > ? AND seq <= ? ORDER BY seq")
BUMP_COUNTERS = ("UPDATE nodes SET hits = hits + ?, successes = successes + ?, "
                 "failures = failures + ? WHERE space = ? AND id = ?")
MARK_CONSOLIDATED = "UPDATE nodes SET consolidated = 1 WHERE space = ? AND id = ?"
# Consolidation moves the compiled node's children under the new root (Store.retire).
MOVE_NODE = ("UPDATE nodes SET parent_id = ?, depth = ?, patch = ? "
             "WHERE space = ? AND id = ?")
DELETE_NODES = "DELETE FROM nodes WHERE space = ? AND id IN (SELECT value FROM json_each(?))"
DELETE_SPACE_NODES = "DELETE FROM nodes WHERE space = ?"

# -- texts (store/texts.py) ---------------------------------------------------------------------
# Add the texts of a JSON array that the space lacks, then read the ids of all of them.
INSERT_TEXTS = ("INSERT INTO texts (space, text) SELECT ?, value FROM json_each(?) WHERE true "
                "ON CONFLICT (space, text) DO NOTHING")
SELECT_TEXT_IDS = ("SELECT id, text FROM texts "
                   "WHERE space = ? AND text IN (SELECT value FROM json_each(?))")
SELECT_TEXTS = ("SELECT id, text FROM texts "
                "WHERE space = ? AND id IN (SELECT value FROM json_each(?))")
SELECT_TEXT_COLUMNS = "SELECT content, patch FROM nodes WHERE space = ?"
DELETE_TEXTS_EXCEPT = ("DELETE FROM texts "
                       "WHERE space = ? AND id NOT IN (SELECT value FROM json_each(?))")
DELETE_SPACE_TEXTS = "DELETE FROM texts WHERE space = ?"
# What a space keeps for recall, in characters (Store.footprint).
NODES_FOOTPRINT = ("SELECT tree, coalesce(sum(length(content)), 0) + "
                   "coalesce(sum(length(patch)), 0) FROM nodes WHERE space = ? GROUP BY tree")
TEXTS_FOOTPRINT = "SELECT coalesce(sum(length(text)), 0), count(*) FROM texts WHERE space = ?"

# -- episodes -----------------------------------------------------------------------------------
INSERT_EPISODE = (f"INSERT INTO episodes (space, {', '.join(EPISODE_COLUMNS)}) "
                  f"VALUES (?, {', '.join('?' * len(EPISODE_COLUMNS))})")
SELECT_EPISODES = f"SELECT {', '.join(EPISODE_COLUMNS)} FROM episodes WHERE space = ? ORDER BY seq"
COUNT_EPISODES = "SELECT count(*) FROM episodes WHERE space = ?"
DELETE_SPACE_EPISODES = "DELETE FROM episodes WHERE space = ?"

# -- audit log ----------------------------------------------------------------------------------
INSERT_AUDIT = "INSERT INTO audit (space, action, detail, at) VALUES (?, ?, ?, ?)"
SELECT_AUDIT = "SELECT action, detail, at FROM audit WHERE space = ? ORDER BY seq"
# The history of retired nodes (Store.retire) is the audit log's "retire" entries.
SELECT_HISTORY = "SELECT seq, detail FROM audit WHERE space = ? AND action = 'retire'"
DELETE_AUDIT_ROWS = ("DELETE FROM audit WHERE space = ? "
                     "AND seq IN (SELECT value FROM json_each(?))")
DELETE_SPACE_HISTORY = "DELETE FROM audit WHERE space = ? AND action = 'retire'"

# -- API keys -----------------------------------------------------------------------------------
_KEY_COLS = ", ".join(KEY_COLUMNS)
INSERT_KEY = f"INSERT INTO api_keys ({_KEY_COLS}) VALUES ({', '.join('?' * len(KEY_COLUMNS))})"
SELECT_KEYS = f"SELECT {_KEY_COLS} FROM api_keys ORDER BY created_at, id"
SELECT_KEY = f"SELECT {_KEY_COLS} FROM api_keys WHERE id = ?"
REVOKE_KEY = "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL"
TOUCH_KEY = ("UPDATE api_keys SET last_used_at = ? "
             "WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)")
