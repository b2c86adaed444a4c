"""A team server on PostgreSQL: one `deltamem serve` over a shared database, two agents.

    python examples/team_server.py --db postgresql://user:pass@host:5432/dbname

Alice's agent learns how it fixed a flaky deploy; Bob's agent, on another machine in practice,
recalls that skill through the same server. Each agent has its own API key for the team's
space. The server runs with the ``static`` embedder (shipped, fast; set DELTAMEM_EMBEDDER to
change it), on a free loopback port, and is stopped at the end. `compose.yaml` runs the same
setup in Docker (docs/deployment.md).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

import httpx

from deltamem import Client, Episode, Step

CLI = [sys.executable, "-m", "deltamem"]
SPACE = "team"
TASK = "fix the flaky deploy of the billing service"
ENV = "billing service on Kubernetes, deployed by GitHub Actions"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def create_key(db: str, name: str, env: dict[str, str]) -> str:
    out = subprocess.run([*CLI, "keys", "create", "--db", db, "--space", SPACE, "--name", name,
                          "--json"], capture_output=True, text=True, env=env, check=True)
    return str(json.loads(out.stdout)["key"])


def wait_ready(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with code {server.returncode}")
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit("the server did not become ready in 120 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=os.environ.get("DELTAMEM_DB"),
                        help="postgresql://... (or $DELTAMEM_DB)")
    args = parser.parse_args()
    if not args.db:
        parser.error("give --db postgresql://... (or set DELTAMEM_DB)")
    env = {**os.environ, "DELTAMEM_EMBEDDER": os.environ.get("DELTAMEM_EMBEDDER", "static")}
    alice_key, bob_key = create_key(args.db, "alice", env), create_key(args.db, "bob", env)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([*CLI, "serve", "--db", args.db, "--port", str(port)], env=env)
    try:
        wait_ready(url, server)
        with Client(url, api_key=alice_key, space=SPACE) as alice:
            steps = [("kubectl rollout status deploy/billing", "timed out waiting for rollout"),
                     ("kubectl describe pod billing-7d9", "readiness probe failed: 503"),
                     ("raise the readiness probe's initialDelaySeconds to 20",
                      "deployment.yaml edited"),
                     ("kubectl rollout status deploy/billing", "successfully rolled out")]
            learned = alice.learn(Episode(task=TASK, env=ENV, success=True,
                                          steps=tuple(Step(a, o) for a, o in steps)))
            print(f"alice learned {learned.task.action} {learned.task.node}")
        with Client(url, api_key=bob_key, space=SPACE) as bob:
            recall = bob.recall(task="the billing deploy is flaky again", env=ENV)
            print(f"bob recalled {recall.task.node}:\n")
            print(recall.context)
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
