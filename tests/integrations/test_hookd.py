"""Hooks that never block: ``stop`` spools the turn for the background learner and returns;
the recall hooks answer from the warm daemon, which the first hook starts; a spooled turn is
never lost (a daemon killed before learning it leaves it for the next one)."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from coding_transcripts import ClaudeSession
from deltamem.engine.memory import DeltaMem
from deltamem.errors import SpaceNotFound
from deltamem.integrations.coding_memory import UNFINISHED
from deltamem_hook import target
from helpers import TEST_SETTINGS

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"
CWD = "/home/dev/shop"
REQUEST = "the checkout test fails with a wrong total, fix it"


@pytest.fixture
def home(tmp_path: Path) -> Any:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(runtime),
           "DELTAMEM_EMBEDDER": "hashing", "DELTAMEM_HOOK_IDLE": "60",
           "DELTAMEM_TAU_TASK": str(TEST_SETTINGS.tau_task),
           "DELTAMEM_TAU_ENV": str(TEST_SETTINGS.tau_env)}
    db = tmp_path / ".deltamem" / "memory.db"
    yield env, db
    old = dict(os.environ)
    os.environ.update(env)
    try:
        sock = target(str(db), "default", "hashing").socket
    finally:
        os.environ.clear()
        os.environ.update(old)
    _stop_daemon(env, db, sock)


def _stop_daemon(env: dict[str, str], db: Path, sock: Path) -> None:
    answer = _hook(env, db, "ping") if sock.exists() else None
    if answer is None:
        return
    pid = int(json.loads(answer.stdout or "{}").get("pid", 0) or 0)
    if pid:
        os.kill(pid, signal.SIGTERM)
        for _ in range(200):
            if not sock.exists():
                break
            time.sleep(0.05)


def _hook(env: dict[str, str], db: Path, event: str, payload: dict[str, Any] | None = None,
          *extra: str) -> subprocess.CompletedProcess[str]:
    if event == "ping":  # ask the daemon directly
        code = ("import json,sys; from deltamem_hook import target, ask; "
                f"a = ask(target({str(db)!r}, 'default', 'hashing'), {{'event': 'ping'}}); "
                "print(json.dumps((a or {}).get('output', {})))")
        return subprocess.run([sys.executable, "-c", code], env=env, text=True,
                              capture_output=True, timeout=60, check=False)
    return subprocess.run([sys.executable, "-m", "deltamem_hook", event, "--db", str(db),
                           *extra], input=json.dumps(payload or {}), env=env, text=True,
                          capture_output=True, timeout=120, check=False)


def _payload(event: str, transcript: str = "claude_code_success.jsonl", **more: Any) -> dict:
    return {"session_id": "s-1", "cwd": CWD, "hook_event_name": event,
            "transcript_path": str(FIXTURES / transcript), **more}


def _episodes(db: Path) -> int:
    try:
        with DeltaMem.open(db, embedder="hashing", settings=TEST_SETTINGS, create=False) as mem:
            return len(list(mem.store.episodes(mem.space)))
    except SpaceNotFound:  # the daemon has not written yet
        return 0


def _wait(condition: Any, limit: float = 90.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_stop_spools_and_the_background_learner_learns(home):
    env, db = home
    done = _hook(env, db, "stop", _payload("Stop"))
    assert done.returncode == 0 and done.stdout == "", done.stderr
    spool = db.parent / ".deltamem-hooks" / "spool"
    entries = [json.loads(p.read_text()) for p in spool.glob("*.json")] if spool.is_dir() else []
    # The spool holds the transcript's path and size, never its contents (the final reply
    # only as a digest).
    for entry in entries:
        assert set(entry) == {"transcript_path", "size", "cwd", "session_id", "scope", "event",
                              "queued_at", "reply_digest"}
    assert _wait(lambda: _episodes(db) == 1), (db.parent / ".deltamem-hooks" / "hookd.log")
    assert _wait(lambda: not list(spool.glob("*.json")))
    # The recall hook answers from the warm daemon with what was learned.
    prompt = _hook(env, db, "user-prompt", _payload("UserPromptSubmit", prompt=REQUEST),
                   "--budget-tokens", "800")
    assert prompt.returncode == 0, prompt.stderr
    context = json.loads(prompt.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "pytest -q tests/test_checkout.py" in context
    assert json.loads(_hook(env, db, "ping").stdout)["pid"] > 0


def test_a_turn_is_learned_as_it_was_when_it_ended(home, tmp_path):
    env, db = home
    transcript = tmp_path / "session.jsonl"
    transcript.write_bytes((FIXTURES / "claude_code_success.jsonl").read_bytes())
    done = _hook(env, db, "stop", _payload("Stop", transcript=str(transcript)))
    assert done.returncode == 0, done.stderr
    # The next turn is appended before the learner runs: the spooled turn is still this one.
    with transcript.open("a") as handle:
        handle.write(json.dumps({"type": "user", "cwd": CWD, "message": {
            "role": "user", "content": "now write the release notes"}}) + "\n")
    assert _wait(lambda: _episodes(db) == 1)
    with DeltaMem.open(db, embedder="hashing", settings=TEST_SETTINGS, create=False) as mem:
        [episode] = list(mem.store.episodes(mem.space))
    assert episode.task == REQUEST


def test_spooled_turns_survive_a_daemon_that_never_ran(home):
    env, db = home
    env = {**env, "DELTAMEM_HOOK_DAEMON": "1"}
    t_env = dict(os.environ)
    os.environ.update(env)
    try:
        from deltamem_hook import spool_stop

        t = target(str(db), "default", "hashing")
        db.parent.mkdir(parents=True, exist_ok=True)
        for name in ("claude_code_success.jsonl", "claude_code_failure.jsonl"):
            spool_stop(t, _payload("Stop", transcript=name))
    finally:
        os.environ.clear()
        os.environ.update(t_env)
    # A later hook (any event) starts the daemon, whose learner drains what was left.
    prompt = _hook(env, db, "session-start", _payload("SessionStart"))
    assert prompt.returncode == 0, prompt.stderr
    assert _wait(lambda: _episodes(db) == 2)


def test_a_missing_transcript_or_bad_input_is_one_line_and_exit_1(home):
    env, db = home
    missing = _hook(env, db, "stop", _payload("Stop", transcript="/nope.jsonl"))
    assert missing.returncode == 1 and missing.stderr.startswith("error: deltamem hook stop")
    assert "Traceback" not in missing.stderr
    bad = subprocess.run([sys.executable, "-m", "deltamem_hook", "user-prompt", "--db", str(db)],
                         input="not json", env=env, text=True, capture_output=True, timeout=60,
                         check=False)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1


def test_daemon_off_learns_before_the_hook_returns(home):
    env, db = home
    env = {**env, "DELTAMEM_HOOK_DAEMON": "0"}
    done = _hook(env, db, "stop", _payload("Stop"))
    assert done.returncode == 0, done.stderr
    assert _episodes(db) == 1  # learned before the hook returned
    assert not (Path(env["XDG_RUNTIME_DIR"]) / "x").exists()


def test_the_plain_command_line_reads_like_argparse():
    from deltamem_hook import _options

    plain = ["user-prompt", "--budget-tokens", "800", "--db", "/m.db", "--space", "s",
             "--scope", "project"]
    assert _options(plain) == ("user-prompt", {"db": "/m.db", "space": "s", "embedder": None,
                                               "budget_tokens": 800, "scope": "project"})
    assert _options(["user-prompt", "--budget-tokens=800", "--db=/m.db", "--space=s",
                     "--scope=project"]) == _options(plain)  # read by argparse


def _hung_daemon(env: dict[str, str], db: Path) -> Any:
    """A test double of a hung daemon: it holds the target's socket and lock, accepts every
    connection and never answers."""
    import fcntl
    import socket
    import threading

    old = dict(os.environ)
    os.environ.update(env)
    try:
        path = target(str(db), "default", "hashing").socket  # read under the hooks' env
    finally:
        os.environ.clear()
        os.environ.update(old)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = open(str(path) + ".lock", "w")  # noqa: SIM115 - held while the double runs
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        try:
            while True:
                held.append(server.accept()[0])
        except OSError:  # closed at the end of the test
            return

    threading.Thread(target=accept, daemon=True).start()
    return server, lock, held


def test_recall_hooks_fail_open_when_the_daemon_hangs(home):
    env, db = home
    server, lock, held = _hung_daemon(env, db)
    try:
        for event in ("session-start", "user-prompt"):
            done = _hook(env, db, event, _payload("UserPromptSubmit", prompt=REQUEST))
            assert done.returncode == 0 and done.stdout == "", done.stderr
        assert held, server.getsockname()  # the hooks reached the hung daemon, and gave up
    finally:
        server.close()
        lock.close()
        for conn in held:
            conn.close()


def test_a_session_switched_off_gets_and_teaches_nothing(home, tmp_path):
    env, db = home
    off = _hook(env, db, "user-prompt", _payload("UserPromptSubmit", prompt="deltamem off"))
    assert off.returncode == 0 and off.stdout == ""
    stop = _hook(env, db, "stop", _payload("Stop"))
    assert stop.returncode == 0
    spool = db.parent / ".deltamem-hooks" / "spool"
    assert not list(spool.glob("[0-9]*.json"))  # nothing queued to learn
    on = _hook(env, db, "user-prompt", _payload("UserPromptSubmit", prompt="/deltamem on"))
    assert on.returncode == 0
    assert _hook(env, db, "stop", _payload("Stop")).returncode == 0
    assert list(spool.glob("[0-9]*.json")) or _episodes(db) == 1
    # The whole-session switch: the environment variable.
    everything_off = {**env, "DELTAMEM_OFF": "1"}
    other = _payload("Stop") | {"session_id": "s-2"}
    before = len(list(spool.glob("[0-9]*.json")))
    assert _hook(everything_off, db, "stop", other).returncode == 0
    assert len(list(spool.glob("[0-9]*.json"))) <= before


def test_a_failed_call_claude_code_reports_reads_as_failed(home, tmp_path):
    """PostToolUseFailure keeps the call's id and interrupt flag (never its error text); the
    learner marks that call's result failed."""
    from deltamem.integrations.claude_code import read_turn
    from deltamem_hook import failures

    env, db = home
    transcript = FIXTURES / "claude_code_success.jsonl"
    lines = transcript.read_text().splitlines()
    ids = [b["id"] for line in lines for b in (json.loads(line).get("message") or {}).get(
        "content") or [] if isinstance(b, dict) and b.get("type") == "tool_use"]
    payload = _payload("PostToolUseFailure", tool_use_id=ids[-1], is_interrupt=False,
                       error="secret-looking text that must not be kept")
    assert _hook(env, db, "tool-failure", payload).returncode == 0
    old = dict(os.environ)
    os.environ.update(env)
    try:
        failed = failures(target(str(db), "default", "hashing"), "s-1")
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert failed == {ids[-1]: False}
    spooled = "".join(p.read_text() for p in (db.parent / ".deltamem-hooks").rglob("*.jsonl"))
    assert "secret-looking" not in spooled
    read = read_turn(transcript, failed=failed, wait=0)
    result = [m for m in read.messages if m.get("tool_call_id") == ids[-1]]
    assert result and str(result[0]["content"]).startswith("error: ")


