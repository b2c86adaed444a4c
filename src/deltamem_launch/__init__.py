"""The ``deltamem`` command's entry point: standard library only until it knows what to run.

``deltamem mcp`` over stdio is started by Claude Code and Codex at every session, which wait for
its answer to ``initialize``. Importing the MCP SDK and deltamem takes about a second, so the
command answers ``initialize`` first (the fast front) and imports meanwhile:

1. a thread imports the CLI and the MCP server (the SDK, the engine);
2. the main thread reads the first line of stdin (byte by byte: nothing past it is taken from
   the pipe); when it is an ``initialize`` request of a valid shape, the answer the SDK server
   would give (:func:`deltamem_launch.handshake.initialize_answer`) is written at once;
3. the CLI then runs ``deltamem mcp`` as always, and the SDK server is handed the line read
   (:func:`deltamem.faces.server.mcp_serve.hand_over`): it reads it first, so its session is
   initialized exactly as the client asked, and its own answer to that ``initialize`` is
   dropped (the client got one already). ``tools/list`` and every later request are the SDK
   server's.

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

from deltamem_launch.handshake import initialize_answer

FRONT_ENV = "DELTAMEM_MCP_FRONT"
MAX_FAST_LINE = 1 << 16  # an initialize request longer than this is left to the SDK


def main(argv: list[str] | None = None) -> None:
    """The ``deltamem`` command (``deltamem.faces.cli.app.main``), with the fast front for
    ``deltamem mcp`` over stdio."""
    args = sys.argv[1:] if argv is None else argv
    if front_wanted(args):
        loader = threading.Thread(target=_preload, name="deltamem-preload", daemon=True)
        loader.start()
        try:
            line, answered = answer_initialize(0, 1)
        except KeyboardInterrupt:  # as the CLI reports it (app.EXIT_INTERRUPTED)
            sys.stderr.write("error: interrupted\n")
            sys.exit(130)
        loader.join()
        from deltamem.faces.server.mcp_serve import hand_over

        hand_over(line, answered)
    from deltamem.faces.cli.app import main as cli_main

    cli_main(args)


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
    line = bytearray()
    while not line.endswith(b"\n"):
        try:
            byte = os.read(read_fd, 1)
        except OSError:  # no stdin: the SDK server meets the same end
            byte = b""
        if not byte:
            break
        line += byte
    answer = None
    if len(line) <= MAX_FAST_LINE:
        try:
            request = json.loads(line.decode("utf-8"))
            json.dumps(request, ensure_ascii=False).encode("utf-8")  # no lone surrogate
            answer = initialize_answer(request)
        except (ValueError, RecursionError):
            answer = None
    if answer is None:
        return bytes(line), None
    data = (json.dumps(answer, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    try:
        while data:
            data = data[os.write(write_fd, data):]
    except OSError:  # the client is gone: the SDK server answers into the same void
        return bytes(line), None
    rid: str | int = answer["id"]
    return bytes(line), rid


def _preload() -> None:
    """Import what ``deltamem mcp`` needs while the front waits for the client; a failure is
    left for the CLI to report when it imports the same modules."""
    try:
        import deltamem.faces.cli.app  # noqa: F401
        import deltamem.faces.server.mcp_serve  # noqa: F401
    except Exception:  # noqa: BLE001, S110 - the CLI reports it
        pass
