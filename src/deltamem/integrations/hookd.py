"""The warm side of the agent hooks: a local daemon and the background learner.

``python -m deltamem.integrations.hookd --db PATH [--space S] [--embedder E] [--idle SECONDS]``
serves one database, space and embedder on a Unix socket (see :mod:`deltamem_hook` for where it
lives and how hooks start it). It keeps the memory open and the embedder loaded, so a
``user-prompt`` or ``session-start`` hook is a socket round trip and one recall.

Protocol: one JSON line per connection, one JSON line back. ``{"event": "user-prompt" |
"session-start", "payload": {...}, "budget_tokens": N}`` answers ``{"output": {...}}`` (what the
hook prints) or ``{"error": "..."}`` (redacted); ``{"event": "drain", "entry": NAME, "reply":
TEXT}`` wakes the learner (keeping the turn's final reply in memory for that spool entry) and
answers ``{"output": {}}``; ``{"event": "ping"}`` answers ``{"output": {"pid": ...}}``.

The learner drains the spool in order: each entry is a transcript's path and its size when the
turn ended; the transcript is read to the end of that turn (``claude_code.read_turn``: lines the
client flushed after the hook are this turn's, a later turn already appended is not), the turn
learned (``claude_code.learn_turn``, which goes through the facade and so is
redacted), and only then is the entry deleted. A transcript that cannot be read is moved to
``failed/``; an entry whose learning failed for another reason (the store locked, the model
unreachable) stays and is retried. The daemon exits after ``--idle`` seconds without a request
once the spool is empty (default ``DELTAMEM_HOOK_IDLE`` or 900); ``kill`` (SIGTERM) stops it at
once (a turn being learned is then retried by the next daemon). One daemon per target: a
second one exits when it cannot take the lock.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import gc
import json
import logging
import os
import shutil
import signal
import socketserver
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deltamem.errors import ConfigError, EpisodeError, SpaceNotFound, redacted
from deltamem.integrations import env
from deltamem_hook import (
    Target,
    answered_here,
    failures,
    keep_waiting,
    lower_thread_priority,
    nothing_stored,
    open_lock,
    private_dir,
    same_user,
    spool_stop,
    target,
)

# The engine, the embedder and the coding rules are imported where they are used, not here: a
# daemon listens first and loads them in the background (``Daemon.warm``), the embedder's
# weights beside the engine's modules, and the first prompt of a session waits for that.
if TYPE_CHECKING:
    from deltamem.embed.base import Embedder
    from deltamem.engine.memory import DeltaMem
    from deltamem.extract.base import Extractor

log = logging.getLogger("deltamem.hookd")
DEFAULT_IDLE = 900.0
WARM_BATCH = 8  # gists embedded ahead between two looks at the spool
# The gists' vectors a daemon keeps for the next one, in its target's home: digests and vectors,
# no text (``EmbeddingCache.save``). The gists are made of what the memory stores (redacted at
# learning); a request's own vector is never kept.
KEPT_GISTS = "gists.npz"
# A turn begun (user-prompt) whose transcript has not changed for this long, with no Stop or
# SessionEnd, was never ended by its client: it is learned as it stands (DELTAMEM_TURN_STALE).
DEFAULT_TURN_STALE = 1800.0


def hook_embedder(spec: str | None) -> str:
    """The embedder a hook process loads for ``spec`` (default: the configured one).

    MiniLM with its runtime left open (``minilm``, the default) runs on numpy here, not ONNX
    Runtime: the same network from the same weights, so the same vectors (within 1e-5, tested)
    under the same name. A hook process waits for its embedder before the first prompt can be
    answered, and numpy needs no runtime session: it is ready ~160 ms sooner and the daemon holds
    159 MB resident instead of 322 MB, for a few ms more per query (docs/results.md, turn 8).
    A runtime named in the spec (``minilm:onnx``) is kept.
    """
    from deltamem.config import Settings

    spec = spec or Settings.from_env().embedder
    return "minilm:numpy" if spec.strip().lower() == "minilm" else spec


def cold(event: str, payload: Mapping[str, Any], *, db: str, space: str = "default",
         embedder: str | None = None, budget_tokens: int | None = None,
         scope: str | None = None) -> dict[str, Any]:
    """One hook call in this process, as without a daemon (``stop`` learns before it returns).

    Raises:
        EpisodeError: an unknown event, or a transcript that cannot be read.
    """
    if answered_here(target(db, space, embedder), event, dict(payload)):
        return {}
    if "://" not in db and db != ":memory:":  # the plugin's own file, e.g. ~/.deltamem/
        local = Path(db.removeprefix("sqlite:")).expanduser()
        local.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the user's alone
        db = str(local)
    from deltamem.engine.memory import DeltaMem, check_space
    from deltamem.integrations.claude_code import run_hook

    try:
        # Only the stop hook writes; the recall hooks read, so a first session (no memory yet)
        # just adds nothing.
        with DeltaMem.open(db, space=check_space(space), embedder=hook_embedder(embedder),
                           create=event in ("stop", "session-end")) as mem:
            # ``stop`` learns with the configured extractor under the coding rules
            # (``claude_code.hook_extractor``), whatever ``mem`` was opened with.
            return run_hook(mem, event, payload, budget_tokens=budget_tokens, scope=scope)
    except SpaceNotFound:
        return {}


class Daemon:
    """The memory kept open for one target, its socket server and its learner."""

    def __init__(self, t: Target, *, idle: float = DEFAULT_IDLE,
                 turn_stale: float = DEFAULT_TURN_STALE):
        self.target = t
        self.idle = idle
        self.turn_stale = turn_stale
        self.last = time.monotonic()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self._reader: DeltaMem | None = None
        self._embedder: Embedder | None = None
        self._writer: DeltaMem | None = None
        self._coding_extractor: Extractor | None = None
        self._read_lock = threading.Lock()
        self._load_lock = threading.Lock()  # one embedder, whichever thread asks first
        self.ready = threading.Event()  # set once the memory and embedder are loaded (warm)
        # Final replies the Stop hooks reported, by spool entry (held in memory, never written).
        self.replies: dict[str, str] = {}
        # Project folders whose task gists the learner embeds ahead (``CodingMemory.warm``),
        # into the embedding cache the reader and the writer share.
        self.to_warm: dict[str, None] = {}
        self._cache: Any = None
        self._server: socketserver.ThreadingUnixStreamServer | None = None

    # -- memories -------------------------------------------------------------------------
    def embedder(self) -> Embedder:
        """One embedder in memory, shared by the reader and the writer."""
        with self._load_lock:
            if self._embedder is None:
                from deltamem.embed import make_embedder

                self._embedder = make_embedder(hook_embedder(self.target.embedder))
            return self._embedder

    def warm(self) -> None:
        """Open the memory and load the embedder, its weights included (``warm()`` where the
        embedder has one), in the background right after the daemon starts listening: a
        request meanwhile either finds nothing to recall (``nothing_stored``) or waits
        for it, never for the daemon's start. The weights load in a thread of their own while
        this one imports the engine and opens the memory: they overlap only where the runtime
        releases Python's lock (little, as measured here: docs/results.md, turn 7)."""
        loading: threading.Thread | None = None
        started = time.monotonic()
        try:
            warm = getattr(self.embedder(), "warm", None)
            if callable(warm):
                loading = threading.Thread(target=self._warm_embedder, args=(warm,),
                                           name="deltamem-embedder", daemon=True)
                loading.start()
            from deltamem.integrations.claude_code import run_hook  # noqa: F401 - load it now
            from deltamem.integrations.coding_memory import count_tokens

            count_tokens("deltamem")  # loads the tokenizer the notes' budgets are counted with

            if not self.pending():  # else the learner opens the writer, on this embedder
                with self._read_lock:
                    self.reader()
        except Exception as exc:  # noqa: BLE001 - a request retries the load, and says why
            log.warning("%s", redacted(f"loading the memory failed: {type(exc).__name__}: "
                                       f"{exc}"))
        finally:
            if loading is not None:
                loading.join()
            if not gc.isenabled():  # paused by serve() for the warm-up
                gc.freeze()  # what was loaded lives as long as the daemon: never scan it again
                gc.enable()
            self.ready.set()
            log.info("warm: memory and embedder loaded in %.0f ms",
                     (time.monotonic() - started) * 1000)

    @staticmethod
    def _warm_embedder(warm: Any) -> None:
        from deltamem._util.threads import blas_threads
        from deltamem.config import Settings

        try:
            # Under the engine's own limit: its first pass must not run on every core the
            # BLAS library sees while the client starts beside it.
            with blas_threads(Settings.from_env().embed_threads):
                warm()
        except Exception as exc:  # noqa: BLE001 - the first embed retries, and says why
            log.warning("%s", redacted(f"loading the embedder failed: {type(exc).__name__}: "
                                       f"{exc}"))

    def _shared(self, mem: DeltaMem) -> DeltaMem:
        """``mem`` on the one embedding cache of this daemon (what the learner embeds ahead,
        the reader finds)."""
        with self._load_lock:
            if self._cache is None:
                self._cache = mem.embed_cache
                self._load_gists()
            mem.embed_cache = self._cache
        return mem

    def _load_gists(self) -> None:
        """Load the gists' vectors the last daemon of this target kept: a cold daemon's first
        prompt then embeds only the request, not the gists of the tasks it ranks."""
        path = self.target.home / KEPT_GISTS
        if not path.is_file():
            return
        try:
            log.info("loaded %d kept gist vectors", self._cache.load(path))
        except (OSError, ValueError) as exc:
            log.warning("%s", redacted(f"the kept gist vectors were not loaded: "
                                       f"{type(exc).__name__}: {exc}"))

    def _keep_gists(self, embedder: str, texts: list[str]) -> None:
        """Keep the vectors of ``texts`` (a project's gists) for the next daemon."""
        try:
            home = private_dir(self.target.home)
            self._cache.save(home / KEPT_GISTS, embedder, texts)
        except OSError as exc:
            log.warning("%s", redacted(f"the gist vectors were not kept: "
                                       f"{type(exc).__name__}: {exc}"))

    def writer(self) -> DeltaMem:
        if self._writer is None:
            from deltamem.engine.memory import DeltaMem, check_space

            t = self.target
            self._writer = self._shared(DeltaMem.open(t.db, space=check_space(t.space),
                                                      embedder=self.embedder(),
                                                      extractor="trace"))
        return self._writer

    def extractor(self) -> Extractor:
        """The configured extractor under the coding rules (``claude_code.hook_extractor``),
        built once: with ``DELTAMEM_EXTRACTOR=llm`` turns are distilled by that model."""
        if self._coding_extractor is None:
            from deltamem.integrations.claude_code import hook_extractor

            self._coding_extractor = hook_extractor()
        return self._coding_extractor

    def reader(self) -> DeltaMem | None:
        """The memory recalls read (None while the database or space does not exist)."""
        if self._reader is None:
            from deltamem.engine.memory import DeltaMem, check_space

            t = self.target
            try:
                self._reader = self._shared(DeltaMem.open(
                    t.db, space=check_space(t.space), embedder=self.embedder(), create=False))
            except SpaceNotFound:
                return None
        return self._reader

    # -- requests -------------------------------------------------------------------------
    def handle(self, request: Mapping[str, Any]) -> dict[str, Any]:
        self.last = time.monotonic()
        event = request.get("event")
        if event == "ping":
            return {"output": {"pid": os.getpid()}}
        if event == "drain":
            entry, reply = request.get("entry"), request.get("reply")
            if isinstance(entry, str) and isinstance(reply, str) and reply:
                with self._read_lock:
                    self.replies[entry] = reply
                    while len(self.replies) > 256:  # entries learned elsewhere: drop the oldest
                        self.replies.pop(next(iter(self.replies)))
            self.wake.set()
            return {"output": {}}
        if event not in ("session-start", "user-prompt"):
            return {"error": f"unknown hook event {event!r}"}
        payload = request.get("payload")
        budget = request.get("budget_tokens")
        scope = request.get("scope")
        if not self.ready.is_set() and nothing_stored(self.target):
            return {"output": {}}
        from deltamem.integrations.claude_code import run_hook

        try:
            with self._read_lock:
                mem = self.reader()
                if mem is None:
                    return {"output": {}}
                out = run_hook(mem, str(event), payload if isinstance(payload, Mapping) else {},
                               budget_tokens=budget if isinstance(budget, int) else None,
                               scope=scope if isinstance(scope, str) else None)
        except Exception as exc:  # noqa: BLE001 - answered to the hook, which exits 1
            return {"error": redacted(f"{type(exc).__name__}: {exc}")}
        cwd = payload.get("cwd") if isinstance(payload, Mapping) else None
        if event == "session-start" and isinstance(cwd, str) and cwd:
            with self._read_lock:
                self.to_warm[cwd] = None
            self.wake.set()
        return {"output": out}

    # -- learner --------------------------------------------------------------------------
    def pending(self) -> list[Path]:
        folder = self.target.spool
        return sorted(folder.glob("[0-9]*.json")) if folder.is_dir() else []

    def drain(self) -> int:
        """Learn every spooled turn in order; return how many were handled."""
        done = 0
        for entry in self.pending():
            if self.stopping.is_set():
                break
            if self.learn_entry(entry):
                done += 1
            else:
                break  # keep the order: retry this entry before any later one
        return done

    def learn_entry(self, entry: Path) -> bool:
        """Learn one spool entry; True when it is finished with (learned, or moved to failed/)."""
        from deltamem.integrations.claude_code import learn_turn, read_turn, waiting_on_user

        started = time.monotonic()
        try:
            data = json.loads(entry.read_text(encoding="utf-8"))
            path, size = str(data["transcript_path"]), int(data.get("size") or 0)
            cwd = str(data.get("cwd") or "")
            scope = data.get("scope") if isinstance(data.get("scope"), str) else None
            session = str(data.get("session_id") or "")
            digest = data.get("reply_digest")
            queued = data.get("queued_at")
            with self._read_lock:
                reply = self.replies.pop(entry.name, None)
            transcript = read_turn(path, size, digest=digest if isinstance(digest, str) else None,
                                   reply=reply,
                                   since=float(queued) if isinstance(queued, int | float)
                                   else None, failed=failures(self.target, session))
            read_ms = (time.monotonic() - started) * 1000
            event = data.get("event")
            if transcript.messages:
                writer = self.writer()
                # A task left waiting on the user whose session went quiet ("quiet") is
                # learned as the session's end would learn it: unfinished.
                learn_turn(writer, transcript, cwd=cwd, scope=scope or env.scope(),
                           extractor=self.extractor(),
                           meta={"session": session} if session else {},
                           session_end=event in ("session-end", "quiet"))
                with self._read_lock:
                    self.to_warm[cwd or transcript.cwd] = None
                if event == "stop" and waiting_on_user(transcript):
                    keep_waiting(self.target, data, scope)
            # How long a turn took to learn (its entry's number, never its content).
            log.info("learned turn %s (%d messages) in %.0f ms (%.0f ms reading it)",
                     entry.name, len(transcript.messages),
                     (time.monotonic() - started) * 1000, read_ms)
        except (EpisodeError, ValueError, KeyError, TypeError) as exc:
            log.warning("%s", redacted(f"spooled turn {entry.name} cannot be learned: {exc}"))
            failed = private_dir(self.target.spool / "failed")
            shutil.move(str(entry), failed / entry.name)
            return True
        except Exception as exc:  # noqa: BLE001 - kept in the spool and retried
            log.warning("%s", redacted(f"learning {entry.name} failed, will retry: "
                                       f"{type(exc).__name__}: {exc}"))
            return False
        entry.unlink(missing_ok=True)
        return True

    def abandoned(self) -> int:
        """Queue the turns the client began and never ended (see ``deltamem_hook.open_turn``),
        and the tasks left waiting on the user in a session that said no more
        (``deltamem_hook.keep_waiting``, queued as ``quiet``): those whose transcript has not
        changed for ``turn_stale`` seconds."""
        folder = self.target.spool / "open"
        queued = 0
        for marker in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                data = json.loads(marker.read_text(encoding="utf-8"))
                changed = os.path.getmtime(str(data["transcript_path"]))
            except (OSError, ValueError, KeyError, TypeError):
                marker.unlink(missing_ok=True)
                continue
            if time.time() - changed >= self.turn_stale:
                spool_stop(self.target, data, data.get("scope"),
                           event="quiet" if data.get("waiting") is True else "abandoned")
                queued += 1
        return queued

    def learner(self) -> None:
        """Drain the spool as turns end (woken by ``drain``), at a lower CPU priority: a turn
        is learned while the client ends its session or starts the next."""
        lower_thread_priority()
        backoff = 1.0
        while not self.stopping.is_set():
            self.wake.wait(timeout=backoff)
            self.wake.clear()
            if self.stopping.is_set():
                break
            self.abandoned()
            before = len(self.pending())
            self.drain()
            left = len(self.pending())
            if left == 0:
                self.warm_projects()
            backoff = 1.0 if left == 0 or left < before else min(backoff * 2, 60.0)
            if left == 0 and time.monotonic() - self.last > self.idle:
                self.stop()

    def warm_projects(self) -> None:
        """Embed ahead the task gists of the projects a session started in or a turn was
        learned for (``CodingMemory.gists``), a few at a time: a turn spooled meanwhile is
        learned first. A failure is logged, never raised."""
        from deltamem.integrations.coding_memory import CodingMemory

        while not self.stopping.is_set():
            with self._read_lock:
                if not self.to_warm:
                    return
                cwd = next(iter(self.to_warm))
            try:
                if not nothing_stored(self.target):
                    writer = self.writer()
                    texts = CodingMemory.for_directory(writer, cwd).gists()
                    for start in range(0, len(texts), WARM_BATCH):
                        if self.stopping.is_set() or self.pending():
                            return  # the learner comes back to this project after the turn
                        writer.embed(texts[start:start + WARM_BATCH])
                    self._keep_gists(writer.embedder.name, texts)  # written if any is new
            except Exception as exc:  # noqa: BLE001 - a recall embeds what is missing
                log.warning("%s", redacted(f"embedding ahead failed: {type(exc).__name__}: "
                                           f"{exc}"))
            with self._read_lock:
                self.to_warm.pop(cwd, None)

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()
        if self._server is not None:
            threading.Thread(target=self._server.shutdown, daemon=True).start()

    # -- serving --------------------------------------------------------------------------
    def serve(self) -> None:
        """Serve until idle (or SIGTERM); the socket file is removed on the way out."""
        sock = self.target.socket
        private_dir(sock.parent)
        daemon = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                if not same_user(self.connection):  # another uid: answer nothing
                    log.warning("refused a connection from another user")
                    return
                line = self.rfile.readline(8 * 1024 * 1024)
                try:
                    request = json.loads(line)
                except (ValueError, RecursionError):  # not JSON, or nested past the parser
                    answer = {"error": "not a JSON request"}
                else:
                    answer = daemon.handle(request if isinstance(request, dict) else {})
                self.wfile.write(json.dumps(answer, ensure_ascii=False).encode() + b"\n")

        with contextlib.suppress(FileNotFoundError):
            sock.unlink()
        server = socketserver.ThreadingUnixStreamServer(str(sock), Handler)
        server.daemon_threads = True
        os.chmod(sock, 0o600)
        self._server = server
        learner = threading.Thread(target=self.learner, name="deltamem-learner", daemon=True)
        signal.signal(signal.SIGTERM, lambda *_: self.stop())
        try:
            # The cyclic collector finds nothing to free among what the warm-up imports and
            # loads, yet took about 5% of it (which the first prompt waits for): it is paused
            # until the daemon is warm.
            gc.disable()
            threading.Thread(target=self.warm, name="deltamem-warm", daemon=True).start()
            learner.start()
            self.wake.set()
            server.serve_forever(poll_interval=0.5)
        finally:
            self.stopping.set()
            self.wake.set()
            server.server_close()
            with contextlib.suppress(FileNotFoundError):
                sock.unlink()
            if learner.is_alive():
                learner.join(timeout=30)
            for mem in (self._reader, self._writer):
                if mem is not None:
                    mem.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deltamem.integrations.hookd")
    parser.add_argument("--db", required=True)
    parser.add_argument("--space", default="default")
    parser.add_argument("--embedder", default=None)
    parser.add_argument("--idle", type=float, default=None,
                        help="Exit after this many seconds without a call (default: "
                             "DELTAMEM_HOOK_IDLE, else 900).")
    parser.add_argument("--cold", metavar="EVENT", default=None,
                        help="Answer one hook call (its JSON on stdin) in this process and "
                             "exit: the hook client's path when no daemon can serve.")
    parser.add_argument("--budget-tokens", type=int, default=None)
    parser.add_argument("--scope", default=None)
    args = parser.parse_args(argv)
    from deltamem.config import Settings

    try:
        threads = Settings.from_env().embed_threads
    except ConfigError:
        threads = 0  # the bad value is reported where the settings are used
    env.hook_process(blas_threads=threads)
    if args.cold is not None:
        return _cold_call(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s hookd %(message)s")
    t = target(args.db, args.space, args.embedder)
    try:
        private_dir(t.socket.parent)
        lock = open_lock(str(t.socket) + ".lock")  # held for the process's life
    except PermissionError as exc:
        log.error("%s", exc)
        return 1
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another daemon serves this target
    log.info("serving %s (space %s) on %s", t.db, t.space, t.socket)
    Daemon(t, idle=args.idle if args.idle else env.hook_idle(default=DEFAULT_IDLE),
           turn_stale=env.hook_turn_stale(default=DEFAULT_TURN_STALE)).serve()
    log.info("idle: stopped")
    return 0


def _cold_call(args: argparse.Namespace) -> int:
    """``--cold EVENT``: one hook call, its payload on stdin, its answer on stdout; a failure
    is one line on stderr and exit 1 (``deltamem_hook`` runs this in a child process, so the
    hook client never imports this module)."""
    try:
        payload = json.loads(sys.stdin.read() or "{}")
        if not isinstance(payload, dict):
            raise ValueError("the hook input must be a JSON object")
        out = cold(args.cold, payload, db=args.db, space=args.space, embedder=args.embedder,
                   budget_tokens=args.budget_tokens, scope=args.scope)
    except Exception as exc:  # noqa: BLE001 - reported as one line, never a traceback
        sys.stderr.write(" ".join(redacted(f"{type(exc).__name__}: {exc}").split()) + "\n")
        return 1
    if out:
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
