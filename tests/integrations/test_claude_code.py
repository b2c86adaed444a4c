"""The Claude Code / Codex plugin: its hook commands, run exactly as hooks.json spells them, on
recorded transcripts in both clients' JSONL formats; and its MCP server config.

The hook commands run in bash with HOME set to a temporary folder (where the plugin keeps its
database) and the hashing TEST embedder chosen through DELTAMEM_EMBEDDER; nothing else is a
double. Fixtures: tests/fixtures/transcripts/ (a Claude Code session of two requests, a Claude
Code session whose deploy is refused, a Codex rollout).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from deltamem.engine.memory import DeltaMem
from deltamem.integrations.claude_code import last_turn, read_transcript, scene, turn_outcome
from helpers import TEST_SETTINGS

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "plugins" / "deltamem"
FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"
CWD = "/home/dev/shop"
REQUEST = "the checkout test fails with a wrong total, fix it"


def hook_commands() -> dict[str, str]:
    config = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())
    return {event: groups[0]["hooks"][0]["command"] for event, groups in config["hooks"].items()}


def environment(home: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(home), "DELTAMEM_EMBEDDER": "hashing",
            "DELTAMEM_HOOK_DAEMON": "0",  # in process: each hook done when it returns
            "DELTAMEM_TAU_TASK": str(TEST_SETTINGS.tau_task),
            "DELTAMEM_TAU_ENV": str(TEST_SETTINGS.tau_env),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def run_hook(home: Path, event: str,
             payload: dict[str, Any] | str) -> subprocess.CompletedProcess[str]:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(["bash", "-c", hook_commands()[event]], input=text, text=True,
                          capture_output=True, env=environment(home), timeout=120, check=False)


def claude_payload(event: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": "5f0c6f2e-8d7b-4c1e-9a51-2b7d4e9c1a10", "cwd": CWD,
            "hook_event_name": event, "permission_mode": "default",
            "transcript_path": str(FIXTURES / "claude_code_success.jsonl"), **fields}


def context_of(done: subprocess.CompletedProcess[str], event: str) -> str:
    assert done.returncode == 0, done.stderr
    if not done.stdout.strip():
        return ""
    out = json.loads(done.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == event
    return str(out["hookSpecificOutput"]["additionalContext"])


def memory(home: Path) -> DeltaMem:
    return DeltaMem.open(home / ".deltamem" / "memory.db", embedder="hashing",
                         settings=TEST_SETTINGS)


def test_claude_code_transcript_reads_as_turns_with_outcomes() -> None:
    transcript = read_transcript(FIXTURES / "claude_code_success.jsonl")
    assert transcript.cwd == CWD
    turn = last_turn(transcript.messages)
    assert turn[0] == {"role": "user", "content": REQUEST}
    calls = [m["tool_calls"][0]["function"] for m in turn if m.get("tool_calls")]
    assert [c["name"] for c in calls] == ["Bash", "Read", "Edit", "Bash"]  # no subagent's Grep
    assert calls[0]["arguments"] == {"command": "pytest -q tests/test_checkout.py"}
    # The reply's blocks, written one line each, are one message again: thought + call.
    assert turn[1]["content"].startswith("Run the failing test") and "I'll run" in turn[1][
        "content"]
    assert turn_outcome(turn)
    failed = last_turn(read_transcript(FIXTURES / "claude_code_failure.jsonl").messages)
    assert not turn_outcome(failed)


def test_codex_rollout_reads_as_a_turn() -> None:
    transcript = read_transcript(FIXTURES / "codex_rollout.jsonl")
    assert transcript.cwd == CWD
    turn = last_turn(transcript.messages)
    assert turn[0]["content"] == REQUEST  # the environment_context message is not a request
    results = [m["content"] for m in turn if m["role"] == "tool"]
    assert results[0].startswith("error: exit code 1: F.")
    assert results[-1].startswith("..\n2 passed") and turn_outcome(turn)


def test_hooks_recall_at_start_and_per_request_and_learn_each_turn(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # A first session: nothing to recall yet; the stop hook learns the finished turn.
    start = run_hook(home, "SessionStart", claude_payload("SessionStart", source="startup"))
    assert context_of(start, "SessionStart") == ""
    stop = run_hook(home, "Stop", claude_payload("Stop", stop_hook_active=False))
    assert stop.returncode == 0 and stop.stdout == "", stop.stderr
    with memory(home) as mem:
        [episode] = list(mem.store.episodes(mem.space))
        assert episode.task == REQUEST and episode.success and episode.env == scene(CWD)
        assert [s["action"] for s in episode.steps] == [
            "Bash: pytest -q tests/test_checkout.py", "Read: /home/dev/shop/shop/cart.py",
            "Edit: /home/dev/shop/shop/cart.py", "Bash: pytest -q tests/test_checkout.py",
            "reply: Fixed: `Cart.total` applied the discount twice. The checkout tests pass now."]
        assert "assert 81.0 == 90" in episode.steps[0]["observation"]

    # The next session in that project gets its knowledge, and the request gets the skill.
    start = run_hook(home, "SessionStart", claude_payload("SessionStart", source="startup"))
    knowledge = context_of(start, "SessionStart")
    assert knowledge.startswith("deltamem notes on shop") and "2 passed" in knowledge
    prompt = run_hook(home, "UserPromptSubmit", claude_payload("UserPromptSubmit",
                                                                prompt=REQUEST))
    skill = context_of(prompt, "UserPromptSubmit")
    assert skill.startswith("deltamem: an earlier session in this project did a task like this")
    assert "- edit shop/cart.py\n- run `pytest -q tests/test_checkout.py` -> 2 passed" in skill

    # A refused deploy is learned as a failure lesson; a Codex rollout is learned too.
    stop = run_hook(home, "Stop", claude_payload(
        "Stop", transcript_path=str(FIXTURES / "claude_code_failure.jsonl")))
    assert stop.returncode == 0, stop.stderr
    codex = {"session_id": "019a6b2e-7c41-7d10-bb2a-5c9e0f3d2a11", "cwd": CWD,
             "hook_event_name": "Stop", "model": "gpt-5.1-codex", "turn_id": "t-1",
             "stop_hook_active": False, "transcript_path": str(FIXTURES / "codex_rollout.jsonl"),
             "last_assistant_message": "Fixed `Cart.total`."}
    assert run_hook(home, "Stop", codex).returncode == 0
    with memory(home) as mem:
        episodes = {e.task: e for e in mem.store.episodes(mem.space)}
        assert not episodes["deploy the shop to production"].success
        lesson = [n for n in mem.nodes() if n.outcome.value == "failure"]
        assert [n.key for n in lesson] == ["deploy the shop to production"]
        assert mem.stats().episodes == 3
        codex_actions = [s["action"] for s in list(mem.store.episodes(mem.space))[-1].steps]
        assert codex_actions[0] == "shell: pytest -q tests/test_checkout.py"
        assert codex_actions[2].startswith("apply_patch: *** Begin Patch")


def test_a_bad_hook_input_is_one_line_and_never_blocks_the_agent(tmp_path: Path) -> None:
    done = run_hook(tmp_path, "Stop", "this is not json")
    assert done.returncode == 1  # a warning in both clients; exit 2 would block the agent
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: deltamem hook stop")
    missing = run_hook(tmp_path, "Stop", claude_payload("Stop", transcript_path="/nope.jsonl"))
    assert missing.returncode == 1 and "Traceback" not in missing.stderr


@pytest.mark.parametrize("client", ["claude", "codex"])
def test_plugin_mcp_config_starts_the_server(tmp_path: Path, client: str) -> None:
    """Each client's MCP config, with its variables filled in as that client does (Claude Code:
    ``${user_config.db_path}`` from the option's default, not expanded by a shell; Codex
    0.171.0: nothing -- it passes ``${HOME}`` as it stands, seen through a recording wrapper in
    a real session), started in a project folder, serves tools on the hooks' database and
    writes nothing into the project (with ``${HOME}`` it made ``./${HOME}/.deltamem``)."""
    manifest = json.loads((PLUGIN / f".{client}-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "deltamem"
    config = PLUGIN / str(manifest.get("mcpServers", "./.mcp.json"))
    server = json.loads(config.read_text())["mcpServers"]["deltamem"]
    options = {k: str(v["default"]) for k, v in manifest.get("userConfig", {}).items()}
    args = [a.replace("${user_config.db_path}", options.get("db_path", "")) for a in
            server["args"]] if client == "claude" else list(server["args"])
    project = tmp_path / "project"
    project.mkdir()

    async def run() -> tuple[list[str], Any]:
        params = StdioServerParameters(command=server["command"], args=args,
                                       env=environment(tmp_path), cwd=project)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            tools = sorted(t.name for t in (await s.list_tools()).tools)
            return tools, await s.call_tool("stats", {})

    tools, stats = anyio.run(run)
    assert "recall" in tools and not stats.is_error
    assert (tmp_path / ".deltamem" / "memory.db").is_file()
    assert list(project.iterdir()) == []


def test_only_claude_code_runs_the_hooks_that_answer_nothing_async() -> None:
    """Claude Code's hook schema has ``async`` (the hook runs in the background, the session
    does not wait); Codex skips a handler marked ``async``, so its manifest names a file of the
    same hooks, all in line. ``Stop`` stays in line: in print mode Claude Code exits right
    after it, and an async ``Stop`` that had not spooled its turn yet lost it (1 of 5 scripted
    sessions)."""
    claude = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]
    manifest = json.loads((PLUGIN / ".codex-plugin" / "plugin.json").read_text())
    codex = json.loads((PLUGIN / manifest["hooks"]).read_text())["hooks"]
    background = {event for event, groups in claude.items()
                  if any(h.get("async") for g in groups for h in g["hooks"])}
    assert background == {"PostToolUseFailure", "SessionEnd"}
    assert not any(h.get("async") for groups in codex.values() for g in groups
                   for h in g["hooks"])
    for groups in claude.values():
        for group in groups:
            for handler in group["hooks"]:
                handler.pop("async", None)
    assert codex == claude
