"""SQL of the PostgreSQL backend: the schema migrations and the statements used more than once.

Kept apart from :mod:`deltamem.store.postgres` so the Python reads as logic, not as SQL.
Tables live in the first schema of the connection's ``search_path`` (``public`` by default).
"""

from __future__ import annotations

from deltamem.store.rows import EPISODE_COLUMNS, NODE_COLUMNS

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
        # API keys of the REST server: salted hashes only (see deltamem.server.keys).
        """CREATE TABLE api_keys (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, salt BYTEA NOT NULL, hash BYTEA NOT NULL,
            spaces TEXT NOT NULL, scopes TEXT NOT NULL, rate_limit INTEGER,
            created_at DOUBLE PRECISION NOT NULL, last_used_at DOUBLE PRECISION,
            revoked_at DOUBLE PRECISION)""",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)

NOW = "extract(epoch FROM clock_timestamp())"

# Serialises concurrent first opens of one schema (two processes both migrating it).
MIGRATE_LOCK = (
    "SELECT pg_advisory_xact_lock(hashtextextended('deltamem:migrate:' || current_schema(), 0))"
)
CREATE_VERSION_TABLE = "CREATE TABLE IF NOT EXISTS deltamem_schema (version INTEGER NOT NULL)"
READ_VERSION = "SELECT coalesce(max(version), 0) FROM deltamem_schema"
WRITE_VERSION = "INSERT INTO deltamem_schema (version) VALUES (%s)"

# Writers of one space wait for each other here; the key includes the schema so that two
# deltamem databases sharing one server (or one database, in two schemas) never contend.
SPACE_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"

_NODE_COLS = ", ".join(NODE_COLUMNS)
NODE_SELECT = f"SELECT {_NODE_COLS} FROM nodes"
INSERT_NODE = (
    f"INSERT INTO nodes (space, {_NODE_COLS}, rev, embedding) "
    f"VALUES (%s, {', '.join(['%s'] * len(NODE_COLUMNS))}, %s, %b)"
)
INSERT_EPISODE = (
    f"INSERT INTO episodes (space, {', '.join(EPISODE_COLUMNS)}) "
    f"VALUES (%s, {', '.join(['%s'] * len(EPISODE_COLUMNS))})"
)
SELECT_EPISODES = (
    f"SELECT {', '.join(EPISODE_COLUMNS)} FROM episodes WHERE space = %s ORDER BY seq"
)

# The path root -> node in one query. `n.depth < up.depth` guarantees termination even if a
# damaged table held a parent cycle.
CHAIN = f"""WITH RECURSIVE up AS (
        SELECT {_NODE_COLS} FROM nodes WHERE space = %(space)s AND id = %(id)s
        UNION ALL
        SELECT {", ".join("n." + c for c in NODE_COLUMNS)} FROM nodes n
        JOIN up ON n.id = up.parent_id AND n.depth < up.depth
        WHERE n.space = %(space)s)
    SELECT * FROM up ORDER BY depth"""

SUBTREE_IDS = """WITH RECURSIVE down AS (
        SELECT id, depth FROM nodes WHERE space = %(space)s AND id = %(id)s
        UNION ALL
        SELECT n.id, n.depth FROM nodes n
        JOIN down ON n.parent_id = down.id AND n.depth > down.depth
        WHERE n.space = %(space)s)
    SELECT id FROM down"""

BUMP_REVISION = (
    "UPDATE spaces SET revision = revision + 1 WHERE space = %s RETURNING revision, dim"
)
BUMP_GENERATION = "UPDATE spaces SET generation = generation + 1 WHERE space = %s"
SPACE_STATE = "SELECT generation, revision, dim FROM spaces WHERE space = %s"

# Index rows of one tree in insertion (= commit) order, between two revisions.
INDEX_ROWS = (
    "SELECT id, outcome = 'failure', depth, embedding FROM nodes "
    "WHERE space = %s AND tree = %s AND rev > %s AND rev <= %s ORDER BY rev, seq"
)
