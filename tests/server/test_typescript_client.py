"""The TypeScript client (clients/typescript) against a real `deltamem serve`: node's test
runner runs clients/typescript/test/ (built with tsc) with the server's URL and an admin key.

`npm ci` installs the pinned tools (package-lock.json) when node_modules is missing. Without
node and npm on PATH the test is skipped with that reason (shown by pytest's -ra summary).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from server_live import ServeProcess, make_keys

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"


def npm() -> str:
    found = shutil.which("npm")
    if found is None or shutil.which("node") is None:
        pytest.skip("node and npm are not installed: the TypeScript client's tests need them")
    return found


def test_the_openapi_document_of_the_typescript_client_is_current() -> None:
    """clients/typescript/openapi.json (the types' source) is the server's document today."""
    proc = subprocess.run([sys.executable, str(PACKAGE / "scripts" / "openapi.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # ... and its generated methods (src/operations.ts) are that document's operations.
    proc = subprocess.run([sys.executable, str(PACKAGE / "scripts" / "operations.py"),
                           "--check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_npm_pack_builds_dist_first() -> None:
    """A fresh clone's `npm pack` ships dist/ (the package.json's prepack builds it)."""
    import json

    scripts = json.loads((PACKAGE / "package.json").read_text())["scripts"]
    assert scripts["prepack"] == "npm run build"


def test_typescript_client_against_a_real_server(tmp_path: Path) -> None:
    tool = npm()
    if not (PACKAGE / "node_modules").is_dir():
        subprocess.run([tool, "ci", "--no-audit", "--no-fund"], cwd=PACKAGE, check=True,
                       timeout=600)
    db = tmp_path / "served.db"
    _, admin = make_keys(db)
    with ServeProcess(str(db), tmp_path / "serve.log") as server:
        proc = subprocess.run([tool, "test"], cwd=PACKAGE, capture_output=True, text=True,
                              timeout=600, env={**os.environ, "DELTAMEM_URL": server.url,
                                                "DELTAMEM_KEY": admin})
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "# fail 0" in proc.stdout and "# pass 6" in proc.stdout
