"""The fast client of deltamem's agent hooks (``deltamem-hook EVENT``): standard library only.

Claude Code and Codex run a hook command on every prompt and at the end of every turn, and wait
for it. Importing deltamem and loading its embedder takes seconds, so the hook command does
neither:

* ``stop`` (and ``session-end``) writes the transcript's path, its size at this moment, a
  digest of the turn's final reply and the hook's metadata to a spool file (never the
  transcript's contents), pokes the background learner and returns at once. The learner
  (``deltamem.integrations.hookd``) learns each spooled turn, the transcript read to the end of
  that turn (``claude_code.read_turn``), and deletes the spool file only after
  the turn is stored (or, for a transcript that cannot be read, moves it to ``failed/``), so a
  crash loses nothing.
* ``user-prompt`` and ``session-start`` ask the warm daemon over a Unix socket. When none runs,
  the hook starts it (detached; it exits after ``DELTAMEM_HOOK_IDLE`` seconds without a call,
  default 900; it listens at once and loads its memory and embedder in the background).
  ``session-start`` then answers nothing at once, as does any recall while no database exists
  yet; ``user-prompt`` waits for the new daemon within its bound (``RECALL_WAIT``). Where no
  private socket folder can be made, the hook answers without a daemon (cold).

``DELTAMEM_HOOK_DAEMON=0`` turns the daemon off: every hook then runs cold, in a child process
(``python -m deltamem.integrations.hookd --cold EVENT``: this module never imports deltamem's
daemon), and ``stop`` learns before it returns. The daemon serves one database, space and
embedder; its socket lives in a private (0700) runtime directory, its spool and log next to the
database (``<db folder>/.deltamem-hooks/``).
"""

from __future__ import annotations

import _socket  # the C module: ``socket`` imports enum and selectors, a third of a hook's start
import os
import stat
import sys
import time

from deltamem_hook.wire import dumps, loads

# ``typing`` is not imported at run time: a hook's start-up time is its latency, and these names
# serve only the annotations (mypy reads a module's own ``TYPE_CHECKING`` as typing's). Nor are
# ``json``, ``hashlib`` and ``tempfile`` (see :mod:`deltamem_hook.wire`, :func:`digest`,
# :func:`write_new`).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    import subprocess
    from pathlib import Path
    from typing import Any, TypeVar

    P = TypeVar("P", bound="str | os.PathLike[str]")

EVENTS = ("session-start", "user-prompt", "stop", "session-end", "tool-failure")
# How long a hook waits for a daemon it just started (its embedder loads first), and for an
# answer from a running one: together well inside the plugin's 30 s hook timeout.
START_WAIT = 15.0
ANSWER_WAIT = 10.0
# The whole wait of a recall hook (session-start, user-prompt), which the user waits on: past
# it the hook answers nothing (fails open) and a daemon it started keeps starting for the next.
RECALL_WAIT = 1.5
# Prompts that turn the memory off (and on again) for the rest of a session.
OFF_PROMPTS = ("deltamem off", "/deltamem off", "/deltamem:off")
ON_PROMPTS = ("deltamem on", "/deltamem on", "/deltamem:on")


class Target:
    """What one daemon serves, and where its socket, spool and log are. (A plain class, and
    only cheap imports at the top of this module: a hook's start-up time is its latency.)"""

    def __init__(self, db: str, space: str, embedder: str):
        self.db, self.space, self.embedder = db, space, embedder

    @property
    def key(self) -> str:
        extractor = os.environ.get("DELTAMEM_EXTRACTOR", "")
        return digest("\0".join((self.db, self.space, self.embedder, extractor)), 8)

    @property
    def home_dir(self) -> str:
        """Spool and log folder: next to a database file, else in the user's cache."""
        if "://" not in self.db and self.db != ":memory:":
            return os.path.join(os.path.dirname(self.db), ".deltamem-hooks")
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                  ".cache")
        return os.path.join(base, "deltamem", "hooks", self.key)

    @property
    def spool_dir(self) -> str:
        return os.path.join(self.home_dir, "spool")

    @property
    def socket_path(self) -> str:
        """The daemon's socket, in the private runtime folder (:func:`runtime_dir`)."""
        return os.path.join(runtime_dir(), f"hookd-{self.key}.sock")

    # The same as paths (pathlib is imported only by the daemon, not on a hook's hot path).
    @property
    def home(self) -> Path:
        from pathlib import Path

        return Path(self.home_dir)

    @property
    def spool(self) -> Path:
        from pathlib import Path

        return Path(self.spool_dir)

    @property
    def socket(self) -> Path:
        from pathlib import Path

        return Path(self.socket_path)