def test_a_turn_the_client_never_ended_is_learned(home, tmp_path):
    """No Stop and no SessionEnd (the client was killed, or its end hook cut short): once the
    transcript has not changed for DELTAMEM_TURN_STALE seconds, the learner learns the turn."""
    env, db = home
    env = {**env, "DELTAMEM_TURN_STALE": "1"}
    transcript = tmp_path / "session.jsonl"
    transcript.write_bytes((FIXTURES / "claude_code_success.jsonl").read_bytes())
    prompt = _payload("UserPromptSubmit", transcript=str(transcript), prompt=REQUEST)
    assert _hook(env, db, "user-prompt", prompt).returncode == 0
    spool = db.parent / ".deltamem-hooks" / "spool"
    assert _wait(lambda: _episodes(db) == 1), (db.parent / ".deltamem-hooks" / "hookd.log")
    assert not list((spool / "open").glob("*.json"))


def test_a_task_left_waiting_in_a_session_that_said_no_more_is_learned_unfinished(
        home, tmp_path):
    """The agent asked the user and edited nothing; the user never answered and the client
    never said the session ended (print mode, a closed terminal). The learner kept a marker for
    the waiting task; once the transcript has not changed for DELTAMEM_TURN_STALE seconds the
    task is learned as a session's end learns it: unfinished, a failure."""
    env, db = home
    env = {**env, "DELTAMEM_TURN_STALE": "2"}
    root = tmp_path / "shop"
    (root / ".git").mkdir(parents=True)
    transcript = (ClaudeSession(str(root)).user("add rate limiting to the login endpoint")
                  .read(f"{root}/shop/auth.py", "def login(request):\n    ...\n")
                  .say("There is no limiter yet. Per client IP, or per account name?")
                  .write(tmp_path / "s.jsonl"))
    stop = {"session_id": "s-9", "cwd": str(root), "hook_event_name": "Stop",
            "transcript_path": str(transcript)}
    assert _hook(env, db, "stop", stop).returncode == 0
    assert _hook(env, db, "user-prompt", _payload("UserPromptSubmit", prompt="hi")
                 | {"session_id": "s-10", "transcript_path": ""}).returncode == 0  # a daemon
    marker = db.parent / ".deltamem-hooks" / "spool" / "open" / "s-9.json"
    assert _wait(lambda: marker.exists() or _episodes(db) > 0)
    assert _wait(lambda: _episodes(db) == 1), (db.parent / ".deltamem-hooks" / "hookd.log")
    with DeltaMem.open(db, embedder="hashing", settings=TEST_SETTINGS, create=False) as mem:
        [episode] = list(mem.store.episodes(mem.space))
    assert episode.task == "add rate limiting to the login endpoint"
    assert (episode.success, episode.meta["outcome_rule"]) == (False, UNFINISHED)
    assert not marker.exists()


