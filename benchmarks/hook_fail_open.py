"""How long a prompt hook keeps the user waiting when the hook daemon hangs.

A hung daemon is a test double that holds the daemon's socket and lock, accepts every
connection and never answers. Each call runs the plugin's hook client (``deltamem-hook
user-prompt`` and ``session-start``) as a process, as the clients do, and times it until it
exits. The baseline, measured in the same run: the same calls when no daemon listens (the
client starts one and gives up on it after its wait) and answered by a warm real daemon.

Usage:
    .venv/bin/python benchmarks/hook_fail_open.py --calls 10
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

PAYLOAD = {"session_id": "bench", "cwd": "/home/dev/shop", "prompt": "fix the failing test",
           "hook_event_name": "UserPromptSubmit"}


def call(env: dict[str, str], db: Path, event: str) -> tuple[float, int, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "deltamem_hook", event, "--db", str(db)],
                          input=json.dumps(PAYLOAD), env=env, text=True, capture_output=True,
                          timeout=120, check=False)
    return time.perf_counter() - start, done.returncode, done.stdout


def socket_path(env: dict[str, str], db: Path) -> Path:
    old = dict(os.environ)
    os.environ.update(env)
    try:
        from deltamem_hook import target

        return target(str(db), "default", env.get("DELTAMEM_EMBEDDER")).socket
    finally:
        os.environ.clear()
        os.environ.update(old)


def hung(path: Path) -> tuple[socket.socket, Any]:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = open(str(path) + ".lock", "w")  # noqa: SIM115 - held while the double runs
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        try:
            while True:
                held.append(server.accept()[0])
        except OSError:
            return

    threading.Thread(target=accept, daemon=True).start()
    return server, lock


def stats(times: list[float]) -> dict[str, float]:
    return {"median_s": statistics.median(times), "max_s": max(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--embedder", default="hashing")
    args = parser.parse_args()
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "run").mkdir(mode=0o700)
        env = {**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(home / "run"),
               "DELTAMEM_EMBEDDER": args.embedder, "DELTAMEM_HOOK_IDLE": "30"}
        db = home / ".deltamem" / "memory.db"
        path = socket_path(env, db)
        server, lock = hung(path)
        for event in ("user-prompt", "session-start"):
            runs = [call(env, db, event) for _ in range(args.calls)]
            rows[f"{event}, hung daemon"] = {**stats([t for t, _, _ in runs]),
                                             "exit_0": sum(rc == 0 for _, rc, _ in runs),
                                             "empty": sum(out == "" for _, _, out in runs)}
        server.close()
        lock.close()
        path.unlink(missing_ok=True)
        first = call(env, db, "user-prompt")  # no daemon: starts one, waits at most its bound
        rows["user-prompt, no daemon (starts one)"] = {**stats([first[0]]), "exit_0":
                                                       int(first[1] == 0), "empty": 0}
        for _ in range(200):
            if path.exists():
                break
            time.sleep(0.1)
        warm = [call(env, db, "user-prompt") for _ in range(args.calls)]
        rows["user-prompt, warm daemon (baseline)"] = {**stats([t for t, _, _ in warm]),
                                                       "exit_0": sum(rc == 0 for _, rc, _ in warm),
                                                       "empty": 0}
        ping = subprocess.run(
            [sys.executable, "-c", "import json; from deltamem_hook import target, ask; "
             f"print(json.dumps(ask(target({str(db)!r}, 'default', {args.embedder!r}), "
             "{'event': 'ping'}) or {}))"], env=env, text=True, capture_output=True, check=False)
        pid = json.loads(ping.stdout or "{}").get("output", {}).get("pid")
        if isinstance(pid, int):
            os.kill(pid, signal.SIGTERM)
    print("| call | calls | median | max | exit 0 |\n|---|---|---|---|---|")
    for name, row in rows.items():
        n = args.calls if "no daemon" not in name else 1
        print(f"| {name} | {n} | {row['median_s']:.2f} s | {row['max_s']:.2f} s | "
              f"{row['exit_0']}/{n} |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
