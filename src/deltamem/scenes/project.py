"""The coding scene: a software project, and what a coding agent's tool calls teach about it.

**Project identity.** A project is its repository root (the nearest folder above the working
directory holding ``.git``), or the working directory when there is none
(:func:`project_root`, the only function here that touches the file system). Its scene text is
``"software project <name> at <root>"`` (:func:`project_scene`) and its
:meth:`CodingScene.signature` is the root path, normalised, compared exactly: ``api``, ``api2``,
``api-admin`` and ``/srv/other/api`` are four projects, and ``api/v1`` belongs to ``api``.
A text that names no path has the signature ``""``.

The tool calls an episode records are read by :mod:`deltamem.scenes.tool_calls` (status rules,
purposes, the meaningful part of an output); the user's prompts by
:mod:`deltamem.scenes.prompts`.

**Facts** (:meth:`CodingScene.facts`): statements a later session cannot cheaply re-derive,
``"<subject>: <statement>"`` so that a later statement about the same subject supersedes it:

* how a check, build, deploy, migration or install runs, from a command of that purpose:
  ``tests (pytest): `pytest -q` works (5 passed in 0.31s)``; when it fails, the quoted reason:
  ``deploy (kubectl apply): `kubectl apply -f k8s/prod` fails: "...: [policy] ..."``;
  the subject is the program a container or package runner runs (``docker compose run app
  pytest`` is ``tests (pytest)``), and a focused run (one file, one test: :func:`focused`)
  keeps the whole-suite command it follows (```./mvnw verify` runs the whole suite;
  `./mvnw test -Dtest=X` works``); a later run of the same subject supersedes a failure;
* any other command's failure that carries a reason line;
* an environment variable a failing output says is missing (``env PAYMENT_KEY: needed by
  ...``), never one a report merely mentions;
* the reason a deploy, migration, install or build failed before it worked, kept with the
  success (``... works; it failed first: "...[require-change-ticket] ..."``): the gate stays;
* a convention the user stated (``we use pnpm here``; ``prompts.prompt_kind``), quoted.

File contents, reads, searches (grep, ls, find), edit confirmations, version-control reads and
todo-list updates are never facts. A failure of a test, lint, type or build run that an edit
follows in the same episode is dropped unless the run is repeated (the edit made it stale; the
repeat supersedes it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from deltamem.core.knowledge import supersede
from deltamem.core.model import Episode
from deltamem.scenes.prompts import is_correction
from deltamem.scenes.tool_calls import (
    GATED,
    KNOWLEDGE_PURPOSES,
    ToolCall,
    command_purpose,
    command_text,
    flat,
    focused,
    missing_env,
    parse_call,
    reason,
    subject,
    summary,
)

SCENE_PREFIX = "software project"
_AT_PATH = re.compile(r"\bat ((?:/|~|[A-Za-z]:[\\/])[^\n]*?)\s*$")

# -- project identity ------------------------------------------------------------------------

_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


def foreign_path(path: str | Path) -> str | None:
    """A Windows path (``C:/Users/...`` or ``C:\\Users\\...``) read on another system, as
    ``C:/Users/...``; None for any other path. Such a path is absolute whatever system reads
    it: it is never joined to this process's directory, nor looked for on this disk."""
    text = str(path)
    if os.name == "nt" or not _DRIVE.match(text):
        return None
    return text[:3].replace("\\", "/") + text[3:].replace("\\", "/").rstrip("/")


def project_root(cwd: str | Path) -> Path:
    """The repository root above ``cwd`` (a folder holding ``.git``), else ``cwd`` itself. A
    Windows path read on another system (:func:`foreign_path`) is taken as it is."""
    foreign = foreign_path(cwd)
    if foreign is not None:
        return Path(foreign)
    start = Path(os.path.normpath(Path(cwd).expanduser().absolute()))
    for folder in (start, *start.parents):
        try:
            if (folder / ".git").exists():
                return folder
        except OSError:  # an unreadable folder: stop looking
            break
    return start


def project_scene(root: str | Path) -> str:
    """The scene text of a project root: ``software project <name> at <root>``."""
    path = Path(root)
    return f"{SCENE_PREFIX} {path.name or str(path)} at {path}"


def signature_of(scene: str) -> str:
    """The project root a scene text names (normalised, no trailing slash), ``""`` for none."""
    match = _AT_PATH.search(scene.strip())
    if not match:
        return ""
    raw = match.group(1).strip()
    if raw.startswith("~"):
        raw = os.path.expanduser(raw)
    return os.path.normpath(raw).replace("\\", "/").rstrip("/") or "/"


# -- the scene plug-in -----------------------------------------------------------------------