def test_a_turn_that_ended_leaves_no_marker(home):
    env, db = home
    assert _hook(env, db, "user-prompt", _payload("UserPromptSubmit", prompt=REQUEST)
                 ).returncode == 0
    assert _hook(env, db, "stop", _payload("Stop")).returncode == 0
    assert not list((db.parent / ".deltamem-hooks" / "spool" / "open").glob("*.json"))


def test_a_reply_the_client_never_flushes_comes_from_stop(home, tmp_path):
    """Claude Code runs Stop before it writes the turn's last lines; here they never come. The
    warm learner gets the reply from Stop's ``last_assistant_message`` (in memory; the spool
    keeps only its digest), and the run whose output never came is no pass."""
    env, db = home
    recorded = ROOT / "tests" / "fixtures" / "clients" / "claude-code-2.1.197" / "fix-pass"
    lines = (recorded / "session-1" / "transcript.jsonl").read_text().splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if '"tool_use"' in line and '"Bash"' in line)
    transcript = tmp_path / "cut.jsonl"
    transcript.write_text("".join(lines[:last + 1]))
    reply = "I changed add() in calc.py, which subtracted its arguments."
    warm_up = _payload("UserPromptSubmit", prompt="hi") | {"transcript_path": ""}
    assert _hook(env, db, "user-prompt", warm_up).returncode == 0  # the daemon is up
    assert _wait(lambda: json.loads(_hook(env, db, "ping").stdout or "{}").get("pid"))
    stop = _payload("Stop", transcript=str(transcript), last_assistant_message=reply)
    assert _hook(env, db, "stop", stop).returncode == 0
    spooled = "".join(p.read_text() for p in (db.parent / ".deltamem-hooks").rglob("*.json"))
    assert "subtracted" not in spooled
    assert _wait(lambda: _episodes(db) == 1)
    with DeltaMem.open(db, embedder="hashing", settings=TEST_SETTINGS, create=False) as mem:
        [episode] = list(mem.store.episodes(mem.space))
    assert episode.steps[-1]["action"] == f"reply: {reply}"
    assert episode.success is False


