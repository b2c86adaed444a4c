"""Launch the MCP server on a memory with the hashing TEST embedder.

Used by test_mcp.py as the server process an MCP client talks to:
``python mcp_double.py DB SPACE`` (stdio) or ``python mcp_double.py DB SPACE http PORT [nokeys]``.
Over HTTP it asks for the API keys of DB (``keys create`` them first) unless ``nokeys`` is given.
``export_skills`` may write under ``$DELTAMEM_EXPORT_DIR`` when that is set.
It runs the product's own ``run_server``; only the embedder is the test double.
"""

from __future__ import annotations

import os
import sys

from deltamem.config import Settings
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.faces.server.keys import KeyStore
from deltamem.faces.server.mcp_serve import run_server
from deltamem.store.sqlite import SQLiteStore

if __name__ == "__main__":
    db, space = sys.argv[1], sys.argv[2]
    settings = Settings(tau_task=0.6, tau_env=0.6, embedder="hashing")
    export_root = os.environ.get("DELTAMEM_EXPORT_DIR")
    store = SQLiteStore(db)
    with DeltaMem(store, HashingEmbedder(), TraceExtractor(), space=space,
                  settings=settings) as mem:
        if len(sys.argv) > 3 and sys.argv[3] == "http":
            keys = None if sys.argv[5:] == ["nokeys"] else KeyStore(store)
            run_server(mem, transport="http", port=int(sys.argv[4]), keys=keys,
                       export_root=export_root)
        else:
            run_server(mem, transport="stdio", export_root=export_root)
