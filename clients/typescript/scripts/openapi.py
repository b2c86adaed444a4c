"""Write the deltamem REST server's OpenAPI document (built in-process from the FastAPI app, the
same document `deltamem serve` serves at /openapi.json) to clients/typescript/openapi.json.

    python clients/typescript/scripts/openapi.py          # then: npm run generate
    python clients/typescript/scripts/openapi.py --check  # exit 1 when the file is stale
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
TARGET = HERE / "openapi.json"


def document() -> dict[str, Any]:
    from deltamem.embed.hashing import HashingEmbedder
    from deltamem.faces.server.rest import create_app

    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(Path(tmp) / "openapi.db", embedder=HashingEmbedder())
        return app.openapi()


def text() -> str:
    return json.dumps(document(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    fresh = text()
    if "--check" in argv:
        if not TARGET.is_file() or TARGET.read_text() != fresh:
            print(f"{TARGET} is stale: run python {Path(__file__).relative_to(HERE.parents[1])}"
                  " and npm run generate in clients/typescript", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(fresh)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