def test_session_start_never_waits_for_the_daemon_it_starts(home, monkeypatch):
    """Where no daemon runs, ``session-start`` starts one (detached) and answers nothing at
    once, and so does a first ``user-prompt`` while no database exists: neither waits for the
    daemon's start."""
    import deltamem_hook

    env, db = home
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    started: list[str] = []
    monkeypatch.setattr(deltamem_hook, "start_daemon", lambda t: started.append(t.db))

    def never(*_: Any, **__: Any) -> None:
        raise AssertionError("the hook waited for the daemon's start")

    monkeypatch.setattr(deltamem_hook, "wait_for", never)
    assert not db.exists()
    for event, hook_event in (("session-start", "SessionStart"),
                              ("user-prompt", "UserPromptSubmit")):
        out = deltamem_hook.run(event, _payload(hook_event, prompt=REQUEST), db=str(db),
                                embedder="hashing")
        assert out == {}
    assert started == [str(db.resolve())] * 2
    # With a memory stored, session-start still answers at once (its prompts will wait).
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"")
    assert deltamem_hook.run("session-start", _payload("SessionStart"), db=str(db),
                             embedder="hashing") == {}
    assert len(started) == 3


def test_a_socket_left_by_a_killed_daemon_does_not_stop_the_next_start(home, monkeypatch):
    """A daemon killed without cleaning up (SIGKILL, the OOM killer) leaves its socket file;
    nothing listens on it. A recall hook starts a new daemon as where no file is (before, the
    file alone read as a running daemon: no notes until a turn's end started one)."""
    import socket

    import deltamem_hook

    env, db = home
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    started: list[str] = []
    monkeypatch.setattr(deltamem_hook, "start_daemon", lambda t: started.append(t.db))
    sock = target(str(db), "default", "hashing").socket_path
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(sock)  # bound, never listening, closed: the file stays, connections are refused
    left.close()
    assert os.path.exists(sock)
    assert deltamem_hook.run("session-start", _payload("SessionStart"), db=str(db),
                             embedder="hashing") == {}
    assert started == [str(db.resolve())]
    os.unlink(sock)


