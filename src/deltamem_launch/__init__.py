"""The ``deltamem`` command's entry point: standard library only until it knows what to run.

``deltamem mcp`` over stdio is started by Claude Code and Codex at every session, which wait for
its answers to ``initialize`` and ``tools/list`` before the first model call. Importing the MCP
SDK and deltamem takes about a second, so the command answers those first (the fast front) and
imports meanwhile:

1. a thread imports the CLI and the MCP server (the SDK, the engine);
2. the main thread reads the first line of stdin (byte by byte: nothing past it is taken from
   the pipe); when it is an ``initialize`` request of a valid shape, the answer the SDK server
   would give (:func:`deltamem_launch.handshake.initialize_answer`) is written at once;
3. while the thread imports, the main thread reads the next lines as they come and answers the
   listings whose answers never change -- ``tools/list``, ``prompts/list``, ``resources/list``,
   ``resources/templates/list``, ``ping`` -- from the table the SDK server itself gave
   (``listings.json``, written by ``scripts/mcp_listings.py``, checked against the SDK server
   by ``tests/server/test_mcp_front.py``); it stops at the first line it cannot answer (a tool
   call: the SDK's) or when the imports are done;
4. the CLI then runs ``deltamem mcp`` as always, and the SDK server is handed the lines read
   (:func:`deltamem.faces.server.mcp_serve.hand_over`): it reads them first, so its session is
   initialized exactly as the client asked, and its own answers to the requests answered
   early are dropped (the client got them already; one that differs is reported on stderr).
   Every later request is the SDK server's. When the client closes stdin while the front
   still reads (it had all it needed), the process exits at once (:func:`input_ended`); when
   it closes stdin later, the server ends and the process exits without tearing the
   interpreter down (:func:`end_now`).

Any other command, ``--transport http``, ``--help``, a missing ``mcp`` package or
``DELTAMEM_MCP_FRONT=0`` runs the CLI directly. An option the CLI refuses (a bad ``--db``) is
then reported after ``initialize`` was answered: the server exits with the one-line error on
stderr, as before.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from importlib.util import find_spec

from deltamem_launch.handshake import initialize_answer, listing_answer

TYPE_CHECKING = False  # ``typing`` is not imported at run time (start-up time is latency)
if TYPE_CHECKING:
    from typing import Any

FRONT_ENV = "DELTAMEM_MCP_FRONT"
MAX_FAST_LINE = 1 << 16  # an initialize request longer than this is left to the SDK
# The listings' answers, as the SDK server gives them (scripts/mcp_listings.py writes it).
LISTINGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "listings.json")


def main(argv: list[str] | None = None) -> None:
    """The ``deltamem`` command (``deltamem.faces.cli.app.main``), with the fast front for
    ``deltamem mcp`` over stdio."""
    args = sys.argv[1:] if argv is None else argv
    front = front_wanted(args)
    if front:
        done_r, done_w = os.pipe()  # written when the imports are done (wakes the front)
        loader = threading.Thread(target=_preload, args=(done_w,), name="deltamem-preload",
                                  daemon=True)
        loader.start()
        try:
            line, answered = answer_initialize(0, 1)
            lines, early = [line], {}
            if answered is not None:
                early[answered] = initialize_answer(_request(line))
                more, listed = answer_listings(0, 1, done_r, listings())
                lines += more
                early.update(listed)
                if input_ended(0):
                    # The client closed our stdin after the answers it needed (a print-mode
                    # session ends so): exit now rather than finish the imports for nobody --
                    # the client waits for this process to end (Claude Code: about 1 s a
                    # session).
                    os._exit(0)
        except KeyboardInterrupt:  # as the CLI reports it (app.EXIT_INTERRUPTED)
            sys.stderr.write("error: interrupted\n")
            sys.exit(130)
        loader.join()
        os.close(done_r)
        os.close(done_w)
        from deltamem.faces.server.mcp_serve import hand_over

        hand_over(lines, early)
    from deltamem.faces.cli.app import main as cli_main

    if not front:
        cli_main(args)
        return
    try:
        cli_main(args)
    except SystemExit as exc:
        end_now(exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1)
    end_now(0)


def end_now(code: int) -> None:
    """End the process once ``deltamem mcp`` over stdio has returned: its memory is closed and
    its client gone. Exit handlers run and the standard streams are flushed, then the process
    exits without tearing the interpreter down (freeing every module and object of the SDK and
    the engine: 0.3-0.5 s here), which the client waits for at the end of each session."""
    import atexit
    import contextlib

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing to flush to
            stream.flush()
    os._exit(code)


def front_wanted(args: list[str]) -> bool:
    """Whether ``args`` run ``deltamem mcp`` over stdio (the SDK installed, the front not
    switched off)."""
    if not args or args[0] != "mcp" or os.environ.get(FRONT_ENV, "1") == "0":
        return False
    rest = args[1:]
    if any(a in ("--help", "-h") or a.startswith("--transport=") and a != "--transport=stdio"
           for a in rest):
        return False
    for flag, value in zip(rest, rest[1:], strict=False):
        if flag == "--transport" and value != "stdio":
            return False
    return find_spec("mcp") is not None


def answer_initialize(read_fd: int, write_fd: int) -> tuple[bytes, str | int | None]:
    """Read the first line from ``read_fd``, answer it on ``write_fd`` when it is an
    ``initialize`` request the front may answer; return the line read (b"" at end of input)
    and the id answered (None: the line is the SDK's to answer)."""
    line = read_line(read_fd)
    answer = initialize_answer(_request(line))
    if answer is None or not write_answer(write_fd, answer):  # (or the client is gone: the
        return line, None  # SDK server answers into the same void)
    rid: str | int = answer["id"]
    return line, rid


def answer_listings(read_fd: int, write_fd: int, done_fd: int,
                    table: dict[str, Any]) -> tuple[list[bytes], dict[str | int, Any]]:
    """Until ``done_fd`` is readable (the SDK server's imports are done), read the request
    lines that come on ``read_fd`` and answer, on ``write_fd``, those ``table`` holds the answer
    of (:func:`deltamem_launch.handshake.listing_answer`); notifications are read and left to
    the SDK. Stop at the first other line or at the end of input too. The wait takes no CPU
    (one ``select`` on both). Return the lines read (whole lines only) and the answers given
    by request id."""
    import select

    lines: list[bytes] = []
    answered: dict[str | int, Any] = {}
    while True:
        try:
            ready, _, _ = select.select([read_fd, done_fd], [], [])
        except (OSError, ValueError):  # a stdin select cannot watch (Windows pipes)
            break
        if done_fd in ready:
            break
        line = read_line(read_fd)
        if not line:
            break
        lines.append(line)
        request = _request(line)
        if isinstance(request, dict) and "id" not in request \
                and isinstance(request.get("method"), str):
            continue  # a notification (``notifications/initialized``): nothing to answer
        answer = listing_answer(request, table)
        if answer is None or answer["id"] in answered or not write_answer(write_fd, answer):
            break
        answered[answer["id"]] = answer
    return lines, answered


def input_ended(fd: int) -> bool:
    """Whether ``fd`` (a pipe or socket) is at end of input, without reading from it: it is
    readable and holds no bytes. False where that cannot be told (Windows pipes)."""
    try:
        import fcntl
        import select
        import termios

        ready, _, _ = select.select([fd], [], [], 0)
        if not ready:
            return False
        pending = bytearray(4)
        fcntl.ioctl(fd, termios.FIONREAD, pending)
        return int.from_bytes(pending, sys.byteorder) == 0
    except (ImportError, OSError, ValueError):
        return False


def read_line(fd: int) -> bytes:
    """One line from ``fd``, read byte by byte (nothing past it is taken from the pipe); b""
    at the end of input."""
    line = bytearray()
    while not line.endswith(b"\n"):
        try:
            byte = os.read(fd, 1)
        except OSError:  # no stdin: the SDK server meets the same end
            byte = b""
        if not byte:
            break
        line += byte
    return bytes(line)


def _request(line: bytes) -> Any:
    """A line as the JSON value the front may answer (None: too long, not JSON, or holding a
    lone surrogate, all left to the SDK)."""
    if len(line) > MAX_FAST_LINE:
        return None
    try:
        request = json.loads(line.decode("utf-8"))
        json.dumps(request, ensure_ascii=False).encode("utf-8")  # no lone surrogate
    except (ValueError, RecursionError):
        return None
    return request


def write_answer(fd: int, answer: dict[str, Any]) -> bool:
    """Write ``answer`` as one line (the SDK's compact JSON); False when the client is gone."""
    data = (json.dumps(answer, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError:
        return False
    return True


def listings() -> dict[str, Any]:
    """The listings' answers by method (``listings.json``); {} when it cannot be read (the SDK
    server then answers them)."""
    try:
        with open(LISTINGS, encoding="utf-8") as handle:
            table = json.load(handle)
    except (OSError, ValueError):
        return {}
    results = table.get("results") if isinstance(table, dict) else None
    return results if isinstance(results, dict) else {}


def _preload(done_fd: int) -> None:
    """Import what ``deltamem mcp`` needs while the front waits for the client, then write to
    ``done_fd``; a failure is left for the CLI to report when it imports the same modules.
    The imports run at a lower CPU priority: the client is starting too, and the listings it
    waits for are the front's (tool calls, the SDK's, come later)."""
    try:
        from deltamem_hook import lower_thread_priority

        lower_thread_priority()
        import deltamem.faces.cli.app  # noqa: F401
        import deltamem.faces.server.mcp_serve  # noqa: F401
    except Exception:  # noqa: BLE001, S110 - the CLI reports it
        pass
    finally:
        os.write(done_fd, b".")
