"""Record what the real clients write, as test fixtures
(``tests/fixtures/clients/<client>-<version>/<scenario>/session-<n>/``):

    PYTHONPATH=src .venv/bin/python scripts/realclients/record.py [--client claude-code|codex]

Each scenario is one real run (``tests/realclients/harness.py``): the pinned CLI, the plugin
installed through its own commands, a temporary git repository, the scripted model, no network.
Kept per scenario and session: the client's transcript / rollout (``transcript.jsonl``), the hook
payloads as the client sent them with the transcript's size at each call (``hooks.json``), the
client's own stdout events (``stdout.jsonl``) and what the model received (``requests.json``:
per request, its size and the deltamem notes in it). Machine-specific paths are replaced
(:func:`scrub`): the run folder by ``/home/dev``, the repository by ``/home/dev/calc``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "realclients"))

import harness as h  # noqa: E402
from model_server import offers_tools  # noqa: E402

OUT = REPO / "tests" / "fixtures" / "clients"
PROMPT_1 = "The tests fail. Please fix the bug in calc.py."
PROMPT_2 = "test_add is failing again, please fix calc.py"


def scenarios(client: str) -> dict[str, list[h.Session]]:
    found = {
        # Session 1 fixes the bug; session 2 (the bug put back) gets the notes.
        "fix-pass": [h.Session(PROMPT_1, h.fix_the_test(True)),
                     h.Session(PROMPT_2, h.fix_the_test(True), before="git checkout -q calc.py")],
        # The final run still fails; the reply does not say so.
        "fix-fail": [h.Session(PROMPT_1, h.fix_the_test(False))],
    }
    if client == "codex":
        found["code-mode"] = [h.Session(PROMPT_1, h.fix_the_test(False), code_mode=True)]
    return found


def scrub(text: str, root: str) -> str:
    """``text`` with this machine's paths replaced (the run folder, the checkout, the venv)."""
    pairs = [(f"{root}/calc", "/home/dev/calc"), (f"{root}/home", "/home/dev"),
             (root, "/home/dev/run"), (sys.prefix, "/opt/venv"), (str(REPO), "/opt/deltamem")]
    for old, new in pairs:
        text = text.replace(old, new)
        text = text.replace(old.replace("/", "-"), new.replace("/", "-"))
        text = text.replace(old.replace("/", "\\/"), new.replace("/", "\\/"))
    return re.sub(r"/tmp/deltamem-[\w-]+", "/home/dev/run", text)


def conversation(client: str, body: dict[str, Any]) -> list[Any] | None:
    return body.get("messages") if client == "claude-code" else body.get("input")


def record(client: str) -> None:
    folder = OUT / f"{client}-{h.VERSIONS[client]}"
    for name, sessions in scenarios(client).items():
        run = h.run_sessions(client, sessions, record_hooks=True, keep=True)
        for i, session in enumerate(run.sessions, 1):
            where = folder / name / f"session-{i}"
            where.mkdir(parents=True, exist_ok=True)
            raw = session.transcript.encode()
            hooks = [{"event": x["event"],
                      # the size as the scrubbed fixture counts it: bytes and whole lines
                      "transcript_size": len(scrub(raw[:x["transcript_size"]].decode(
                          errors="replace"), run.root).encode()) if x["transcript_size"] >= 0
                      else -1,
                      "transcript_lines": raw[:max(x["transcript_size"], 0)].count(b"\n"),
                      "options": x["options"],
                      "payload": x["payload"]} for x in session.hooks]
            requests = [{"path": r["path"], "model": r["body"].get("model"),
                         "items": len(conversation(client, r["body"]) or []),
                         "notes": h.notes_received(client, [r])}
                        for r in session.requests if offers_tools(r["body"])]
            files = {"transcript.jsonl": session.transcript,
                     "hooks.json": json.dumps(hooks, indent=1) + "\n",
                     "stdout.jsonl": session.stdout,
                     "requests.json": json.dumps(requests, indent=1) + "\n"}
            for file, text in files.items():
                (where / file).write_text(scrub(text, run.root))
            print(f"{client} {name} session {i}: rc {session.rc}, {session.wall_s:.1f} s, "
                  f"{len(hooks)} hook calls -> {where.relative_to(REPO)}")
        import shutil

        shutil.rmtree(run.root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--client", choices=sorted(h.VERSIONS), action="append")
    args = parser.parse_args()
    for client in args.client or sorted(h.VERSIONS):
        record(client)


if __name__ == "__main__":
    main()