def test_the_daemon_answers_a_first_session_before_it_has_loaded(home, monkeypatch):
    """A daemon listens before its memory and embedder are loaded (in the background); a
    recall meanwhile, with no database yet, is answered at once, loading nothing."""
    from deltamem.integrations.hookd import Daemon

    env, db = home
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    daemon = Daemon(target(str(db), "default", "hashing"))
    request = {"event": "user-prompt", "payload": _payload("UserPromptSubmit", prompt=REQUEST)}
    assert daemon.handle(request) == {"output": {}}
    assert daemon._embedder is None and not db.exists()  # nothing loaded, nothing made
    daemon.warm()
    assert daemon.ready.is_set() and daemon._embedder is not None
    assert daemon.handle(request) == {"output": {}}  # warm: still nothing stored


def test_a_learned_turn_is_logged_with_its_time_and_nothing_of_its_content(home, monkeypatch,
                                                                            caplog):
    from deltamem.integrations.hookd import Daemon

    env, db = home
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    daemon = Daemon(target(str(db), "default", "hashing"))
    daemon.target.spool.mkdir(parents=True)
    (daemon.target.spool / "7.json").write_text(json.dumps(_payload("Stop")))
    with caplog.at_level(logging.INFO, logger="deltamem.hookd"):
        assert daemon.drain() == 1
    [line] = [r.getMessage() for r in caplog.records if "learned turn" in r.getMessage()]
    assert re.fullmatch(r"learned turn 7\.json \(\d+ messages\) in \d+ ms "
                        r"\(\d+ ms reading it\)", line)


def _daemon_that_learned_a_turn(home: Any, monkeypatch: Any) -> Any:
    """A daemon of the test home whose learner has learned one spooled Stop (the recorded
    successful Claude Code turn)."""
    from deltamem.integrations.hookd import Daemon

    env, db = home
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    daemon = Daemon(target(str(db), "default", "hashing"))
    daemon.target.spool.mkdir(parents=True)
    size = (FIXTURES / "claude_code_success.jsonl").stat().st_size
    (daemon.target.spool / "1.json").write_text(json.dumps({**_payload("Stop"), "size": size}))
    assert daemon.drain() == 1
    return daemon


