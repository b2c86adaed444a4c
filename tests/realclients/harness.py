"""Drive the real Claude Code and Codex CLIs, with the deltamem plugin installed through their own
plugin commands, in a real temporary git repository, against the scripted model server
(``model_server``), each run inside a network namespace that has only loopback.

The CLIs are the pinned ones ``scripts/setup_clients.sh`` installs into ``.cache/clients``
(``DELTAMEM_CLIENTS``). One call of :func:`run_sessions` is one *run*: a fresh home, a fresh
repository, the plugin installed (or not, for the baseline), then one CLI process per session,
one at a time. Everything a run needs happens inside one ``unshare -n`` (``unshare -rn`` when not
root): the loopback is brought up, the model server listens on it, the CLI talks to it; nothing
else is reachable. The hook daemon the plugin starts is stopped by its pid at the end.

What a run returns (:class:`RunResult`) is what a test or the measurement script checks: each
session's wall time, exit status, stdout, the client's transcript (Claude Code's JSONL, Codex's
rollout), the hook payloads as the client sent them (``record_hooks``: a recording wrapper ahead
of ``deltamem-hook`` on ``PATH``), the requests that reached the model, and the memory's
episodes afterwards.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CLIENTS_DIR = Path(os.environ.get("DELTAMEM_CLIENTS") or REPO / ".cache" / "clients")
SETUP_HINT = ("run scripts/setup_clients.sh (scripts/setup.sh calls it) to install the pinned "
              "Claude Code and Codex CLIs into .cache/clients")
VERSIONS = {"claude-code": "2.1.197", "codex": "0.171.0"}
CLAUDE_MODEL = "claude-opus-4-8"
CODEX_MODEL = "gpt-5.5"  # a slug the binary knows: an unknown one gets no apply_patch tool
CODEX_CODE_MODE_MODEL = "gpt-5.6-sol"  # its catalog entry says tool_mode "code_mode_only"
SESSION_TIMEOUT = 120.0

CALC = ("def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    difference = a - b\n"
        "    return difference\n")
TESTS = ("from calc import add, sub\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
         "def test_sub():\n    assert sub(5, 3) == 2\n")
TEST_COMMAND = "python -m pytest -q -p no:cacheprovider"


def fix_the_test(final_passes: bool = True, reply: str | None = None) -> list[dict[str, Any]]:
    """The scripted fix-the-test session: run the tests (1 fails), read and edit ``calc.py``,
    run them again -- passing, or with ``final_passes=False`` still failing (a wrong fix) --
    then a final reply that does not say how the run went."""
    new = "return a + b" if final_passes else "return a * b"
    return [{"run": TEST_COMMAND}, {"read": "calc.py"},
            {"edit": "calc.py", "old": "    return a - b", "new": f"    {new}"},
            {"run": TEST_COMMAND},
            {"reply": reply or "I changed add() in calc.py, which subtracted its arguments."}]


@dataclass
class Session:
    prompt: str
    steps: list[dict[str, Any]]
    before: str = ""  # a shell command run in the repository before the session
    code_mode: bool = False  # Codex: run commands through its code-mode ``exec`` tool
    cold: bool = False  # stop the hook daemons (once the learner is done) before the session


@dataclass
class SessionResult:
    rc: int
    wall_s: float
    stdout: str
    stderr: str
    transcript: str = ""  # the client's own transcript / rollout (text)
    transcript_path: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)  # bodies the model received
    hooks: list[dict[str, Any]] = field(default_factory=list)  # payloads the hooks received


@dataclass
class RunResult:
    client: str
    plugin: bool
    root: str  # the run's temporary folder (removed unless kept)
    repo: str
    home: str
    sessions: list[SessionResult] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    install_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class ClientsMissing(RuntimeError):
    """The pinned CLIs are not installed (see :data:`SETUP_HINT`)."""


def binary(client: str) -> Path:
    """The installed CLI of ``client`` at its pinned version.

    Raises:
        ClientsMissing: not installed, or another version.
    """
    name = {"claude-code": "claude", "codex": "codex"}[client]
    path = CLIENTS_DIR / "node_modules" / ".bin" / name
    package = CLIENTS_DIR / "node_modules" / ("@anthropic-ai/claude-code" if client ==
                                               "claude-code" else "@openai/codex")
    try:
        version = json.loads((package / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        raise ClientsMissing(f"{client} is not installed in {CLIENTS_DIR}: {SETUP_HINT}") from None
    if version != VERSIONS[client] or not path.exists():
        raise ClientsMissing(f"{client} {version} in {CLIENTS_DIR} is not the pinned "
                             f"{VERSIONS[client]}: {SETUP_HINT}")
    return path


def namespace_prefix() -> list[str]:
    """The command prefix that runs a process in a network namespace of its own."""
    if shutil.which("unshare") is None:
        raise ClientsMissing("unshare (util-linux) is needed to run the clients offline")
    return ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-rn"]


def make_repo(folder: Path) -> Path:
    """A real git repository with the fix-the-test project, committed."""
    folder.mkdir(parents=True)
    (folder / "calc.py").write_text(CALC)
    (folder / "test_calc.py").write_text(TESTS)
    git = ["git", "-c", "user.name=dev", "-c", "user.email=dev@example.invalid"]
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "calc"]):
        subprocess.run([*git, *args], cwd=folder, check=True, capture_output=True)
    return folder


def _base_env(home: Path) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    env = {
        "HOME": str(home), "TMPDIR": str(home / "tmp"), "XDG_RUNTIME_DIR": str(home / "run"),
        "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache"),
        "PATH": f"{home / 'bin'}:{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8", "TERM": "dumb", "SHELL": "/bin/bash",
        # This checkout's code for the hooks and the MCP server (the venv may point elsewhere).
        "PYTHONPATH": str(REPO / "src"),
        "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        # No proxy reaches anything: belt and braces inside the namespace.
        "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    for name in ("DELTAMEM_EMBEDDER", "HF_HUB_OFFLINE"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    for sub in ("tmp", "run", "bin"):
        (home / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
    return env


def client_env(client: str, home: Path, port: int | None) -> dict[str, str]:
    env = _base_env(home)
    base = f"http://127.0.0.1:{port or 9}"
    if client == "claude-code":
        env.update({"ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": "test",
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
                    "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
                    "DISABLE_BUG_COMMAND": "1"})
    else:
        env.update({"CODEX_HOME": str(home / ".codex"), "FAKE_API_KEY": "test",
                    "RUST_LOG": "warn"})
        (home / ".codex").mkdir(exist_ok=True)
    return env


CODEX_CONFIG = """model = "{model}"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "http://127.0.0.1:{port}/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"
request_max_retries = 0
stream_max_retries = 0
"""


def write_codex_config(home: Path, port: int, model: str = CODEX_MODEL) -> None:
    """Point Codex at the scripted server (keeping what ``codex plugin add`` wrote)."""
    path = home / ".codex" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = path.read_text() if path.exists() else ""
    # The provider block goes first: the plugin's tables follow it.
    kept = kept.split("# -- plugins --\n", 1)[-1] if "# -- plugins --\n" in kept else kept
    path.write_text(CODEX_CONFIG.format(model=model, port=port) + "\n# -- plugins --\n"
                    + "\n".join(line for line in kept.splitlines()
                                if not line.startswith(("model", "approval_policy",
                                                        "sandbox_mode", "check_for_update"))
                                or line.startswith("[")) + "\n")


def plugin_commands(client: str, exe: Path, options: Mapping[str, str] | None = None,
                    marketplace: Path = REPO) -> list[list[str]]:
    """The CLI's own commands that install the plugin from this checkout's marketplace (Claude
    Code: with ``options`` set through ``--config``)."""
    if client == "claude-code":
        config = [x for k, v in (options or {}).items() for x in ("--config", f"{k}={v}")]
        return [[str(exe), "plugin", "marketplace", "add", str(marketplace)],
                [str(exe), "plugin", "install", "deltamem@deltamem", *config]]
    return [[str(exe), "plugin", "marketplace", "add", str(marketplace)],
            [str(exe), "plugin", "add", "deltamem@deltamem"]]


def marketplace_without(folder: Path, parts: Sequence[str]) -> Path:
    """A copy of this checkout's marketplace whose plugin leaves ``parts`` out (``mcp``: its MCP
    server), to measure what each part costs."""
    shutil.copytree(REPO / ".claude-plugin", folder / ".claude-plugin")
    plugin = folder / "plugins" / "deltamem"
    shutil.copytree(REPO / "plugins" / "deltamem", plugin)
    if "mcp" in parts:
        for name in (".mcp.json", ".codex-mcp.json"):
            (plugin / name).unlink(missing_ok=True)
        manifest = plugin / ".codex-plugin" / "plugin.json"
        data = json.loads(manifest.read_text())
        data.pop("mcpServers", None)
        manifest.write_text(json.dumps(data, indent=2))
    return folder


def session_command(client: str, exe: Path, prompt: str) -> list[str]:
    if client == "claude-code":
        return [str(exe), "-p", prompt, "--output-format", "stream-json", "--verbose",
                "--allowedTools", "Bash Read Edit Write", "--model", CLAUDE_MODEL]
    return [str(exe), "exec", "--json", "--skip-git-repo-check",
            "--dangerously-bypass-hook-trust", prompt]


HOOK_RECORDER = """#!/bin/sh
# Test double around the real deltamem-hook: keeps each payload, with the transcript's size
# when the hook was called and the plugin options the client passed, then hands the payload on
# unchanged.
payload=$(cat)
stamp=$(date +%s%N)
size=$(printf '%s' "$payload" | {python} -c 'import json,os,sys
p=json.load(sys.stdin).get("transcript_path") or ""
print(os.path.getsize(p) if p and os.path.exists(p) else -1)')
printf '%s' "$payload" > "{log}/$stamp-$1.json"
printf '%s' "$size" > "{log}/$stamp-$1.size"
env | grep '^CLAUDE_PLUGIN_OPTION_' > "{log}/$stamp-$1.options" || true
printf '%s' "$(date +%s%N)" > "{log}/$stamp-$1.start"
printf '%s' "$payload" | {real} "$@"
status=$?
printf '%s' "$(date +%s%N)" > "{log}/$stamp-$1.end"
exit $status
"""


LAUNCHER = """#!/bin/sh
# This checkout's deltamem command for a client that starts the plugin's MCP server with an
# environment of its own (Codex passes no PYTHONPATH): the venv's command, this checkout's code.
PYTHONPATH={src} exec {real} "$@"
"""


def install_launcher(home: Path) -> None:
    """Put :data:`LAUNCHER` ahead of the venv's ``deltamem`` on the run's ``PATH``."""
    real = shutil.which("deltamem", path=str(Path(sys.executable).parent))
    if real is None:
        raise ClientsMissing("deltamem is not installed in the venv (pip install -e .)")
    launcher = home / "bin" / "deltamem"
    launcher.write_text(LAUNCHER.format(src=REPO / "src", real=real))
    launcher.chmod(0o755)


def install_recorder(home: Path, log: Path) -> None:
    real = shutil.which("deltamem-hook", path=str(Path(sys.executable).parent))
    if real is None:
        raise ClientsMissing("deltamem-hook is not installed in the venv (pip install -e .)")
    log.mkdir(parents=True, exist_ok=True)
    wrapper = home / "bin" / "deltamem-hook"
    wrapper.write_text(HOOK_RECORDER.format(python=sys.executable, log=log, real=real))
    wrapper.chmod(0o755)


# -- inside the namespace ------------------------------------------------------------------


def _inner(plan_path: str) -> int:
    """Run a plan (JSON written by :func:`run_sessions`) in this (already unshared) process."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from model_server import ScriptedModel, serve  # noqa: PLC0415 - the sibling module

    plan = json.loads(Path(plan_path).read_text())
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    client, home, repo = plan["client"], Path(plan["home"]), plan["repo"]
    exe = Path(plan["exe"])
    out: dict[str, Any] = {"sessions": [], "install_s": 0.0}
    if plan["plugin"]:
        start = time.monotonic()
        for command in plugin_commands(client, exe, plan.get("options"),
                                       Path(plan.get("marketplace") or REPO)):
            done = subprocess.run(command, env=client_env(client, home, None), cwd=str(home),
                                  capture_output=True, text=True, timeout=120,
                                  stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(command[1:])} failed: {done.stderr or done.stdout}")
        out["install_s"] = time.monotonic() - start
    for i, session in enumerate(plan["sessions"]):
        if i:  # a user starts the next session later: what the last one taught is stored
            wait_learned(home)
        if session.get("cold"):  # as after the daemon idled out: the session starts it again
            stop_daemons(home)
        if session.get("before"):
            subprocess.run(session["before"], shell=True, cwd=repo, check=True)
        log = home / f"requests-{i}.jsonl"
        model = ScriptedModel(session["steps"], repo, str(log),
                              code_mode=bool(session.get("code_mode")))
        server = serve(model)
        port = server.server_address[1]
        if client == "codex":
            write_codex_config(home, port, CODEX_CODE_MODE_MODEL if session.get("code_mode")
                               else CODEX_MODEL)
        env = client_env(client, home, port)
        start = time.monotonic()
        try:
            done = subprocess.run(session_command(client, exe, session["prompt"]), env=env,
                                  cwd=repo, capture_output=True, text=True,
                                  timeout=plan.get("timeout", SESSION_TIMEOUT),
                                  stdin=subprocess.DEVNULL)
            rc, stdout, stderr = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as exc:
            rc, stdout, stderr = 124, _text(exc.stdout), _text(exc.stderr)
        wall = time.monotonic() - start
        server.shutdown()
        out["sessions"].append({"rc": rc, "wall_s": wall, "stdout": stdout, "stderr": stderr,
                                "requests": str(log)})
    Path(plan["result"]).write_text(json.dumps(out))
    return 0


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


# -- outside -------------------------------------------------------------------------------


def transcripts(client: str, home: Path) -> list[Path]:
    """The client's transcripts in a run's home, oldest first."""
    pattern = (home / ".claude" / "projects" / "*" / "*.jsonl" if client == "claude-code"
               else home / ".codex" / "sessions" / "**" / "rollout-*.jsonl")
    found = [Path(p) for p in glob.glob(str(pattern), recursive=True)]
    return sorted(found, key=lambda p: p.stat().st_mtime_ns)


def memory_db(home: Path) -> Path | None:
    """The plugin's database in a run's home (wherever the plugin options put it)."""
    found = sorted(glob.glob(str(home / "**" / "memory.db"), recursive=True,
                             include_hidden=True))
    return Path(found[0]) if found else None


def wait_learned(home: Path, limit: float = 120.0) -> bool:
    """Wait until the learner has handled every spooled turn (True), at most ``limit`` s."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not glob.glob(str(home / "**" / ".deltamem-hooks" / "spool" / "[0-9]*.json"),
                         recursive=True, include_hidden=True):
            return True
        time.sleep(0.2)
    return False


def stop_daemons(home: Path) -> None:
    """Stop the hook daemons a run started, each by the pid it answers with."""
    import socket  # noqa: PLC0415

    runtime = home / "run"
    for sock in runtime.glob("hookd-*.sock"):
        answer = None
        with contextlib.suppress(OSError, ValueError), socket.socket(
                socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(5)
            conn.connect(str(sock))
            conn.sendall(b'{"event": "ping"}\n')
            answer = json.loads(conn.recv(65536))
        pid = (answer or {}).get("output", {}).get("pid")
        if isinstance(pid, int) and pid > 1:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)


def read_episodes(db: Path | None) -> list[dict[str, Any]]:
    """The episodes the memory stored, oldest first, as plain data."""
    if db is None or not db.exists():
        return []
    from deltamem import DeltaMem  # noqa: PLC0415

    with DeltaMem.open(str(db), create=False) as mem:
        episodes = list(mem.store.episodes(mem.space))
    return [{"task": e.task, "env": e.env, "success": e.success, "meta": dict(e.meta),
             "steps": [dict(s) for s in e.steps]}
            for e in episodes]


def run_sessions(client: str, sessions: Sequence[Session], *, plugin: bool = True,
                 record_hooks: bool = False, keep: bool = False,
                 timeout: float = SESSION_TIMEOUT,
                 options: Mapping[str, str] | None = None,
                 without: Sequence[str] = ()) -> RunResult:
    """One run: fresh home and repository, the plugin installed (``plugin``; Claude Code with
    the userConfig ``options``), the sessions one after another, each CLI inside a
    loopback-only network namespace (see the module docstring). ``{home}`` in an option's
    value is the run's home. ``without`` leaves parts of the plugin out
    (:func:`marketplace_without`).

    Raises:
        ClientsMissing: the pinned CLIs (or unshare) are not installed.
        RuntimeError: the run could not be set up (the plugin failed to install).
    """
    exe = binary(client)
    prefix = namespace_prefix()
    root = Path(tempfile.mkdtemp(prefix=f"deltamem-{client}-"))
    home, repo = root / "home", make_repo(root / "calc")
    home.mkdir()
    _base_env(home)
    install_launcher(home)
    hook_log = root / "hooks" if record_hooks else None
    if hook_log is not None:
        install_recorder(home, hook_log)
    plan = {"client": client, "home": str(home), "repo": str(repo), "exe": str(exe),
            "plugin": plugin, "sessions": [asdict(s) for s in sessions], "timeout": timeout,
            "result": str(root / "result.json"), "hook_log": str(hook_log or ""),
            "options": {k: v.replace("{home}", str(home)) for k, v in (options or {}).items()},
            "marketplace": str(marketplace_without(root / "marketplace", without))
            if without else ""}
    (root / "plan.json").write_text(json.dumps(plan))
    result = RunResult(client, plugin, str(root), str(repo), str(home))
    try:
        done = subprocess.run([*prefix, sys.executable, __file__, "--inner",
                               str(root / "plan.json")], capture_output=True, text=True,
                              timeout=timeout * len(sessions) + 180,
                              env={**os.environ, "PYTHONPATH": str(REPO / "src")})
        if done.returncode != 0:
            raise RuntimeError(f"the {client} run failed: {done.stderr[-2000:]}")
        inner = json.loads((root / "result.json").read_text())
        result.install_s = inner["install_s"]
        found = transcripts(client, home)
        hooks = _hook_payloads(hook_log) if hook_log else []
        for i, s in enumerate(inner["sessions"]):
            session = SessionResult(s["rc"], s["wall_s"], s["stdout"], s["stderr"])
            session.requests = [json.loads(line) for line in
                                Path(s["requests"]).read_text().splitlines()] \
                if Path(s["requests"]).exists() else []
            if i < len(found):
                session.transcript_path = str(found[i])
                session.transcript = found[i].read_text()
                session.hooks = [h for h in hooks
                                 if h["payload"].get("transcript_path") == str(found[i])]
            result.sessions.append(session)
    finally:
        wait_learned(home)
        stop_daemons(home)
    configured = plan["options"].get("db_path")
    result.episodes = read_episodes(Path(configured) if configured else memory_db(home))
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    return result


def _hook_payloads(log: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(log.glob("*.json")):
        stamp, _, event = path.stem.partition("-")
        size_file = path.with_suffix(".size")
        options = path.with_suffix(".options")
        end, start = path.with_suffix(".end"), path.with_suffix(".start")
        # The real hook's own time: from just before it was called (after the recorder's work)
        began = int(start.read_text()) if start.exists() and start.read_text().strip() \
            else int(stamp)
        out.append({"event": event, "at_ns": int(stamp),
                    "took_s": (int(end.read_text()) - began) / 1e9 if end.exists()
                    and end.read_text().strip() else None,
                    "options": dict(line.split("=", 1) for line in
                                    options.read_text().splitlines() if "=" in line)
                    if options.exists() else {},
                    "transcript_size": int(size_file.read_text() or -1)
                    if size_file.exists() else -1,
                    "payload": json.loads(path.read_text() or "{}")})
    return out


def notes_received(client: str, requests: Sequence[Mapping[str, Any]]) -> list[str]:
    """The deltamem notes that reached the model in a session's requests: Claude Code sends
    hook context as ``system`` messages, Codex as ``developer`` input items (told by the heads
    of the notes, ``integrations.coding_memory``)."""
    from deltamem.integrations.coding_memory import LESSON_HEAD, NOTE_HEAD, SKILL_HEAD  # noqa: PLC0415

    heads = [head.split("{")[0] for head in (NOTE_HEAD, SKILL_HEAD, LESSON_HEAD)]
    found: list[str] = []
    for request in requests:
        body = request.get("body") or {}
        items = body.get("messages") if client == "claude-code" else body.get("input")
        for item in items or []:
            if not isinstance(item, Mapping) or item.get("role") not in ("system", "developer"):
                continue
            content = item.get("content")
            texts = [content] if isinstance(content, str) else [
                str(b.get("text") or "") for b in content or [] if isinstance(b, Mapping)]
            found += [t for t in texts if t not in found and any(head in t for head in heads)]
    return found


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--inner":
        raise SystemExit(_inner(sys.argv[2]))
    raise SystemExit("usage: harness.py --inner PLAN (run_sessions calls it)")
