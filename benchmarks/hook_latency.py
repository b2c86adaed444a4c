"""How long an agent waits for deltamem's hooks: cold (in process, as before) vs warm (daemon).

Runs the plugin's own hook command lines (``plugins/deltamem/hooks/hooks.json``) under bash, as
Claude Code does, against a memory seeded with the recorded transcripts of
``tests/fixtures/transcripts``, in a temporary HOME:

* ``user-prompt cold``: ``DELTAMEM_HOOK_DAEMON=0`` -- every call imports deltamem and loads the
  embedder (the behaviour before the daemon: the baseline, measured in the same run);
* ``user-prompt warm``: the daemon answers (its start-up call is reported apart);
* ``user-prompt warm, deltamem hook``: the same through the full CLI (``deltamem hook``), which
  still pays the CLI's import, for installs whose ``deltamem-hook`` script is missing;
* ``stop cold`` / ``stop spooled``: the end-of-turn hook, learning in process vs spooling;
* ``first prompt of a session, no daemon running``: what a session started after the daemon
  idled out waits for at its first prompt: ``SessionStart`` (which starts the daemon and
  answers at once; its own row) then ``UserPromptSubmit`` right away, as in print mode (the
  daemon stopped before each pair). A session within ``DELTAMEM_HOOK_IDLE`` of the last finds
  the daemon warm: its first prompt is a ``user-prompt warm`` call. The daemon starts with the
  gist vectors the last one kept (``hookd.KEPT_GISTS``); the ``[no kept gists]`` row removes
  them before each pair, and ``--baseline-ref`` adds a row for another version of the package,
  all interleaved.

``--memory`` times the same calls against a copy of an existing memory (your own
``~/.deltamem/memory.db``, or one a benchmark kept) instead of the recorded transcripts, with
the prompts sent from ``--cwd`` (the project's folder in that memory) and ``--prompt``.

``deltamem-hook`` is the console script of the wheel; when this environment lacks it (an
editable install made before it existed), an equivalent launcher is put on PATH (the two lines
pip writes). Prints a table and one JSON object (``--json-out`` also writes it to a file).

Usage:
    .venv/bin/python benchmarks/hook_latency.py --calls 20 --cold-calls 5
    .venv/bin/python benchmarks/hook_latency.py --memory ~/.deltamem/memory.db \
        --cwd ~/code/shop --prompt "fix the failing checkout test"
    .venv/bin/python benchmarks/hook_latency.py --embedder hashing   # no model files needed
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HOOKS = ROOT / "plugins" / "deltamem" / "hooks" / "hooks.json"
FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"
PROMPTS = ["the checkout test fails with a wrong total, fix it", "deploy the shop to production",
           "run the whole test suite", "why does the discount apply twice?",
           "add a migration for the orders table"]


def commands() -> dict[str, str]:
    config = json.loads(HOOKS.read_text())
    return {event: groups[0]["hooks"][0]["command"] for event, groups in config["hooks"].items()}


def timed(command: str, payload: dict[str, Any], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(["bash", "-c", command], input=json.dumps(payload), text=True,
                          capture_output=True, env=env, timeout=300, check=False)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise SystemExit(f"hook failed ({done.returncode}): {done.stderr.strip()}")
    return elapsed, done.stdout


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return {"n": len(samples), "p50_ms": round(statistics.median(ordered), 1),
            "p95_ms": round(p95, 1), "mean_ms": round(statistics.fmean(ordered), 1),
            "max_ms": round(ordered[-1], 1)}


CWD = "/home/dev/shop"  # the project folder of the recorded transcripts


def payload(event: str, home: Path, cwd: str = CWD, **more: Any) -> dict[str, Any]:
    return {"session_id": "bench", "cwd": cwd, "hook_event_name": event,
            "transcript_path": str(FIXTURES / "claude_code_success.jsonl"), **more}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20, help="warm calls per variant")
    parser.add_argument("--cold-calls", type=int, default=5, help="cold calls per variant")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument("--baseline-ref", default=None, metavar="REF",
                        help="also time a session's first prompt (no daemon running) with the "
                             "package of this git ref (e.g. main), interleaved with this tree's")
    parser.add_argument("--memory", type=Path, default=None, metavar="DB",
                        help="time the calls against a copy of this memory (a SQLite file) "
                             "instead of one seeded with the recorded transcripts")
    parser.add_argument("--cwd", default=CWD,
                        help="the project folder the hook calls come from (default: the "
                             "recorded transcripts' project)")
    parser.add_argument("--prompt", action="append", default=None,
                        help="a prompt to send (repeatable; default: five about the recorded "
                             "project)")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="deltamem-hook-bench-"))
    home, bindir, runtime = tmp / "home", tmp / "bin", tmp / "run"
    for d in (home, bindir, runtime):
        d.mkdir(mode=0o700)
    launcher = shutil.which("deltamem-hook")
    if launcher is None:  # what pip writes for the console script
        script = bindir / "deltamem-hook"
        script.write_text(f"#!{sys.executable}\nimport sys\nfrom deltamem_hook import main\n"
                          "sys.exit(main())\n")
        script.chmod(0o755)
    path = f"{bindir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    # An installed wheel has its bytecode compiled; a checkout run with PYTHONDONTWRITEBYTECODE
    # would compile every module on every call, in both arms. Let the first calls write it.
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base = {**environ, "HOME": str(home), "PATH": path, "XDG_RUNTIME_DIR": str(runtime),
            "DELTAMEM_EMBEDDER": args.embedder, "DELTAMEM_HOOK_IDLE": "300"}
    cold_env = {**base, "DELTAMEM_HOOK_DAEMON": "0"}
    cmd = commands()
    cli_prompt = cmd["UserPromptSubmit"].replace(
        "$(command -v deltamem-hook || echo deltamem hook)", "deltamem hook")
    results: dict[str, Any] = {"embedder": args.embedder, "launcher": launcher or "pip-style",
                               "machine": {"cpus": os.cpu_count(),
                                           "load1": round(os.getloadavg()[0], 2)}}
    texts = args.prompt or PROMPTS
    kept = home / ".deltamem" / ".deltamem-hooks" / "gists.npz"  # hookd.KEPT_GISTS
    try:
        if args.memory is not None:
            (home / ".deltamem").mkdir(mode=0o700)
            shutil.copyfile(args.memory, home / ".deltamem" / "memory.db")
        else:  # seed: learn the recorded turns in process
            for name in ("claude_code_success.jsonl", "claude_code_failure.jsonl",
                         "codex_rollout.jsonl"):
                timed(cmd["Stop"], payload("Stop", home, transcript_path=str(FIXTURES / name)),
                      cold_env)
        prompts = [payload("UserPromptSubmit", home, args.cwd, prompt=texts[i % len(texts)])
                   for i in range(max(args.calls, args.cold_calls))]
        rows: dict[str, list[float]] = {}
        rows["user-prompt cold (no daemon; baseline)"] = [
            timed(cmd["UserPromptSubmit"], p, cold_env)[0] for p in prompts[: args.cold_calls]]
        first, out = timed(cmd["UserPromptSubmit"], prompts[0], base)
        results["first_call_starts_daemon_ms"] = round(first, 1)
        results["warm_answer_injects"] = bool(out.strip())
        rows["user-prompt warm (daemon)"] = [timed(cmd["UserPromptSubmit"], p, base)[0]
                                             for p in prompts[: args.calls]]
        rows["user-prompt daemon round trip only (no process start)"] = _round_trips(
            home, prompts[: args.calls], base)
        rows["session-start warm (daemon)"] = [
            timed(cmd["SessionStart"], payload("SessionStart", home, args.cwd), base)[0]
            for _ in range(args.calls)]
        # The session starts above had the daemon embed the project's gists ahead and keep
        # them: wait for the file to settle, and start each pair below from this copy of it.
        primed = _settled(kept, tmp / "gists.primed.npz")
        rows["user-prompt warm, via `deltamem hook`"] = [
            timed(cli_prompt, p, base)[0] for p in prompts[: args.cold_calls]]
        rows["stop cold (learns in process; baseline)"] = [
            timed(cmd["Stop"], payload("Stop", home), cold_env)[0]
            for _ in range(args.cold_calls)]
        rows["stop spooled (background learner)"] = [
            timed(cmd["Stop"], payload("Stop", home), base)[0] for _ in range(args.calls)]
        arms = {"": base, " [no kept gists]": base}
        if args.baseline_ref:
            arms[f" [{args.baseline_ref}]"] = {**base, "PYTHONPATH": str(
                _archive(args.baseline_ref, tmp / "baseline"))}
        results["gists_kept"] = primed is not None
        notes: dict[str, int] = {}
        for p in prompts[: args.cold_calls]:
            for arm, arm_env in arms.items():  # interleaved: the arms see the same load
                _stop_daemons(runtime)
                kept.unlink(missing_ok=True)
                if primed is not None and arm == "":
                    shutil.copyfile(primed, kept)
                start = timed(cmd["SessionStart"], payload("SessionStart", home, args.cwd),
                              arm_env)[0]
                first, said = timed(cmd["UserPromptSubmit"], p, arm_env)
                rows.setdefault(f"session-start, no daemon running (starts it){arm}",
                                []).append(start)
                rows.setdefault(f"first prompt of a session, no daemon running{arm}",
                                []).append(first)
                notes[arm] = notes.get(arm, 0) + bool(said.strip())
        results["first_prompt_notes"] = {arm.strip(" []") or "this tree": f"{n}/{args.cold_calls}"
                                         for arm, n in notes.items()}
        results["rows"] = {name: summary(samples) for name, samples in rows.items()}
    finally:
        _stop_daemons(runtime)
        shutil.rmtree(tmp, ignore_errors=True)

    width = max(len(n) for n in results["rows"])
    print(f"{'hook call'.ljust(width)}  {'n':>3}  {'p50 ms':>8}  {'p95 ms':>8}  {'max ms':>8}")
    for name, row in results["rows"].items():
        print(f"{name.ljust(width)}  {row['n']:>3}  {row['p50_ms']:>8}  {row['p95_ms']:>8}  "
              f"{row['max_ms']:>8}")
    print("first prompts (no daemon) that got notes: " + ", ".join(
        f"{arm} {n}" for arm, n in results["first_prompt_notes"].items()))
    print(f"first call (starts the daemon): {results['first_call_starts_daemon_ms']} ms; "
          f"embedder {args.embedder}; load {results['machine']['load1']} on "
          f"{results['machine']['cpus']} cpus")
    text = json.dumps(results)
    print(text)
    if args.json_out:
        args.json_out.write_text(text + "\n")


def _archive(ref: str, folder: Path) -> Path:
    """The ``src`` folder of ``ref`` (``git archive``), to run as the baseline's package."""
    folder.mkdir()
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "src"], capture_output=True,
                         check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=tar, check=True)
    return folder / "src"