def test_the_learner_embeds_a_projects_task_gists_ahead_for_its_reader(home, monkeypatch):
    """After a turn is learned (or a session starts) the learner embeds the gists of that
    project's tasks into the one embedding cache the daemon's reader shares: the next request's
    recall embeds only the request."""
    daemon = _daemon_that_learned_a_turn(home, monkeypatch)
    assert daemon.to_warm == {CWD: None}
    daemon.warm_projects()
    assert daemon.to_warm == {}
    reader = daemon.reader()
    assert reader is not None and reader.embed_cache is daemon.writer().embed_cache
    reader.embed([""])  # the empty scene a request's recall is read with
    before = reader.embed_cache.misses
    request = {"event": "user-prompt", "payload": _payload("UserPromptSubmit", prompt=REQUEST)}
    assert "pytest -q tests/test_checkout.py" in json.dumps(daemon.handle(request))
    # Nothing is embedded for the recall: the request was, when its task was learned (into the
    # same cache), and its gist was embedded ahead.
    assert reader.embed_cache.misses == before
    daemon.handle({"event": "session-start", "payload": _payload("SessionStart")})
    assert daemon.to_warm == {CWD: None}


def test_a_new_daemon_finds_the_gists_its_predecessor_embedded(home, monkeypatch):
    """A daemon keeps the vectors of the gists it embedded ahead (``KEPT_GISTS``, digests and
    vectors, no text); the next daemon of the target loads them, so a cold daemon's first
    prompt embeds only the request."""
    from deltamem.integrations.hookd import KEPT_GISTS, Daemon

    first = _daemon_that_learned_a_turn(home, monkeypatch)
    first.warm_projects()
    kept = first.target.home / KEPT_GISTS
    assert kept.is_file() and (kept.stat().st_mode & 0o777) == 0o600
    assert REQUEST.encode() not in kept.read_bytes()

    second = Daemon(first.target)
    reader = second.reader()
    assert reader is not None
    second.to_warm[CWD] = None
    second.warm_projects()
    assert reader.embed_cache.misses == 0  # every gist was found among the kept vectors
    reader.embed([""])  # the empty scene a request's recall is read with (no model pass)
    before = reader.embed_cache.misses
    request = {"event": "user-prompt", "payload": _payload("UserPromptSubmit", prompt=REQUEST)}
    assert "pytest -q tests/test_checkout.py" in json.dumps(second.handle(request))
    assert reader.embed_cache.misses == before + 1  # the request alone


def test_a_damaged_file_of_kept_gists_is_reported_and_passed_over(home, monkeypatch, caplog):
    """A kept-gists file that is not one (cut short, overwritten) costs only the kept vectors:
    the daemon logs why, opens the memory and answers as it would without the file."""
    from deltamem.integrations.hookd import KEPT_GISTS, Daemon

    first = _daemon_that_learned_a_turn(home, monkeypatch)
    first.warm_projects()
    kept = first.target.home / KEPT_GISTS
    kept.write_bytes(kept.read_bytes()[:100])  # cut short
    second = Daemon(first.target)
    with caplog.at_level(logging.WARNING, logger="deltamem.hookd"):
        reader = second.reader()
    assert reader is not None
    assert any("kept gist vectors were not loaded" in r.getMessage() for r in caplog.records)
    request = {"event": "user-prompt", "payload": _payload("UserPromptSubmit", prompt=REQUEST)}
    assert "pytest -q tests/test_checkout.py" in json.dumps(second.handle(request))


def test_the_collector_paused_for_the_warm_up_runs_again_once_warm(home, monkeypatch):
    """``serve`` pauses Python's cyclic collector while the daemon warms up (what the first
    prompt waits for); ``warm`` turns it back on, whether the load worked or not."""
    import gc

    from deltamem.integrations.hookd import Daemon

    env, db = home
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    daemon = Daemon(target(str(db), "default", "hashing"))
    gc.disable()
    try:
        daemon.warm()
        assert gc.isenabled() and daemon.ready.is_set()
    finally:
        gc.enable()
        gc.unfreeze()


