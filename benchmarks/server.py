"""REST server throughput and latency vs the same calls made in-process, per operation, on
SQLite and on PostgreSQL, measured in one run.

What is timed: every operation of the table a client calls often -- ``recall``, ``show``,
``list_nodes``, ``stats``, ``consolidate`` (dry run), ``record_outcome``, ``correct`` and
``learn`` -- from C concurrent client threads (one keep-alive httpx client each) against the real
server (uvicorn, one worker, in a subprocess on loopback, API keys on), and the same calls from C
threads on one in-process ``DeltaMem`` (the baseline), back to back, and again each after a
pause (``--pace-ms``: a caller that does other work between calls, as a server waits for its
next request). Every side starts from the same seeded memory and uses the same embedder; all
are up at once and each operation runs in ``--rounds`` interleaved rounds, so the machine's
other load weighs on every side alike. Checks: no request fails, and no episode is lost
(episodes stored == seeded + sent).

    python benchmarks/server.py [--clients 1] [--requests 200] [--embedder static] \
        [--db sqlite,postgres] [--url postgresql://...] [--baseline-src OTHER/src]

The ``bare`` stack serves the same library calls behind a bare ASGI callable (no framework, no
key, no validation) on uvicorn's httptools stack: the floor any app on that stack pays, measured
in the same run.

``--baseline-src`` serves another version of the code (e.g. ``git archive main`` unpacked) with
the httptools stack in the same run, as the side ``baseline``: a before/after comparison taken
under the same load.

Without ``--url`` (or $DELTAMEM_BENCH_PG_URL) a PostgreSQL server is started with scripts/pg.sh
for ``--db postgres`` and stopped afterwards. ``--embedder hashing`` (the test double) isolates
the server's own overhead from embedding cost. Prints a table and one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from deltamem.config import Settings
from deltamem.embed import make_embedder
from deltamem.engine.memory import DeltaMem
from deltamem.faces.server.keys import open_keys
from deltamem.formats.episodes import episode_from_dict

SEED = 40
SERVER = """
import sys, uvicorn
from deltamem.config import Settings
from deltamem.faces.server.rest import create_app
db, embedder, port, http, loop = sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:6]
app = create_app(db, embedder=embedder, settings=Settings(embedder=embedder))
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, http=http,
            loop=loop)
"""

# The floor: the same library calls behind a bare ASGI callable on the same uvicorn stack, with
# no routing framework, no API key, no validation and no access log; what is left is the socket,
# uvicorn, the JSON in and out and the call itself. Not a server to run: a reference that shows
# how much of a request's cost any app on this stack must pay.
SERVER_BARE = """
import json, sys, urllib.parse, uvicorn
from deltamem.config import Settings
from deltamem.engine.memory import DeltaMem
from deltamem.formats.episodes import episode_from_dict
db, embedder, port, http, loop = sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:6]
mem = DeltaMem.open(db, embedder=embedder, settings=Settings(embedder=embedder))

def call(path, query, body):
    parts = path.split("/")[4:]  # /v1/spaces/default/...
    if path == "/readyz":
        return mem.stats()
    if parts == ["recall"]:
        return mem.recall(**body)
    if parts == ["nodes"]:
        return mem.list_nodes(limit=int(query["limit"][0]))
    if parts[0] == "nodes" and len(parts) == 2:
        return mem.show(parts[1])
    if parts[0] == "nodes" and parts[2:] == ["correct"]:
        return mem.correct(parts[1], steps=body["steps"])
    if parts == ["stats"]:
        return mem.stats()
    if parts == ["consolidate"]:
        return mem.consolidate(dry_run=query["dry_run"] == ["true"])
    if parts == ["outcome"]:
        return mem.record_outcome(body["nodes"], body["success"])
    return mem.learn(episode_from_dict(body))

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    chunks, more = [], True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    raw = b"".join(chunks)
    query = urllib.parse.parse_qs(scope["query_string"].decode())
    answer = call(scope["path"], query, json.loads(raw) if raw else None)
    out = answer.model_dump_json().encode()
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out})

uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, http=http,
            loop=loop)
"""


def episode(worker: int, i: int) -> dict[str, Any]:
    """A distinct episode (new task and scene words) so every learn really writes."""
    return {"task": f"put object {worker}-{i} in receptacle {i % 7}",
            "env": f"a room {worker} with shelf {i} and a drawer {i % 5}",
            "success": i % 4 != 0, "score": None,
            "steps": [{"action": f"go to shelf {i}", "observation": f"You see object {i}."},
                      {"action": f"take object {worker}-{i}", "observation": "Taken."},
                      {"action": f"put object in receptacle {i % 7}", "observation": "Done."}]}


def query(worker: int, i: int) -> dict[str, Any]:
    return {"task": f"put object {i % SEED} in receptacle {i % 7}",
            "env": f"a room with shelf {i % SEED}"}


def run_clients(clients: int, requests: int,
                call: Callable[[int, int], object]) -> tuple[list[float], float, int]:
    """Run ``call(worker, i)`` from ``clients`` threads; return latencies (ms), wall s, errors."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    barrier = threading.Barrier(clients + 1)

    def work(w: int) -> None:
        barrier.wait()
        for i in range(requests):
            started = time.perf_counter()
            try:
                call(w, i)
            except Exception:  # counted, reported; the benchmark must show errors = 0
                errors[w] += 1
            latencies[w].append((time.perf_counter() - started) * 1000)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    return [x for row in latencies for x in row], wall, sum(errors)


def summary(latencies: list[float], wall: float, errors: int) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {"requests": len(ordered), "rps": round(len(ordered) / wall, 1),
            "p50_ms": round(statistics.median(ordered), 3),
            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 3), "errors": errors}


def seed(mem: DeltaMem) -> None:
    for i in range(SEED):
        mem.learn(episode_from_dict(episode(999, i)))


BENCH_OPS = ("recall", "show", "list_nodes", "stats", "consolidate", "record_outcome", "correct",
             "learn")


WARM_UP = ("recall", "show", "list_nodes", "stats", "consolidate")  # the ops that write nothing


def local_calls(mem: DeltaMem, ids: list[str]) -> dict[str, Callable[[int, int], object]]:
    """Each operation as the library calls it (the baseline)."""
    return {
        "recall": lambda w, i: mem.recall(**query(w, i)),
        "show": lambda w, i: mem.show(ids[i % len(ids)]),
        "list_nodes": lambda w, i: mem.list_nodes(limit=20),
        "stats": lambda w, i: mem.stats(),
        "consolidate": lambda w, i: mem.consolidate(dry_run=True),
        "record_outcome": lambda w, i: mem.record_outcome([ids[i % len(ids)]], True),
        "correct": lambda w, i: mem.correct(ids[i % len(ids)], steps=[f"step {w}-{i}"]),
        "learn": lambda w, i: mem.learn(episode_from_dict(episode(w, i))),
    }


def http_calls(pool: list[httpx.Client], ids: list[str]) -> dict[str, Callable[[int, int], object]]:
    """Each operation as a client sends it over HTTP (the same inputs)."""
    space = "/v1/spaces/default"

    def send(method: str, w: int, path: str, **kwargs: Any) -> None:
        pool[w].request(method, space + path, **kwargs).raise_for_status()

    return {
        "recall": lambda w, i: send("POST", w, "/recall", json=query(w, i)),
        "show": lambda w, i: send("GET", w, f"/nodes/{ids[i % len(ids)]}"),
        "list_nodes": lambda w, i: send("GET", w, "/nodes", params={"limit": 20}),
        "stats": lambda w, i: send("GET", w, "/stats"),
        "consolidate": lambda w, i: send("POST", w, "/consolidate", params={"dry_run": "true"}),
        "record_outcome": lambda w, i: send("POST", w, "/outcome", json={
            "nodes": [ids[i % len(ids)]], "success": True}),
        "correct": lambda w, i: send("POST", w, f"/nodes/{ids[i % len(ids)]}/correct",
                                     json={"steps": [f"step {w}-{i}"]}),
        "learn": lambda w, i: send("POST", w, "/learn", json=episode(w, i)),
    }


