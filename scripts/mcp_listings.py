"""Write (or check) the listings the fast front of ``deltamem mcp`` answers before the SDK is
imported (``src/deltamem_launch/listings.json``), from the SDK server's own answers:

    PYTHONPATH=src .venv/bin/python scripts/mcp_listings.py [--check]

A real ``deltamem mcp`` process with the front switched off (``DELTAMEM_MCP_FRONT=0``) is asked
``tools/list``, ``prompts/list``, ``resources/list``, ``resources/templates/list`` and ``ping``
once per protocol version of the handshake; every version must get the same answers (none
depends on the memory or the options). Run it after changing a tool's name, description,
arguments or output model; ``--check`` (``tests/server/test_mcp_front.py``) exits 1 when the
file is stale.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

from deltamem_launch import FRONT_ENV, LISTINGS
from deltamem_launch.handshake import HANDSHAKE_VERSIONS
from deltamem_launch.handshake import LISTINGS as METHODS

ABOUT = ("The answers of deltamem mcp's SDK server to the listings, which the fast front of the "
         "deltamem command gives before the SDK is imported. Written by scripts/mcp_listings.py "
         "(do not edit); tests/server/test_mcp_front.py checks it.")


def sdk_listings(version: str) -> dict[str, Any]:
    """The SDK server's result for each listing, in a session of protocol ``version``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "deltamem_launch", "mcp", "--db", ":memory:", "--embedder",
         "hashing"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, FRONT_ENV: "0"})
    assert proc.stdin is not None and proc.stdout is not None

    def ask(message: dict[str, Any]) -> dict[str, Any] | None:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        if "id" not in message:
            return None
        answer: dict[str, Any] = json.loads(proc.stdout.readline())
        if answer.get("id") != message["id"] or "result" not in answer:
            raise SystemExit(f"the SDK server answered {message['method']} with {answer}")
        return answer

    try:
        ask({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "mcp_listings", "version": "1"}}})
        ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
        results = {}
        for n, method in enumerate(METHODS, 1):
            answer = ask({"jsonrpc": "2.0", "id": n, "method": method})
            assert answer is not None
            results[method] = answer["result"]
    finally:
        proc.stdin.close()
        proc.wait(60)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="Exit 1 when the file differs from the SDK server's answers.")
    args = parser.parse_args()
    answers = {version: sdk_listings(version) for version in HANDSHAKE_VERSIONS}
    results = answers[HANDSHAKE_VERSIONS[-1]]
    differ = [v for v, r in answers.items() if r != results]
    if differ:
        raise SystemExit(f"the listings depend on the protocol version ({', '.join(differ)} "
                         "differ): the front cannot answer them from one table")
    table = {"about": ABOUT, "results": results}
    if args.check:
        try:
            with open(LISTINGS, encoding="utf-8") as handle:
                stored = json.load(handle)
        except (OSError, ValueError) as exc:
            raise SystemExit(f"{LISTINGS}: {exc}") from None
        if stored != table:
            raise SystemExit(f"{LISTINGS} is stale: run scripts/mcp_listings.py")
        print(f"{LISTINGS}: up to date")
        return
    with open(LISTINGS, "w", encoding="utf-8") as handle:
        json.dump(table, handle, indent=1, ensure_ascii=False)
        handle.write("\n")
    print(f"wrote {LISTINGS}: {', '.join(results)}")


if __name__ == "__main__":
    main()