class CodingScene:
    """A software project (see the module docstring)."""

    name = "coding"

    def signature(self, scene: str) -> str:
        return signature_of(scene)

    def place(self, observation: str) -> str:
        """The directory an observation shows: a Codex ``<cwd>``, a ``cd DIR``, or an output
        that is a single absolute path (``pwd``)."""
        found = re.search(r"<cwd>([^<]+)</cwd>", observation)
        if found:
            return os.path.normpath(found.group(1).strip())
        text = observation.strip()
        cd = re.match(r"^cd\s+(\S+)", text)
        if cd:
            return cd.group(1)
        if re.fullmatch(r"/[^\s]*", text):
            return os.path.normpath(text)
        return ""

    def trigger(self, scene: str, max_chars: int) -> str:
        root = signature_of(scene)
        text = f"project {PurePosixPath(root).name} ({root})" if root else flat(scene)
        return text if len(text) <= max_chars else text[: max_chars - 1] + "…"

    def facts(self, episode: Episode, max_chars: int) -> tuple[str, ...]:
        root = signature_of(episode.env)
        calls = [parse_call(s, root) for s in episode.steps]
        facts: list[str] = []
        pending: dict[str, int] = {}  # subject -> index of a failure an edit may make stale
        gates: dict[str, str] = {}  # subject -> the reason a deploy-like run failed
        canonical: dict[str, str] = {}  # subject -> its whole-suite command, as last run
        for call in calls:
            facts += _corrections(call, max_chars)
            if call.kind == "edit":
                for key in list(pending):
                    facts[pending.pop(key)] = ""  # stale: the code it judged has changed
                continue
            if call.kind != "run" or call.purpose in ("read", "check"):
                continue
            key = subject(call)
            statement = self._canonical_statement(call, key, canonical, max_chars)
            if call.failed and call.purpose in GATED:
                gates[key] = call.output
            elif statement and gates.get(key):
                # What stood in the way stays true of the project: say it with the success.
                head = f"`{command_text(call, 60)}` works; it failed first: "
                why = reason(gates.pop(key), max_chars - len(key) - len(head) - 4)
                statement = f'{head}"{why}"' if why else statement
            if statement:
                facts.append(f"{key}: {statement}")
                if call.failed and call.purpose in ("tests", "type checks", "lint", "build"):
                    pending[key.lower()] = len(facts) - 1
                else:
                    pending.pop(key.lower(), None)
            if call.status == "error":
                for name in missing_env(call.output):
                    facts.append(_cut(f"env {name}: needed by `{command_text(call, 60)}`",
                                      max_chars))
        return supersede((), [f for f in facts if f])

    def _canonical_statement(self, call: ToolCall, key: str, canonical: dict[str, str],
                             max_chars: int) -> str:
        """The statement of a run; a focused run that worked keeps the subject's whole-suite
        command seen before it (``canonical``, updated here)."""
        narrow = focused(call)
        if call.purpose in KNOWLEDGE_PURPOSES and not narrow:
            canonical[key] = command_text(call, 60)
        statement = self._statement(call, max_chars - len(key) - 2)
        if statement and not call.failed and key in canonical and narrow:
            statement = with_canonical(statement, canonical[key])
        return statement

    def _statement(self, call: ToolCall, limit: int) -> str:
        command = command_text(call, max(40, limit // 2))
        if call.status in ("rejected", "interrupted"):
            return f"`{command}` was {call.status} by the user"
        if call.status == "error":
            why = reason(call.output, max(60, limit - len(command) - 12))
            if not why and call.purpose not in KNOWLEDGE_PURPOSES:
                return ""
            code = f" (exit {call.exit_code})" if call.exit_code else ""
            return f'`{command}` fails{code}: "{why}"' if why else f"`{command}` fails{code}"
        if call.purpose not in KNOWLEDGE_PURPOSES:
            return ""
        said = summary(call.output, max(30, limit - len(command) - 12))
        return f"`{command}` works ({said})" if said else f"`{command}` works"

    def __repr__(self) -> str:
        return "CodingScene()"


_CANONICAL = "runs the whole suite"
_COMMAND = re.compile(r"`([^`]+)`")


def with_canonical(statement: str, command: str) -> str:
    """A focused run's statement that keeps the subject's whole-suite ``command``:
    ```./mvnw verify` runs the whole suite; `./mvnw test -Dtest=X` works (...)``."""
    if _CANONICAL in statement or f"`{command}`" in statement:
        return statement
    return f"`{command}` {_CANONICAL}; {statement}"


def keep_canonical(known: str, newer: str) -> str:
    """``newer`` (a fact about a run) keeping the whole-suite command ``known`` (the fact it
    supersedes) names: a focused run does not replace how the project runs its suite."""
    old = known.partition(": ")[2]
    new_head, _, new_rest = newer.partition(": ")
    if _CANONICAL in new_rest or not new_rest.startswith("`"):
        return newer
    old_command = old.split(f" {_CANONICAL}")[0].strip("`") if _CANONICAL in old else (
        found.group(1) if (found := _COMMAND.match(old)) else "")
    new_command = _COMMAND.match(new_rest)
    if not old_command or not new_command or old_command == new_command.group(1):
        return newer
    if not _narrows(new_command.group(1)) or _narrows(old_command):
        return newer
    return f"{new_head}: {with_canonical(new_rest, old_command)}"


def _narrows(command: str) -> bool:
    return focused(ToolCall("shell", "run", command, purpose=command_purpose(command)))


def _corrections(call: ToolCall, max_chars: int) -> list[str]:
    """``user correction (<its first words>): "<what the user said>"`` per stated convention."""
    out = []
    for said in call.user:
        if is_correction(said):
            topic = " ".join(re.findall(r"[\w.-]+", said)[:6]).lower()
            out.append(_cut(f'user correction ({topic}): "{flat(said)}"', max_chars))
    return out


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