def cpu_seconds(pid: int | None = None) -> float:
    """CPU time (user + system) of this process, or of process ``pid`` (Linux /proc)."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Side:
    """One way of calling the memory: in-process, or over HTTP to a server process (``pid``),
    whose CPU time is the memory's side of the cost."""

    calls: dict[str, Callable[[int, int], object]]
    episodes: Callable[[], int]
    close: Callable[[], None]
    pid: int | None = None


def measure(sides: dict[str, Side], clients: int, requests: int,
            rounds: int) -> dict[str, dict[str, Any]]:
    """Each operation on every side, in ``rounds`` interleaved rounds (the order reversed every
    other round), so that the machine's other load weighs on every side alike; per side and
    operation the summary and the CPU time its memory's side spent per request (requests per
    CPU-second is the rate per core, which other load skews less than wall time)."""
    out: dict[str, dict[str, Any]] = {name: {} for name in sides}
    per_round = max(1, requests // rounds)
    for side in sides.values():  # first calls (caches, a server's first read) are not timed
        for op in WARM_UP:
            for i in range(5):
                side.calls[op](0, i)
    for op in BENCH_OPS:
        latencies: dict[str, list[float]] = {name: [] for name in sides}
        wall = dict.fromkeys(sides, 0.0)
        cpu = dict.fromkeys(sides, 0.0)
        errors = dict.fromkeys(sides, 0)
        for r in range(rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for name in order:
                side = sides[name]
                call = side.calls[op]
                before = cpu_seconds(side.pid)
                lat, seconds, failed = run_clients(clients, per_round,
                                                   shifted(call, r * per_round))
                cpu[name] += cpu_seconds(side.pid) - before
                latencies[name] += lat
                wall[name] += seconds
                errors[name] += failed
        for name in sides:
            out[name][op] = summary(latencies[name], wall[name], errors[name])
            out[name][op]["cpu_ms"] = round(cpu[name] * 1000 / len(latencies[name]), 3)
    for name, side in sides.items():
        out[name]["episodes_stored"] = side.episodes()
    return out


def shifted(call: Callable[[int, int], object], by: int) -> Callable[[int, int], object]:
    """``call`` with its request number moved on by ``by`` (the requests of later rounds)."""
    return lambda w, i: call(w, by + i)


def seeded(db: str, embedder: str) -> list[str]:
    """Seed the memory at ``db``; the ids of its task-tree nodes."""
    with DeltaMem.open(db, embedder=embedder, settings=Settings(embedder=embedder)) as mem:
        seed(mem)
        return [row.id for row in mem.list_nodes("task").nodes]


def in_process(db: str, embedder: str, pace_s: float = 0.0) -> Side:
    """The baseline: the calls on one in-process memory, back to back, or each after a pause
    of ``pace_s`` (a caller that does other work between calls, as a server waits for its
    next request: the memory's data has left the CPU caches by then)."""
    ids = seeded(db, embedder)
    mem = DeltaMem.open(db, embedder=embedder, settings=Settings(embedder=embedder))
    calls = local_calls(mem, ids)
    if pace_s:
        calls = {op: paced(call, pace_s) for op, call in calls.items()}
    return Side(calls, lambda: int(mem.stats().episodes), mem.close)


def paced(call: Callable[[int, int], object], pause_s: float) -> Callable[[int, int], object]:
    def after_a_pause(w: int, i: int) -> object:
        time.sleep(pause_s)
        return call(w, i)

    return after_a_pause


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# uvicorn's HTTP parser and event loop: pure Python (h11, asyncio; what a plain `pip install
# uvicorn` runs) and the C ones the server extra installs (httptools, uvloop; what `auto` picks).
STACKS = {"h11": ("h11", "asyncio"), "httptools": ("httptools", "uvloop"),
          "bare": ("httptools", "uvloop")}  # SERVER_BARE on the httptools stack


def over_http(db: str, embedder: str, clients: int, stack: str = "httptools",
              src: str | None = None) -> Side:
    """A server of this code (or of the ``src`` folder) over a seeded ``db``, started and
    ready, with one keep-alive client per client thread."""
    ids = seeded(db, embedder)
    keys = open_keys(db)
    secret = keys.create(["default"], name="bench")[1]
    keys.close()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER_BARE if stack == "bare" else SERVER,
                               db, embedder, str(port),
                               *STACKS[stack]],
                              env={**os.environ, "PYTHONUNBUFFERED": "1",
                                   **({"PYTHONPATH": src} if src else {})})
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, server)
    except BaseException:
        server.terminate()
        server.wait(timeout=30)
        raise
    pool = [httpx.Client(base_url=base, headers={"Authorization": f"Bearer {secret}"},
                         timeout=120) for _ in range(clients)]

    def close() -> None:
        for client in pool:
            client.close()
        server.terminate()
        server.wait(timeout=30)

    return Side(http_calls(pool, ids),
                lambda: int(pool[0].get("/v1/spaces/default/stats").json()["episodes"]),
                close, server.pid)