def test_the_daemon_listens_before_it_loads_the_engine():
    """Importing the daemon's module loads neither the engine, numpy nor an embedder runtime:
    it listens first and loads them in the background (``Daemon.warm``), so a hook that just
    started it finds its socket at once."""
    assert _fresh_process_prints(
        "import sys, deltamem.integrations.hookd; print(sorted({'numpy', 'pydantic', "
        "'onnxruntime', 'deltamem.engine.memory', 'deltamem.integrations.claude_code'} "
        "& set(sys.modules)))") == "[]"


def _fresh_process_prints(code: str) -> str:
    """What ``code`` prints in a new interpreter (nothing imported by the tests before it)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_a_hook_process_runs_minilm_on_numpy(monkeypatch, tmp_path):
    """MiniLM with its runtime left open runs on numpy in a hook process: the same vectors as
    ONNX Runtime (tests/embed/test_embed_minilm_onnx.py) under the same name, without a
    runtime session to build before the first prompt can be answered. A named runtime or
    another embedder is kept."""
    from deltamem.embed import MiniLMEmbedder
    from deltamem.integrations.hookd import Daemon, hook_embedder

    monkeypatch.delenv("DELTAMEM_EMBEDDER", raising=False)
    assert hook_embedder(None) == hook_embedder("minilm") == hook_embedder(" MiniLM ")
    assert hook_embedder("minilm") == "minilm:numpy"
    assert [hook_embedder(s) for s in ("minilm:onnx", "static", "hashing")] == \
        ["minilm:onnx", "static", "hashing"]
    monkeypatch.setenv("DELTAMEM_EMBEDDER", "static")
    assert hook_embedder(None) == "static"
    monkeypatch.delenv("DELTAMEM_EMBEDDER")
    embedder = Daemon(target(str(tmp_path / "m.db"))).embedder()
    assert isinstance(embedder, MiniLMEmbedder)
    assert (embedder.name, embedder.runtime) == ("minilm", "numpy")


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="a thread has a nice value of its own on Linux only")
def test_background_work_lowers_its_own_thread_priority_only():
    """The MCP server's speculative imports and the daemon's learner yield the CPU to the
    client (``lower_thread_priority``); the thread that answers requests keeps its priority."""
    import threading

    from deltamem_hook import lower_thread_priority

    seen: dict[str, tuple[int, int]] = {}

    def work() -> None:
        before = os.getpriority(os.PRIO_PROCESS, 0)
        lower_thread_priority()
        seen["worker"] = (before, os.getpriority(os.PRIO_PROCESS, 0))

    main_before = os.getpriority(os.PRIO_PROCESS, 0)
    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    before, after = seen["worker"]
    assert after == min(19, before + 10)
    assert os.getpriority(os.PRIO_PROCESS, 0) == main_before


def test_no_wire_model_is_built_at_import():
    """Every request and answer model of the faces is built when first used (``defer_build``),
    so a process that answers one operation (the hook daemon's first prompt) does not pay for
    all of them at import."""
    assert _fresh_process_prints(
        "import deltamem.formats.api as a, pydantic; print(sorted(n for n, c in "
        "vars(a).items() if isinstance(c, type) and issubclass(c, pydantic.BaseModel) "
        "and c.__pydantic_complete__))") == "[]"


def test_a_hook_process_looks_for_no_pydantic_plugins_and_starts_blas_small(monkeypatch,
                                                                             tmp_path):
    """Looking for pydantic plugins scans every installed package's metadata when the first
    model is built, inside the first answer a session waits for; a hook process skips it. Its
    BLAS library starts with the threads an embedding call may use; a user's values stay."""
    from deltamem.integrations import hookd

    for name in ("PYDANTIC_DISABLE_PLUGINS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, "")  # restored (or removed) afterwards
        monkeypatch.delenv(name)
    monkeypatch.setenv("MKL_NUM_THREADS", "4")  # the user's
    monkeypatch.setenv("DELTAMEM_EMBED_THREADS", "2")
    monkeypatch.setattr(hookd, "_cold_call", lambda args: 0)
    assert hookd.main(["--db", str(tmp_path / "m.db"), "--cold", "user-prompt"]) == 0
    assert os.environ["PYDANTIC_DISABLE_PLUGINS"] == "__all__"
    assert os.environ["OPENBLAS_NUM_THREADS"] == "2"
    assert os.environ["MKL_NUM_THREADS"] == "4"