def _round_trips(home: Path, prompts: list[dict[str, Any]], env: dict[str, str]) -> list[float]:
    """The daemon's share: the same request over its socket from this process."""
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        from deltamem_hook import ask, target

        t = target(str(home / ".deltamem" / "memory.db"), "default", None)
        out = []
        for p in prompts:
            started = time.perf_counter()
            answer = ask(t, {"event": "user-prompt", "payload": p, "budget_tokens": 800})
            out.append((time.perf_counter() - started) * 1000)
            if answer is None or "error" in answer:
                raise SystemExit(f"daemon did not answer: {answer}")
        return out
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _settled(path: Path, copy: Path, limit: float = 120.0) -> Path | None:
    """Wait (at most ``limit`` seconds) until ``path`` exists and has not changed for two
    seconds, and copy it to ``copy``; None if it never came."""
    deadline, last = time.monotonic() + limit, None
    while time.monotonic() < deadline:
        stamp = path.stat().st_mtime_ns if path.exists() else None
        if stamp is not None and stamp == last:
            shutil.copyfile(path, copy)
            return copy
        last = stamp
        time.sleep(2.0)
    return None


def _stop_daemons(runtime: Path) -> None:
    """SIGTERM the daemons this run started (found by their sockets' lock holders)."""
    for sock in list(runtime.glob("hookd-*.sock")):
        code = ("import json,sys,socket; s=socket.socket(socket.AF_UNIX); s.settimeout(5); "
                f"s.connect({str(sock)!r}); s.sendall(b'{{\"event\": \"ping\"}}\\n'); "
                "print(json.loads(s.recv(65536))['output']['pid'])")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=False)
        if done.returncode == 0 and done.stdout.strip().isdigit():
            pid = int(done.stdout.strip())
            os.kill(pid, signal.SIGTERM)
            for _ in range(200):  # gone, and its socket with it
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    if not sock.exists():
                        break
                time.sleep(0.05)


if __name__ == "__main__":
    main()
