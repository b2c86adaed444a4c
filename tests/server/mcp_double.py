"""Launch the MCP server on a memory with the hashing TEST embedder.

Used by test_mcp.py as the server process an MCP client talks to:
``python mcp_double.py DB SPACE`` (stdio) or ``python mcp_double.py DB SPACE http PORT``.
It runs the product's own ``run_server``; only the embedder is the test double.
"""

from __future__ import annotations

import sys

from deltamem.config import Settings
from deltamem.embed.hashing import HashingEmbedder
from deltamem.extract.trace import TraceExtractor
from deltamem.memory import DeltaMem
from deltamem.server.mcp import run_server
from deltamem.store.sqlite import SQLiteStore

if __name__ == "__main__":
    db, space = sys.argv[1], sys.argv[2]
    settings = Settings(tau_task=0.6, tau_env=0.6, embedder="hashing")
    with DeltaMem(SQLiteStore(db), HashingEmbedder(), TraceExtractor(), space=space,
                  settings=settings) as mem:
        if len(sys.argv) > 3 and sys.argv[3] == "http":
            run_server(mem, transport="http", port=int(sys.argv[4]))
        else:
            run_server(mem, transport="stdio")
