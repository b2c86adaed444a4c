"""The real-client done-when measurement: the scripted two-session run, N times per client.

    PYTHONPATH=src .venv/bin/python scripts/realclients/measure.py --repeats 20 [--client ...]
        [--json results/realclients.json] [--without mcp]

Each repeat is two runs of the same scripts in fresh homes and repositories
(``tests/realclients/harness.py``): one with the deltamem plugin installed through the client's
own plugin commands, one without it (the baseline, same repeat, alternating which goes first).
Session 1 is fix-the-test; in odd repeats its last test run still fails (under Codex that is
unified exec's ``Process exited with code 1``), in even ones it passes; its reply never says
which. Session 2, in the same repository with the bug put back, asks again.

``--cold-second`` stops the hook daemon before session 2 (as when it idled out between two
sessions), records the hook calls, and reports how long session 2's first prompt hook took (the
real hook's own time, from the recording wrapper) and whether the notes still arrived.

Per client it reports how many repeats had: session 1's episode complete (its last test run
with its output, and the final reply), the right outcome, session 2 receiving the memory's
notes; and the wall time the plugin added per session (median and mean over repeats of the
with-plugin session minus the baseline session). One CLI process runs at a time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from realclients import harness as h  # noqa: E402

PROMPT_1 = "The tests fail. Please fix the bug in calc.py."
PROMPT_2 = "test_add is failing again, please fix calc.py"
REPLY = "I changed add() in calc.py, which subtracted its arguments."


def sessions(passes: bool, cold: bool = False) -> list[h.Session]:
    return [h.Session(PROMPT_1, h.fix_the_test(passes, REPLY)),
            h.Session(PROMPT_2, h.fix_the_test(True, REPLY), before="git checkout -q calc.py",
                      cold=cold)]


def check(run: h.RunResult, passes: bool) -> dict[str, Any]:
    """What one with-plugin run shows (see the module docstring)."""
    first = [e for e in run.episodes if e["task"] == PROMPT_1]
    episode = first[0] if len(first) == 1 else None
    runs = [s for s in (episode or {}).get("steps", []) if "pytest" in s.get("action", "")]
    summary = "2 passed" if passes else "1 failed"
    complete = bool(episode and runs and summary in (runs[-1].get("observation") or "")
                    and episode["steps"][-1]["action"] == f"reply: {REPLY}")
    return {"rc": [s.rc for s in run.sessions], "complete": complete,
            "outcome": bool(episode) and episode["success"] is passes,
            "notes": bool(h.notes_received(run.client, run.sessions[1].requests)),
            # the real hook's own time for session 2's first prompt (recorded runs only)
            "first_prompt_s": next((e["took_s"] for e in run.sessions[1].hooks
                                    if e["event"] == "user-prompt"), None),
            "rule": (episode or {}).get("meta", {}).get("outcome_rule"),
            "wall": [s.wall_s for s in run.sessions]}


def measure(client: str, repeats: int, without: list[str],
            cold: bool = False) -> dict[str, Any]:
    rows = []
    for i in range(repeats):
        passes = i % 2 == 1
        order = (True, False) if i % 2 == 0 else (False, True)
        runs = {}
        for plugin in order:
            runs[plugin] = h.run_sessions(client, sessions(passes, cold), plugin=plugin,
                                          without=without if plugin else (),
                                          record_hooks=cold and plugin)
        row = check(runs[True], passes)
        row["baseline_wall"] = [s.wall_s for s in runs[False].sessions]
        row["baseline_rc"] = [s.rc for s in runs[False].sessions]
        row["passes"] = passes
        rows.append(row)
        print(f"{client} {i + 1}/{repeats}: {json.dumps(row)}", flush=True)
    added = [w - b for r in rows for w, b in zip(r["wall"], r["baseline_wall"], strict=True)]
    added_1 = [r["wall"][0] - r["baseline_wall"][0] for r in rows]
    added_2 = [r["wall"][1] - r["baseline_wall"][1] for r in rows]
    return {"client": client, "version": h.VERSIONS[client], "repeats": repeats,
            "without": without,
            "complete": sum(r["complete"] for r in rows),
            "outcome": sum(r["outcome"] for r in rows),
            "notes": sum(r["notes"] for r in rows),
            "failing_runs": sum(not r["passes"] for r in rows),
            "added_s_median": statistics.median(added),
            "added_s_mean": statistics.fmean(added),
            "added_s_session1_median": statistics.median(added_1),
            "added_s_session2_median": statistics.median(added_2),
            "baseline_s_median": statistics.median(
                [b for r in rows for b in r["baseline_wall"]]),
            "cold_second_session": cold,
            "first_prompt_s_median": statistics.median(firsts) if (firsts := [
                r["first_prompt_s"] for r in rows if r["first_prompt_s"] is not None]) else None,
            "rows": rows}


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| client | repeats | episode complete | right outcome | notes in session 2 | "
             "plugin adds per session, median (mean) | session 1 / session 2 median | "
             "baseline session median |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        n = r["repeats"]
        lines.append(
            f"| {r['client']} {r['version']} | {n} ({r['failing_runs']} with a failing last "
            f"run) | {r['complete']}/{n} | {r['outcome']}/{n} | {r['notes']}/{n} | "
            f"{r['added_s_median']:+.2f} s ({r['added_s_mean']:+.2f} s) | "
            f"{r['added_s_session1_median']:+.2f} s / {r['added_s_session2_median']:+.2f} s | "
            f"{r['baseline_s_median']:.2f} s |")
    colds = [r for r in results if r["first_prompt_s_median"] is not None]
    if colds:
        lines += ["", "| client | session 2 started with no daemon: first prompt hook, median | "
                  "max | notes in session 2 |", "|---|---|---|---|"]
        for r in colds:
            firsts = [x["first_prompt_s"] for x in r["rows"] if x["first_prompt_s"] is not None]
            lines.append(f"| {r['client']} {r['version']} | "
                         f"{1000 * r['first_prompt_s_median']:.0f} ms | "
                         f"{1000 * max(firsts):.0f} ms | {r['notes']}/{r['repeats']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--client", choices=sorted(h.VERSIONS), action="append")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--without", choices=["mcp"], action="append", default=[],
                        help="Leave a part of the plugin out (mcp: its MCP server), to see "
                             "what it costs.")
    parser.add_argument("--cold-second", action="store_true",
                        help="Stop the hook daemon before session 2 (as after it idled out) "
                             "and report how long session 2's first prompt hook took and "
                             "whether its notes arrived.")
    args = parser.parse_args()
    started = time.time()
    results = [measure(client, args.repeats, args.without, cold=args.cold_second)
               for client in args.client or sorted(h.VERSIONS)]
    print(table(results))
    print(json.dumps([{k: v for k, v in r.items() if k != "rows"} for r in results]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"results": results,
                                         "seconds": time.time() - started}, indent=1))


if __name__ == "__main__":
    main()