def wait_ready(base: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError("server exited during start-up")
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("server did not become ready")


def databases(kinds: list[str], folder: Path, url: str | None
              ) -> tuple[dict[str, tuple[str, str]], Callable[[], None]]:
    """Per database kind, the in-process and the HTTP side's database (fresh, apart)."""
    out: dict[str, tuple[str, str]] = {}
    stop: Callable[[], None] = lambda: None  # noqa: E731
    if "sqlite" in kinds:
        out["sqlite"] = (str(folder / "inproc.db"), str(folder / "server.db"))
    if "postgres" in kinds:
        from recall_pg import start_server, with_schema

        if not url:
            url, stop = start_server()
        out["postgres"] = (with_schema(url, "bench_inproc"), url)
    return out, stop


def with_fresh_schema(url: str, stack: str) -> str:
    from recall_pg import with_schema

    return with_schema(url, f"bench_http_{stack}")


def sides_of(stacks: str, baseline_src: str | None) -> list[str]:
    """The server sides of a run: each stack, then the other version's server if any."""
    return stacks.split(",") + (["baseline"] if baseline_src else [])


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--requests", type=int, default=200, help="per client per operation")
    parser.add_argument("--embedder", default="static")
    parser.add_argument("--db", default="sqlite,postgres", help="sqlite, postgres or both")
    parser.add_argument("--url", default=os.environ.get("DELTAMEM_BENCH_PG_URL"))
    parser.add_argument("--stacks", default="h11,httptools,bare",
                        help="uvicorn stacks to serve with (h11: the pure-Python baseline; "
                        "bare: the library behind a bare ASGI callable on httptools, the floor)")
    parser.add_argument("--baseline-src", default=None,
                        help="a src folder of another version to serve too (side 'baseline')")
    parser.add_argument("--rounds", type=int, default=4,
                        help="interleaved rounds per operation (requests split among them)")
    parser.add_argument("--pace-ms", type=float, default=2.0,
                        help="also time the in-process calls each after this pause (0: off)")
    args = parser.parse_args()
    baseline_src = str(Path(args.baseline_src).resolve()) if args.baseline_src else None
    make_embedder(args.embedder)  # fail early on a bad spec or missing weights
    load_before = os.getloadavg()
    sent = args.clients * max(1, args.requests // args.rounds) * args.rounds
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        dbs, stop = databases(args.db.split(","), Path(tmp), args.url)
        try:
            for kind, (local_db, served_db) in dbs.items():
                opened: dict[str, Side] = {}
                try:
                    opened["in_process"] = in_process(local_db, args.embedder)
                    if args.pace_ms:
                        paced_db = (with_fresh_schema(served_db, "paced") if kind == "postgres"
                                    else f"{local_db}-paced")
                        opened["in_process_paced"] = in_process(paced_db, args.embedder,
                                                                args.pace_ms / 1000)
                    for side in sides_of(args.stacks, baseline_src):
                        stack = "httptools" if side == "baseline" else side
                        db = served_db if side == "httptools" else f"{served_db}-{side}"
                        if kind == "postgres":
                            db = with_fresh_schema(served_db, side)
                        opened[side] = over_http(db, args.embedder, args.clients, stack,
                                                 baseline_src if side == "baseline" else None)
                    sides = measure(opened, args.clients, args.requests, args.rounds)
                finally:
                    for side_open in opened.values():
                        side_open.close()
                base = sides["in_process"]
                servers = sides_of(args.stacks, baseline_src)
                results[kind] = {
                    **sides,
                    "lost_episodes": {side: SEED + sent - data["episodes_stored"]
                                      for side, data in sides.items()},
                    "ratio_rps_over_in_process": {
                        stack: {op: round(sides[stack][op]["rps"] / base[op]["rps"], 2)
                                for op in BENCH_OPS} for stack in servers},
                    # requests per CPU-second of the server over calls per CPU-second in-process
                    # (None where the server's CPU time was below the clock's resolution: too
                    # few requests to measure)
                    "ratio_per_core": {
                        stack: {op: round(base[op]["cpu_ms"] / sides[stack][op]["cpu_ms"], 2)
                                if sides[stack][op]["cpu_ms"] > 0 else None
                                for op in BENCH_OPS} for stack in servers},
                    # the same over the paced in-process calls (each after a pause)
                    "ratio_per_core_paced": {
                        stack: {op: round(sides["in_process_paced"][op]["cpu_ms"]
                                          / sides[stack][op]["cpu_ms"], 2)
                                if sides[stack][op]["cpu_ms"] > 0 else None
                                for op in BENCH_OPS} for stack in servers}
                    if args.pace_ms else {}}
        finally:
            stop()
    report: dict[str, Any] = {
        "benchmark": "server", "embedder": args.embedder, "clients": args.clients,
        "requests_per_client": args.requests, "cpus": os.cpu_count(),
        "python": platform.python_version(), "workers": 1, "baseline_src": baseline_src,
        "rounds": args.rounds, "pace_ms": args.pace_ms,
        # The machine's other load (1/5/15-minute averages) before and after: per-core ratios
        # hold under load better than wall-clock rates, but not perfectly.
        "load_average": {"before": load_before, "after": os.getloadavg()}, "results": results}
    stacks = sides_of(args.stacks, baseline_src)
    paced_on = bool(args.pace_ms)
    print(f"{'db':9} {'op':15} {'in-proc':>8} " + (f"{'paced':>8} " if paced_on else "")
          + " ".join(f"{stack:>10} {'overhead':>8} {'per core':>8}"
                     + (f" {'(paced)':>8}" if paced_on else "") for stack in stacks)
          + "   (CPU ms per request; overhead: server - in-process; per core: in-process CPU"
          " / server CPU)")
    for kind, data in results.items():
        for op in BENCH_OPS:
            base = data["in_process"][op]
            paced_cell = f"{data['in_process_paced'][op]['cpu_ms']:8.3f} " if paced_on else ""
            cells = " ".join(
                f"{data[stack][op]['cpu_ms']:10.3f} "
                f"{data[stack][op]['cpu_ms'] - base['cpu_ms']:8.3f} "
                f"{_ratio(data['ratio_per_core'][stack][op]):>8}"
                + (f" {_ratio(data['ratio_per_core_paced'][stack][op]):>8}" if paced_on else "")
                for stack in stacks)
            print(f"{kind:9} {op:15} {base['cpu_ms']:8.3f} {paced_cell}{cells}")
        print(f"{kind}: lost episodes {data['lost_episodes']}")
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f} "
          f"({os.cpu_count()} CPUs)")
    print(json.dumps(report))
    failed = any(side[op]["errors"] for d in results.values()
                 for name, side in d.items()
                 if name in ("in_process", "in_process_paced", *stacks)
                 for op in BENCH_OPS)
    if failed or any(v for d in results.values() for v in d["lost_episodes"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