def target(db: str, space: str = "default", embedder: str | None = None) -> Target:
    """The daemon target of a hook's options (a local path made absolute)."""
    if "://" not in db and db != ":memory:":
        db = os.path.realpath(os.path.expanduser(db.removeprefix("sqlite:")))
    return Target(db, space, embedder or os.environ.get("DELTAMEM_EMBEDDER", ""))


def runtime_dir() -> str:
    """The folder of the daemons' sockets: ``$XDG_RUNTIME_DIR`` when it is a private folder of
    this user (:func:`private_problem`), else ``~/.deltamem/run``. Never a folder of a shared
    place such as ``/tmp``, whose predictable name another user could create first."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and private_problem(runtime) is None:
        return runtime
    return os.path.join(os.path.expanduser("~"), ".deltamem", "run")


def private_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` is not a private folder of this user (None when it is): read with
    ``lstat``, so a symbolic link is refused rather than followed."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    if st.st_uid != os.getuid():
        return f"belongs to uid {st.st_uid}, not to this user (uid {os.getuid()})"
    if stat.S_IMODE(st.st_mode) & 0o077:
        return f"has mode {stat.S_IMODE(st.st_mode):04o}; only its owner may enter it (0700)"
    return None


def private_dir(path: P) -> P:
    """``path`` as a folder only this user may enter (mode 0700), created when missing (its
    missing parents too, each 0700). A folder of this user that others could only read (an
    older install's 0755) is tightened to 0700.

    Raises:
        PermissionError: ``path`` is a symbolic link, not a folder, another user's folder, or
            one that others may write into (never repaired: it may already hold what they
            planted).
    """
    where = str(path)  # a str or a pathlib path
    missing = []
    folder = os.path.abspath(where)
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    for new in reversed(missing):  # exist_ok: a concurrent hook may make it (checked below)
        os.makedirs(new, 0o700, exist_ok=True)
    try:
        fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:  # ELOOP (a link) or ENOTDIR
        raise PermissionError(f"refusing the folder {where}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        mode = stat.S_IMODE(st.st_mode)
        problem = (f"it belongs to uid {st.st_uid}, not to this user" if st.st_uid != os.getuid()
                   else f"others may write into it (mode {mode:04o})" if mode & 0o022 else None)
        if problem is not None:
            raise PermissionError(f"refusing the folder {where}: {problem}")
        if mode & 0o077:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    return path


def open_lock(path: str) -> int:
    """A daemon's lock file opened for ``flock`` (a file descriptor), never through a link.

    Raises:
        PermissionError: the lock is a link, not a regular file, or another user's.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:  # ELOOP: a symbolic link in its place
        raise PermissionError(f"refusing the lock {path}: {exc.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        os.close(fd)
        raise PermissionError(f"refusing the lock {path}: not a file of this user")
    return fd


def peer_uid(conn: socket.socket | _socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket; None where the OS does not
    report it (``SO_PEERCRED`` is Linux's; elsewhere the private folder is the guard)."""
    option = getattr(_socket, "SO_PEERCRED", None)
    if option is None:  # pragma: no cover - not Linux
        return None
    import struct

    raw = conn.getsockopt(_socket.SOL_SOCKET, option, struct.calcsize("3i"))
    return int(struct.unpack("3i", raw)[1])


def same_user(conn: socket.socket | _socket.socket) -> bool:
    """Whether the other end of ``conn`` runs as this user (True where the OS cannot say)."""
    uid = peer_uid(conn)
    return uid is None or uid == os.getuid()


def daemon_enabled() -> bool:
    return os.environ.get("DELTAMEM_HOOK_DAEMON", "1").lower() not in ("0", "false", "no", "off")


def lower_thread_priority(increment: int = 10) -> None:
    """Lower the calling thread's CPU priority by ``increment`` (nice, at most 19), for work
    nobody waits on that would otherwise take a core from the agent's client while it starts
    or ends a session: the MCP server's speculative imports, the daemon's learner.

    Linux only, where a thread has a nice value of its own (setpriority(2), "Bugs"); elsewhere
    the value is the whole process's, so nothing is changed. An unprivileged thread cannot raise
    its priority again, so only threads that do nothing else call this.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        now = os.getpriority(os.PRIO_PROCESS, 0)
        os.setpriority(os.PRIO_PROCESS, 0, min(19, now + increment))
    except OSError:
        pass  # not allowed here (a sandbox): the work runs at the priority it has


def reply_digest(text: str) -> str:
    """A digest of a turn's final reply (whitespace-insensitive): the spool records it, never the
    text, so the learner can tell when the client has flushed that reply to the transcript."""
    return digest(" ".join(text.split()), 12)


def digest(text: str, size: int) -> str:
    """The BLAKE2b hex digest of ``text`` (``size`` bytes): ``_blake2`` directly, as
    ``hashlib`` would give it (importing ``hashlib`` loads OpenSSL first)."""
    try:
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - a build without it
        from hashlib import blake2b
    return blake2b(text.encode(), digest_size=size).hexdigest()


def write_new(folder: str, name: str, text: str, *, sync: bool = False) -> str:
    """Write ``text`` to ``folder/name`` atomically (a reader never sees half a file): a private
    (0600) temporary file first, never opened through a link, then renamed. Returns the path."""
    tmp = os.path.join(folder, f".tmp-{os.getpid()}-{time.time_ns()}.json")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            if sync:
                handle.flush()
                os.fsync(handle.fileno())
        path = os.path.join(folder, name)
        os.replace(tmp, path)
    except BaseException:
        try:  # noqa: SIM105 - contextlib is an import a hook does without
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def spool_stop(t: Target, payload: dict[str, Any], scope: str | None = None,
               event: str = "stop") -> str:
    """Queue a finished turn for the learner: the transcript's path and size, the hook's
    metadata. Written atomically (a reader never sees half a file)."""
    path = str(payload.get("transcript_path") or "")
    try:
        size = os.path.getsize(path) if path else 0
    except OSError:
        size = 0
    reply = payload.get("last_assistant_message")
    entry = {"transcript_path": path, "size": size, "cwd": str(payload.get("cwd") or ""),
             "session_id": str(payload.get("session_id") or ""), "scope": scope, "event": event,
             "queued_at": time.time(),
             "reply_digest": reply_digest(reply) if isinstance(reply, str) and reply else None}
    folder = private_dir(t.spool_dir)
    path = write_new(folder, f"{time.time_ns():020d}-{os.getpid()}.json", dumps(entry),
                     sync=True)
    close_turn(t, payload)
    return path


def ask(t: Target, request: dict[str, Any], timeout: float = ANSWER_WAIT) -> dict[str, Any] | None:
    """One request to the running daemon; None when none answers."""
    try:
        return exchange(t, request, timeout)
    except OSError:
        return None


def exchange(t: Target, request: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    """:func:`ask`, raising the OSError of a connection that failed: ``FileNotFoundError`` or
    ``ConnectionRefusedError`` where no daemon listens (none runs, or one was killed and left
    its socket file behind)."""
    if private_problem(os.path.dirname(t.socket_path)) is not None:
        return None  # never talk through a folder someone else controls
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.settimeout(timeout)
        conn.connect(t.socket_path)
        if not same_user(conn):
            return None  # another user's process bound the name: tell it nothing
        conn.sendall(dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        conn.close()
    try:
        answer = loads(data)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def first_ask(t: Target, request: dict[str, Any]) -> tuple[dict[str, Any] | None, bool]:
    """A recall hook's request to the daemon (within ``RECALL_WAIT``): the answer (None: none),
    and whether no daemon listens -- no socket file, or one whose daemon was killed and left it
    behind (``ConnectionRefusedError``); a busy or hung daemon (a timeout) is one that listens."""
    try:
        return exchange(t, request, RECALL_WAIT), False
    except (FileNotFoundError, ConnectionRefusedError):
        return None, True
    except OSError:
        return None, False


def nothing_stored(t: Target) -> bool:
    """Whether the memory's database file does not exist yet (a first session): a recall then
    has nothing to find, and is answered without waiting for a daemon."""
    return "://" not in t.db and t.db != ":memory:" and not os.path.exists(t.db)


def start_daemon(t: Target) -> subprocess.Popen[bytes]:
    """Start the daemon for ``t``, detached from the hook (its own session, no terminal)."""
    import subprocess

    home = private_dir(t.home_dir)
    log = os.open(os.path.join(home, "hookd.log"),  # private, and never through a link
                  os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "deltamem.integrations.hookd", "--db", t.db, "--space",
             t.space, *(["--embedder", t.embedder] if t.embedder else [])],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            close_fds=True)
    finally:
        os.close(log)


def wait_for(t: Target, child: subprocess.Popen[bytes], request: dict[str, Any],
             limit: float = START_WAIT) -> dict[str, Any] | None:
    """Ask the daemon just started, as soon as it listens (None if it died or never did)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if os.path.exists(t.socket_path):
            answer = ask(t, request, timeout=max(0.05, deadline - time.monotonic()))
            if answer is not None:
                return answer
        if child.poll() is not None and not os.path.exists(t.socket_path):
            return None  # it exited (another daemon won the lock, or it failed): see the log
        time.sleep(0.05)
    return None


def run(event: str, payload: dict[str, Any], *, db: str, space: str = "default",
        embedder: str | None = None, budget_tokens: int | None = None,
        scope: str | None = None) -> dict[str, Any]:
    """Handle one hook call through the daemon; return the JSON to print ({} for nothing).

    A recall hook (``session-start``, ``user-prompt``) waits at most ``RECALL_WAIT`` seconds in
    all and then answers nothing (fails open); a daemon it started keeps starting. Where no
    daemon runs, ``session-start`` starts one and answers nothing at once (the session never
    waits for a daemon's start), and so does ``user-prompt`` while nothing is stored yet
    (:func:`nothing_stored`). A session the user switched off (:func:`switched_off`) gets
    nothing and teaches nothing.

    Raises:
        RuntimeError: the daemon answered with an error (its message).
    """
    if event not in EVENTS:
        raise ValueError(f"unknown hook event {event!r} (one of {', '.join(EVENTS)})")
    t = target(db, space, embedder)
    if answered_here(t, event, payload):
        return {}
    if event in ("stop", "session-end"):  # both learn: queued for the daemon's learner
        transcript = payload.get("transcript_path")
        if transcript and not os.path.isfile(str(transcript)):
            raise ValueError(f"cannot read transcript {transcript}: no such file")
        entry = os.path.basename(spool_stop(t, payload, scope, event))
        reply = payload.get("last_assistant_message")
        # The reply goes to a running learner in memory only (the spool keeps its digest): if
        # the client never flushes it to the transcript, the learner still has it.
        drain = {"event": "drain", "entry": entry,
                 "reply": reply if isinstance(reply, str) else None}
        if ask(t, drain, timeout=2.0) is None:
            start_daemon(t)
        return {}
    if event == "user-prompt":
        open_turn(t, payload, scope)
    request = {"event": event, "payload": payload, "budget_tokens": budget_tokens,
               "scope": scope}
    try:
        private_dir(os.path.dirname(t.socket_path))
    except OSError as exc:
        raise LookupError(f"no private folder for the daemon's socket: {exc}") from None
    deadline = time.monotonic() + RECALL_WAIT
    answer, none_listens = first_ask(t, request)
    if none_listens:
        child = start_daemon(t)  # detached: it loads and warms while the session goes on
        if event == "session-start" or nothing_stored(t):
            return {}  # the session starts now; its prompts find the daemon listening
        answer = wait_for(t, child, request, limit=deadline - time.monotonic())
    if answer is None:  # not ready in time (starting, busy or hung): no notes this time
        return {}
    if "error" in answer:
        raise RuntimeError(str(answer["error"]))
    output = answer.get("output")
    return output if isinstance(output, dict) else {}


def _session(payload: dict[str, Any]) -> str:
    """The hook's session id as a safe file name ("" when there is none)."""
    return "".join(c for c in str(payload.get("session_id") or "") if c.isalnum() or c in "-_")


def open_turn(t: Target, payload: dict[str, Any], scope: str | None = None, *,
              waiting: bool = False) -> bool:
    """A turn began (``user-prompt``): keep a marker (the transcript's path, never its text)
    until its ``stop`` or ``session-end`` comes. A marker whose transcript has not changed for
    ``DELTAMEM_TURN_STALE`` seconds is a turn the client never ended (killed, or its end hook
    cut short): the learner learns it as it stands. ``waiting``: see :func:`keep_waiting`.
    True when the marker was written."""
    session, path = _session(payload), str(payload.get("transcript_path") or "")
    if not session or not path:
        return False
    folder = private_dir(os.path.join(t.spool_dir, "open"))
    if waiting and os.path.exists(os.path.join(folder, f"{session}.json")):
        return False  # a turn begun since: its own marker stands
    entry = {"transcript_path": path, "cwd": str(payload.get("cwd") or ""),
             "session_id": str(payload.get("session_id")), "scope": scope,
             "opened_at": time.time(), **({"waiting": True} if waiting else {})}
    write_new(folder, f"{session}.json", dumps(entry))
    return True


def keep_waiting(t: Target, payload: dict[str, Any], scope: str | None = None) -> bool:
    """A turn ended with its task waiting on the user's answer (the learner found it so, and
    learns it once the user answers or moves on, or the session ends): keep an
    :func:`open_turn` marker marked ``waiting``, unless the session holds one already (a turn
    begun since). A client that never says the session ended (print mode, a closed terminal)
    leaves it; once the transcript has not changed for ``DELTAMEM_TURN_STALE`` seconds the
    learner learns the task as the session's end would: unfinished. True when written."""
    return open_turn(t, payload, scope, waiting=True)


def close_turn(t: Target, payload: dict[str, Any]) -> None:
    session = _session(payload)
    if session:
        try:  # noqa: SIM105 - contextlib is an import a hook does without
            os.unlink(os.path.join(t.spool_dir, "open", f"{session}.json"))
        except OSError:
            pass


def switched_off(t: Target, payload: dict[str, Any], event: str) -> bool:
    """Whether the memory is off for this hook call: ``DELTAMEM_OFF`` set (for every session
    started with it), or the session switched off by a prompt ``deltamem off`` (until a prompt
    ``deltamem on``); the switch is a file named by the session's id in the spool folder."""
    if os.environ.get("DELTAMEM_OFF", "").lower() in ("1", "true", "yes", "on"):
        return True
    session = _session(payload)
    if not session:
        return False
    marker = os.path.join(t.home_dir, "off", session)
    if event == "user-prompt":
        prompt = " ".join(str(payload.get("prompt") or "").lower().split())
        if prompt in OFF_PROMPTS:
            private_dir(os.path.dirname(marker))
            with open(marker, "w", encoding="utf-8"):
                pass
            return True
        if prompt in ON_PROMPTS:
            if os.path.exists(marker):
                os.unlink(marker)
            return True
    return os.path.exists(marker)


def answered_here(t: Target, event: str, payload: dict[str, Any]) -> bool:
    """Handle what needs no memory (a switched-off session, a failed tool call); True when the
    call is done with and answers nothing."""
    if switched_off(t, payload, event):
        return True
    if event == "tool-failure":
        note_failure(t, payload)
        return True
    return False


def failures(t: Target, session: str) -> dict[str, bool]:
    """The calls of a session Claude Code reported failed: ``{tool_use_id: is_interrupt}``."""
    name = _session({"session_id": session})
    path = os.path.join(t.spool_dir, "failures", f"{name}.jsonl")
    out: dict[str, bool] = {}
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    entry = loads(line)
                    out[str(entry["tool_use_id"])] = bool(entry.get("is_interrupt"))
                except (ValueError, KeyError, TypeError):
                    continue
    except OSError:
        pass
    return out


def note_failure(t: Target, payload: dict[str, Any]) -> None:
    """Claude Code's ``PostToolUseFailure``: keep which call failed and whether the user
    interrupted it (its id and a flag, never its error text) for the learner, which marks that
    call's result failed even where the transcript does not."""
    session = _session(payload)
    call = payload.get("tool_use_id")
    if not session or not isinstance(call, str) or not call:
        return
    folder = private_dir(os.path.join(t.spool_dir, "failures"))
    line = dumps({"tool_use_id": call, "is_interrupt": bool(payload.get("is_interrupt"))})
    with open(os.path.join(folder, f"{session}.jsonl"), "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def _budget(event: str) -> int | None:
    """A recall hook's token budget from the environment: ``DELTAMEM_<EVENT>_TOKENS``, else the
    plugin option ``CLAUDE_PLUGIN_OPTION_<EVENT>_TOKENS`` (Claude Code's userConfig)."""
    name = f"{event.upper().replace('-', '_')}_TOKENS"
    for key in (f"DELTAMEM_{name}", f"CLAUDE_PLUGIN_OPTION_{name}"):
        raw = os.environ.get(key, "").strip()
        if raw.isdigit():
            return int(raw)
    return None


def _options(argv: list[str]) -> tuple[str, dict[str, Any]]:
    """The event and options; the plugin's plain command lines are read without argparse
    (its import is a noticeable part of a hook's latency), anything else with it."""
    fast = _plain_options(argv)
    if fast is not None:
        return fast
    import argparse

    parser = argparse.ArgumentParser(prog="deltamem-hook", description=__doc__.split("\n")[0])
    parser.add_argument("event", choices=EVENTS)
    parser.add_argument("--db", default=os.environ.get("DELTAMEM_DB", "deltamem.db"))
    parser.add_argument("--space", default=os.environ.get("DELTAMEM_SPACE", "default"))
    parser.add_argument("--embedder", default=None)
    parser.add_argument("--budget-tokens", type=int, default=None)
    parser.add_argument("--scope", choices=("project", "user", "global"), default=None)
    args = parser.parse_args(argv)
    budget = args.budget_tokens if args.budget_tokens is not None else _budget(args.event)
    return args.event, {"db": args.db, "space": args.space, "embedder": args.embedder,
                        "budget_tokens": budget, "scope": args.scope}


FLAGS = {"--db": "db", "--space": "space", "--embedder": "embedder",
         "--budget-tokens": "budget_tokens", "--scope": "scope"}


def _plain_options(argv: list[str]) -> tuple[str, dict[str, Any]] | None:
    if not argv or argv[0] not in EVENTS or len(argv) % 2 == 0:
        return None
    options: dict[str, Any] = {"db": os.environ.get("DELTAMEM_DB", "deltamem.db"),
                               "space": os.environ.get("DELTAMEM_SPACE", "default"),
                               "embedder": None, "budget_tokens": None, "scope": None}
    for flag, value in zip(argv[1::2], argv[2::2], strict=True):
        if flag not in FLAGS or value.startswith("-"):
            return None
        options[FLAGS[flag]] = value
    if options["budget_tokens"] is not None:
        if not options["budget_tokens"].isdigit():
            return None
        options["budget_tokens"] = int(options["budget_tokens"])
    else:
        options["budget_tokens"] = _budget(argv[0])
    return argv[0], options


def main(argv: list[str] | None = None) -> None:
    """``deltamem-hook EVENT [--db ...]``: like ``deltamem hook``, without importing deltamem
    unless the daemon is off or cannot start. Never exits 2 (that would block the agent)."""
    event, options = _options(sys.argv[1:] if argv is None else argv)
    try:
        payload = loads(sys.stdin.read() or "{}")
        if not isinstance(payload, dict):
            raise ValueError("the hook input must be a JSON object")
        if not daemon_enabled():
            raise LookupError("daemon off")
        out = run(event, payload, **options)
    except LookupError:  # the daemon is off or cannot serve: the slow path, in a child process
        out = _cold(event, payload, options)
    except Exception as exc:  # noqa: BLE001 - a hook must not break the agent's session
        _fail(event, exc)
    if out:
        sys.stdout.write(dumps(out, ensure_ascii=False) + "\n")


def _cold(event: str, payload: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """The hook call answered as without a daemon, by ``python -m deltamem.integrations.hookd
    --cold`` in a child process (this module never imports deltamem's daemon: the process is
    the boundary between the two)."""
    import subprocess

    command = [sys.executable, "-m", "deltamem.integrations.hookd", "--cold", event]
    for flag, name in FLAGS.items():
        if options.get(name) is not None:
            command += [flag, str(options[name])]
    done = subprocess.run(command, input=dumps(payload), capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        sys.stderr.write(f"error: deltamem hook {event}: "
                         f"{lines[-1] if lines else f'exit {done.returncode}'}\n")
        raise SystemExit(1)
    answer = loads(done.stdout) if done.stdout.strip() else {}
    return answer if isinstance(answer, dict) else {}


def _fail(event: str, exc: BaseException) -> None:
    message = f"error: deltamem hook {event}: {type(exc).__name__}: {exc}"
    try:
        from deltamem.errors import redacted

        message = redacted(message)
    except ImportError:  # pragma: no cover
        message = f"error: deltamem hook {event}: {type(exc).__name__}"
    sys.stderr.write(" ".join(message.split()) + "\n")
    raise SystemExit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
