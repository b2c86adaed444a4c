"""The coding scene: a software project, and what a coding agent's tool calls teach about it.

**Project identity.** A project is its repository root (the nearest folder above the working
directory holding ``.git``), or the working directory when there is none
(:func:`project_root`, the only function here that touches the file system). Its scene text is
``"software project <name> at <root>"`` (:func:`project_scene`) and its
:meth:`CodingScene.signature` is the root path, normalised, compared exactly: ``shop``, ``shop2``,
``shop-admin`` and ``/home/bob/src/shop`` are four projects, and ``shop/api`` belongs to ``shop``.
A text that names no path has the signature ``""``.

**A tool call** (:func:`parse_call`) is an action -- the tool, the command or the file path that
matters -- with a result: a status (``ok``, ``error``, ``no-match``, ``rejected``,
``interrupted``), the exit code when the transcript records one, and the output. The meaningful
part of an output is never its head: :func:`reason` is the last line that reads as an error
(clauses cut from the front, so "... denied the request: [policy] must carry X" keeps the
policy), :func:`summary` the last test or build summary line, :func:`gist` both with the tail.

**Status rules** (documented in docs/integrations.md):

* a result the client marked as an error (``is_error``, ``error: `` prefix, ``exit code N``
  with N > 0) is ``error``, except an *expected non-zero exit of a check*: ``grep``/``rg`` finding
  nothing (exit 1), ``test``/``[`` being false, ``diff``/``cmp`` showing differences, ``which``
  or ``command -v`` not finding a program -- those are ``no-match``;
* a result of a verifying run (tests, checks, build, deploy, migration) that is not marked but
  whose summary counts failures (``1 failed``, ``FAILED``, ``--- FAIL``) or that reads as one
  (``Error from server``, ``denied the request``, ``fatal:``, a traceback) is ``error``: tools of
  agent frameworks often return text without an exit code;
* the user rejecting the call is ``rejected``; the user interrupting it ``interrupted``.

**Facts** (:meth:`CodingScene.facts`): statements a later session cannot cheaply re-derive,
``"<subject>: <statement>"`` so that a later statement about the same subject supersedes it:

* how a check, build, deploy, migration or install runs, from a command of that purpose:
  ``tests (pytest): `pytest -q` works (5 passed in 0.31s)``; when it fails, the quoted reason:
  ``deploy (kubectl apply): `kubectl apply -f k8s/prod` fails: "...denied the request: ..."``;
* any other command's failure that carries a reason line;
* an environment variable an output says is missing (``env STRIPE_KEY: needed by ...``), or
  that the final report explains (``env STRIPE_WEBHOOK_SECRET: <the report's sentence>``);
* the reason a deploy, migration, install or build failed before it worked, kept with the
  success (``... works; it failed first: "...[require-change-ticket] ..."``): the gate stays;
* a correction the user made (``no, use pnpm here``), quoted.

File contents, reads, searches (grep, ls, find), edit confirmations, version-control reads and
todo-list updates are never facts. A failure of a test, lint, type or build run that an edit
follows in the same episode is dropped unless the run is repeated (the edit made it stale; the
repeat supersedes it).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from deltamem.core.knowledge import supersede
from deltamem.core.model import Episode, Step

SCENE_PREFIX = "software project"
_AT_PATH = re.compile(r"\bat ((?:/|~|[A-Za-z]:[\\/])[^\n]*?)\s*$")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_WS = re.compile(r"\s+")

# -- project identity ------------------------------------------------------------------------


def project_root(cwd: str | Path) -> Path:
    """The repository root above ``cwd`` (a folder holding ``.git``), else ``cwd`` itself."""
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


# -- tool calls ------------------------------------------------------------------------------

SHELL_TOOLS = frozenset({"bash", "shell", "sh", "exec", "exec_command", "run", "run_command",
                         "run_shell", "run_terminal_cmd", "terminal", "local_shell",
                         "shell_command", "execute", "execute_command", "container.exec"})
EDIT_TOOLS = frozenset({"edit", "multiedit", "write", "notebookedit", "apply_patch",
                        "str_replace_editor", "str_replace_based_edit_tool", "write_file",
                        "edit_file", "create_file", "replace", "insert", "patch"})
READ_TOOLS = frozenset({"read", "view", "read_file", "open_file", "cat", "notebookread",
                        "view_file"})
SEARCH_TOOLS = frozenset({"grep", "glob", "search", "find", "ls", "list_files", "list_dir",
                          "websearch", "webfetch", "codebase_search", "file_search",
                          "grep_search"})
TODO_TOOLS = frozenset({"todowrite", "todoread", "update_plan", "exitplanmode", "task"})
PATH_KEYS = ("file_path", "path", "notebook_path", "filename", "file", "target_file")
COMMAND_KEYS = ("command", "cmd")

INTERRUPT_MARKS = ("[Request interrupted by user", "<turn_aborted>", "Interrupted by user",
                   "interrupted by the user", "aborted by user", "aborted by the user")
REJECT_MARKS = ("doesn't want to proceed with this tool use", "tool use was rejected",
                "user rejected", "rejected by the user", "rejected by user", "user denied",
                "denied by the user", "declined by user", "the user declined",
                "User refused permission")

# Command purposes, by the program (and sub-command) a shell segment runs. Order matters: the
# first pattern that matches names the purpose.
_PURPOSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((p, re.compile(r, re.I)) for p, r in (
    # Read-only sub-commands of tools that also deploy or migrate: they only look.
    ("read", r"^(alembic (current|heads|history|show|branches|check)|(python3? )?manage\.py "
             r"(showmigrations|check|diffsettings)|terraform (show|output|state (list|show))|"
             r"kubectl (get|describe|logs|config|top|explain|version|cluster-info|auth)|"
             r"helm (list|ls|status|get|history|template|show|search)|docker (ps|images|logs|"
             r"inspect|compose (ps|logs))|(npm|pnpm|yarn) (ls|list|why|outdated|view)|pip3? "
             r"(list|show|freeze)|go (env|list|version|doc)|aws sts get-caller-identity)\b"),
    ("deploy", r"^(kubectl (apply|create|replace|rollout|set|patch|delete|scale)|helm "
               r"(install|upgrade|rollback)|terraform (apply|destroy)|tofu (apply|destroy)|"
               r"docker push|fly deploy|flyctl deploy|vercel|netlify deploy|gcloud .*deploy|"
               r"serverless deploy|sls deploy|cdk deploy|pulumi up|ansible-playbook|"
               r"kustomize build .*\| *kubectl apply|make (deploy|release)|"
               r"(npm|yarn|pnpm) run (deploy|release)|\S*deploy\S*\.sh|git push)\b"),
    ("migrations", r"^(alembic|flyway|goose|dbmate|sqitch|prisma migrate|knex migrate|"
                   r"sequelize db:migrate|rails db:|rake db:|(python3? )?manage\.py "
                   r"(migrate|makemigrations)|diesel migration|atlas migrate|"
                   r"make (migrate|db-?migrate))\b"),
    ("tests", r"^(pytest|py\.test|python3? -m (pytest|unittest)|tox|nox|go test|cargo test|"
              r"cargo nextest|(npm|yarn|pnpm|bun)( run)? test\S*|npx (vitest|jest|mocha|"
              r"playwright)|vitest|jest|mocha|rspec|bundle exec (rspec|rake test)|mvn .*test|"
              r"(\./)?gradlew? .*test|make (test|check)\S*|ctest|phpunit|dotnet test|mix test|"
              r"deno test|bun test|(python3? )?manage\.py test|uv run pytest|poetry run pytest|"
              r"hatch (run )?test)\b"),
    ("type checks", r"^(mypy|pyright|tsc|(npm|yarn|pnpm) run (typecheck|type-check|tsc)|"
                    r"npx tsc|cargo check|uv run mypy|poetry run mypy|make (typecheck|mypy))\b"),
    ("lint", r"^(ruff|flake8|pylint|black|isort|eslint|npx (eslint|prettier)|prettier|helm lint|"
             r"kubeconform|kubeval|kube-linter|"
             r"(npm|yarn|pnpm) run (lint|format)\S*|golangci-lint|go vet|gofmt|cargo clippy|"
             r"cargo fmt|rubocop|shellcheck|tflint|terraform (fmt|validate)|hadolint|"
             r"make (lint|fmt|format)|pre-commit|uv run ruff)\b"),
    ("build", r"^(make|cmake|(npm|yarn|pnpm|bun) run build\S*|(npm|yarn|pnpm) build|"
              r"go build|cargo build|docker (build|compose build)|docker-compose build|mvn|"
              r"(\./)?gradlew?|python3? -m build|uv build|poetry build|terraform plan|"
              r"tofu plan|bazel|buck|dotnet build|webpack|vite build|next build)\b"),
    ("install", r"^(pip3? install|uv (sync|pip install|add)|poetry (install|add)|"
                r"(npm|pnpm|yarn|bun) (install|ci|add|i)|go mod (tidy|download)|"
                r"bundle install|cargo fetch|composer install|terraform init|tofu init|"
                r"helm dependency)\b"),
    ("check", r"^(grep|egrep|fgrep|rg|ag|ack|test|\[|\[\[|diff|cmp|which|command -v|type|"
              r"pgrep|git diff .*--(exit-code|quiet)|git (diff|grep)|find|stat|file)(?=\s|$)"),
    ("read", r"^(cat|head|tail|less|more|sed -n|nl|wc|ls|tree|pwd|echo|printf|git (status|"
             r"log|show|blame|branch|remote|rev-parse|stash list)|env|printenv|whoami|date|"
             r"du|df|ps|id|uname|true|cd|jq|yq|awk)\b"),
))
# Purposes whose runs are project knowledge (how the project is checked, built, shipped).
KNOWLEDGE_PURPOSES = ("deploy", "migrations", "tests", "type checks", "lint", "build", "install")
# Purposes whose failure reason stays worth knowing after a later run succeeds (a policy, a
# credential, a lock, a missing dependency), unlike a test's assertion that a fix made false.
GATED = ("deploy", "migrations", "install", "build")
# Purposes whose runs verify a change: the last one decides a task's outcome.
VERIFYING = ("tests", "type checks", "lint", "build", "deploy", "migrations")
_CHECK_PROGRAMS = re.compile(r"^(grep|egrep|fgrep|rg|ag|ack|test|\[|\[\[|diff|cmp|which|"
                             r"command -v|type|pgrep|git diff)(?=\s|$)")
_SEGMENT_SPLIT = re.compile(r"\s*(?:&&|\|\||;|\n)\s*")
_ENV_ASSIGN = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)+")
_WRAPPERS = re.compile(r"^(?:sudo|time|timeout \S+|nice|env|command|exec|xargs)\s+")
_SHELL_C = re.compile(r"^(?:bash|sh|zsh)\s+-l?c\s+")
_EXIT = re.compile(r"^(?:error:\s*)?(?:exit code|exit status|exited with code|Exit code)"
                   r"[:\s]+(-?\d+)[:\s]*", re.I)
_FAILED_SUMMARY = re.compile(
    r"\b[1-9]\d* (?:failed|failing|failures?|errors?)\b|^FAILED\b|^FAIL\b|--- FAIL|"
    r"\bBUILD FAILED\b|\bTests?:\s+[1-9]\d* failed|^npm ERR!|^error(?:\[\w+\])?:|"
    r"\bFound [1-9]\d* errors?\b|^Error\b|^fatal:|\bError from server\b|\bdenied the request\b|"
    r"^Traceback \(most recent call last\)", re.I | re.M)
_SUMMARY = re.compile(
    r"(\b\d+ (passed|failed|failing|passing|errors?|skipped|tests?|warnings?)\b|^(ok|PASS|FAIL"
    r"|FAILED|BUILD \w+)\b|^Tests?:|^Test Files|Success: no issues|All checks passed|"
    r"^Found \d+ errors?|\bno issues found\b|^Apply complete|^Plan:|deployment\.apps/\S+ "
    r"(configured|created|unchanged)|\bDone in\b|Successfully (built|tagged|installed))", re.I)
_ERROR_LINE = re.compile(
    r"(\b(error|errors|exception|fatal|failed|failure|forbidden|denied|refused|rejected|"
    r"not allowed|not permitted|cannot|can't|could not|couldn't|unable to|invalid|"
    r"not found|no such|missing|timed out|timeout|panic|traceback|violat\w+|"
    r"unauthori[sz]ed|must|required)\b|^E\s{2,}|^\w+(Error|Exception):)", re.I)
_MISSING_ENV = (
    re.compile(r"KeyError: ['\"]([A-Z][A-Z0-9_]{2,})['\"]"),
    re.compile(r"(?:environment variable|env var(?:iable)?|config var)\s+[`'\"]?"
               r"([A-Z][A-Z0-9_]{2,})", re.I),
    re.compile(r"\b([A-Z][A-Z0-9]*_[A-Z0-9_]+)[`'\"]? (?:is not set|not set|is required|is "
               r"missing|must be set|is undefined|is empty)", re.I),
    re.compile(r"(?:missing|undefined|unset) (?:required )?(?:env(?:ironment)? )?(?:variable)?"
               r"[:\s]+[`'\"]?([A-Z][A-Z0-9]*_[A-Z0-9_]+)"),
)
_CORRECTION = re.compile(
    r"^(no\b|nope\b|don'?t\b|do not\b|never\b|always\b|instead\b|actually\b|stop\b|wait\b|"
    r"please (don'?t|do not|never|always|use)\b|we (use|don'?t|do not|never|always|prefer)\b|"
    r"(use|run) \S+(?: \S+)? (instead|not)\b|that'?s (wrong|not)\b|not like that\b|"
    r"in this (repo|project)\b|here we\b)", re.I)
_PATH_TOKEN = re.compile(r"(?<![\w/.-])((?:/|\./|~/)?[\w.@-]+(?:/[\w.@-]+)+|[\w-]+\.(?:py|ts|tsx|"
                         r"js|jsx|go|rs|rb|java|kt|tf|ya?ml|json|toml|sql|sh|md|cfg|ini|env|"
                         r"css|html|vue|c|h|cpp|hpp|cs|php|ex|exs))(?![\w/])")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of a coding transcript (see the module docstring)."""

    tool: str
    kind: str  # "run", "edit", "read", "search", "todo", "reply", "other"
    command: str = ""
    paths: tuple[str, ...] = ()
    status: str = "ok"  # "ok", "error", "no-match", "rejected", "interrupted"
    exit_code: int | None = None
    output: str = ""
    purpose: str = ""  # for runs: a KNOWLEDGE_PURPOSES entry, "check", "read" or "run"
    user: tuple[str, ...] = ()  # what the user said after this call

    @property
    def failed(self) -> bool:
        return self.status in ("error", "rejected", "interrupted")

    @property
    def acts(self) -> bool:
        """Whether the call changes or checks something (not a read, a search or a note)."""
        return self.kind == "edit" or (self.kind == "run" and self.purpose not in ("read",
                                                                                   "check"))


def flat(text: str) -> str:
    return _WS.sub(" ", _ANSI.sub("", text)).strip()


def _split_action(action: str) -> tuple[str, str | dict[str, object]]:
    """``(tool, argument)`` of a step action: ``Bash: cmd``, ``name(k="v", ...)`` or ``name``."""
    head, sep, rest = action.partition(": ")
    if sep and re.fullmatch(r"[\w.\-]+", head):
        return head, rest
    call = re.fullmatch(r"([\w.\-]+)\((.*)\)", action, re.S)
    if call:
        args: dict[str, object] = {}
        for key, raw in re.findall(r"(\w+)=(\"(?:[^\"\\]|\\.)*\"|[^,]+)", call.group(2)):
            try:
                args[key] = json.loads(raw)
            except json.JSONDecodeError:
                args[key] = raw.strip()
        return call.group(1), args
    return action.strip(), ""


def parse_call(step: Step, root: str = "") -> ToolCall:
    """The tool call a step records (``root`` makes its paths relative)."""
    tool, arg = _split_action(step.action)
    name = tool.lower()
    text, user = _observation(step.observation)
    command = ""
    paths: list[str] = []
    if isinstance(arg, dict):
        command = next((str(arg[k]) for k in COMMAND_KEYS if k in arg), "")
        paths = [str(arg[k]) for k in PATH_KEYS if k in arg]
    elif name in SHELL_TOOLS:
        command = arg
    elif name == "apply_patch" or arg.startswith("*** Begin Patch"):
        paths = re.findall(r"\*\*\* (?:Update|Add|Delete) File: (\S+)", arg)
    elif name in EDIT_TOOLS or name in READ_TOOLS:
        paths = [arg]
    if isinstance(command, list):
        command = " ".join(map(str, command))
    command = _unwrap(command.strip())
    status, code, output = _status(text, command)
    if any(mark in said for said in user for mark in INTERRUPT_MARKS):
        # the user stopped the agent right after this call
        status = "rejected" if status == "rejected" else "interrupted"
        user = tuple(u for u in user if not any(m in u for m in INTERRUPT_MARKS))
    paths = [relative(p, root) for p in paths if p]
    if name == "reply":
        return ToolCall(tool, "reply", output=str(arg), status=status, user=user)
    if command:
        purpose = command_purpose(command)
        if purpose == "check" and status == "error" and _expected_exit(command, code, output):
            status = "no-match"
        elif status == "ok" and purpose in VERIFYING and _FAILED_SUMMARY.search(output):
            status = "error"
        if re.match(r"^sed -i|^perl -p?i|^tee |^cp |^mv |^rm |^touch |^mkdir ", command):
            kind = "edit"
            paths = paths or [relative(p, root) for p in _PATH_TOKEN.findall(command)[-1:]]
        else:
            kind = "run"
        return ToolCall(tool, kind, relative(command, root, inline=True), tuple(paths), status,
                        code, output, purpose, user)
    kind = _kind(name)
    return ToolCall(tool, kind, "", tuple(paths), status, code, output, "", user)


def _kind(name: str) -> str:
    if name in EDIT_TOOLS or name == "apply_patch":
        return "edit"
    if name in READ_TOOLS:
        return "read"
    if name in SEARCH_TOOLS:
        return "search"
    if name in TODO_TOOLS or "deltamem" in name:
        return "todo"
    return "other"


def _observation(observation: str) -> tuple[str, tuple[str, ...]]:
    """The tool's own output and the user messages appended to it (``user: ...`` lines, see
    ``transcripts``)."""
    blocks = observation.split("\nuser: ")
    own = blocks.pop(0)
    if own.startswith("user: "):
        blocks.insert(0, own[len("user: "):])
        own = ""
    return own, tuple(b.strip() for b in blocks if b.strip())


def _unwrap(command: str) -> str:
    """``bash -lc 'cmd'`` -> ``cmd``; leading ``cd DIR &&`` kept (it says where)."""
    shell = _SHELL_C.match(command)
    if shell:
        rest = command[shell.end():]
        try:
            parts = shlex.split(rest)
            command = parts[0] if parts else rest
        except ValueError:
            command = rest.strip("'\"")
    return command.strip()


def _status(text: str, command: str) -> tuple[str, int | None, str]:
    if any(mark in text for mark in INTERRUPT_MARKS):
        return "interrupted", None, text
    if any(mark.lower() in text.lower() for mark in REJECT_MARKS):
        return "rejected", None, text
    error = text.startswith("error: ")
    body = text[len("error: "):] if error else text
    code: int | None = None
    exit_ = _EXIT.match(body)
    if exit_:
        code = int(exit_.group(1))
        body = body[exit_.end():]
    trailer = re.search(r"\n(?:Exit code|exit code|exit status)[:\s]+(-?\d+)\s*$", body)
    if trailer:
        code = int(trailer.group(1))
        body = body[:trailer.start()]
    failed = error or (code is not None and code != 0)
    return ("error" if failed else "ok"), code, body.strip()


def _expected_exit(command: str, code: int | None, output: str) -> bool:
    """A check's non-zero exit that only answers "no": grep/rg found nothing, test was false,
    diff/cmp found differences, which/command -v found no program (exit 1, or no code given and
    no error text)."""
    if code is not None and code != 1:
        return False
    last = segments(command)[-1] if segments(command) else command
    if not _CHECK_PROGRAMS.match(last):
        return False
    if re.match(r"^(diff|cmp|git diff)\b", last):
        return True
    return not re.search(r"(no such file|not a directory|permission denied|invalid|usage:|"
                         r"unrecognized|syntax error|unknown option)", output, re.I)


def segments(command: str) -> list[str]:
    """The simple commands of a shell line, each without env assignments and wrappers."""
    out = []
    for part in _SEGMENT_SPLIT.split(command):
        part = part.strip().lstrip("(").strip()
        part = _ENV_ASSIGN.sub("", part)
        while True:
            stripped = _WRAPPERS.sub("", part)
            if stripped == part:
                break
            part = stripped
        if part:
            out.append(part)
    return out


def command_purpose(command: str) -> str:
    """What a shell command is for (see the module's purpose table); ``"run"`` when unknown.

    A chain takes the weightiest purpose of its parts (``cd x && pytest`` is tests; ``pytest &&
    grep ...`` is tests)."""
    found = []
    for part in segments(command) or [command]:
        piped = part.split("|")[0].strip()
        for purpose, pattern in _PURPOSES:
            if pattern.match(piped) or (purpose == "deploy" and pattern.match(part)):
                found.append(purpose)
                break
        else:
            found.append("run")
    order = [*KNOWLEDGE_PURPOSES, "run", "check", "read"]
    return min(found, key=order.index) if found else "run"


def relative(text: str, root: str, *, inline: bool = False) -> str:
    """``text`` with the project root made relative (``/repo/src/a.py`` -> ``src/a.py``)."""
    if not root or root == "/":
        return text
    if not inline:
        path = text.strip()
        if path == root:
            return "."
        return path[len(root) + 1:] if path.startswith(root + "/") else path
    return text.replace(root + "/", "").replace(root, ".")


# -- the meaningful part of an output --------------------------------------------------------


def _lines(output: str) -> list[str]:
    """The non-blank lines of an output, colour codes removed, trailing space trimmed."""
    return [line.rstrip() for line in _ANSI.sub("", output).splitlines() if line.strip()]


_COUNT_ONLY = re.compile(r"^[\s=*_-]*(?:\d+ \w+,? ?)+(?:in [\d.]+m?s)?[\s=*_-]*$")


def tail_cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters from the front (the end is kept), at a clause
    boundary when there is one, marked with ``…``."""
    text = flat(text)
    if len(text) <= limit:
        return text
    keep = text[len(text) - (limit - 1):]
    for sep in (": ", "; ", ". ", ", ", " "):
        at = keep.find(sep)
        if 0 <= at < len(keep) // 2:
            keep = keep[at + len(sep):]
            break
    return "…" + keep


_HEADLINE = re.compile(r"^[\W_]*(?:error(?:\[\w+\])?:|\[error\]|error from server|fatal:|"
                       r"failed\b|\w*(?:error|exception):|panic:|--- fail)", re.IGNORECASE)
# "Error: 1 chart(s) linted, 1 chart(s) failed", "22 issues:": a count, not a reason.
_COUNTISH = re.compile(r"\b\d+ \w+(?:\(s\))?,? (?:\w+ )?(?:failed|linted|passed|errors?|warnings?|"
                       r"issues?|problems?)\b|^\W*\d+ (?:issues?|problems?|errors?):?\s*$",
                       re.IGNORECASE)


def reason(output: str, limit: int = 200) -> str:
    """Why a command failed, cut from the front: the headline of the last error block
    (``Error: Error acquiring the state lock``, ``FAILED tests/...``, ``Error from server
    (Forbidden): ... denied the request: ...``) with the error line after it when there is room,
    else the last line that reads as an error and says more than counts; ``""`` when none."""
    lines = [line for line in _lines(output)
             if not _COUNT_ONLY.match(line) and not _COUNTISH.search(line)]
    heads = [i for i, line in enumerate(lines) if _HEADLINE.match(line)]
    if heads:
        i = heads[-1]
        head = flat(lines[i].lstrip("│|╷╵ "))
        detail = next((flat(x.lstrip("│|╷╵ ")) for x in lines[i + 1:i + 4]
                       if _ERROR_LINE.search(x) and not _HEADLINE.match(x)), "")
        if detail and len(head) < limit // 2:
            return f"{head} | {tail_cut(detail, limit - len(head) - 3)}"
        return tail_cut(head, limit)
    for line in reversed(lines):
        if _ERROR_LINE.search(line):
            return tail_cut(line, limit)
    return ""


def summary(output: str, limit: int = 120) -> str:
    """The last test/build summary line of ``output`` (``"5 passed in 0.3s"``), else ``""``."""
    for line in reversed(_lines(output)):
        if _SUMMARY.search(line):
            return tail_cut(line.strip("=-_ *"), limit)
    return ""


def gist(output: str, limit: int = 600) -> str:
    """The meaningful part of a tool output within ``limit`` characters: the whole when it fits;
    else the error lines and the summary with the last lines, in order, never the head alone."""
    text = _ANSI.sub("", output).strip()
    if len(text) <= limit:
        return text
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    keep: dict[int, str] = {}
    for i in range(len(lines) - 1, -1, -1):
        if len(keep) >= 6:
            break
        if _ERROR_LINE.search(lines[i]) or _SUMMARY.search(lines[i]):
            keep[i] = lines[i]
    for i in range(max(len(lines) - 3, 0), len(lines)):
        keep[i] = lines[i]
    chosen = [tail_cut(keep[i], limit // 2) for i in sorted(keep)]
    while chosen and sum(len(c) + 1 for c in chosen) + 2 > limit:
        chosen.pop(0)
    shown = "\n".join(chosen)
    return ("…\n" + shown) if shown else tail_cut(text, limit)


def missing_env(output: str) -> list[str]:
    """Names of environment variables an output says are missing (names only)."""
    names: list[str] = []
    for pattern in _MISSING_ENV:
        names += pattern.findall(output)
    return list(dict.fromkeys(names))


def is_correction(text: str) -> bool:
    """Whether a user message corrects the agent ("no, use pnpm", "we never push to main")."""
    return bool(_CORRECTION.match(text.strip()))


def names_project_files(text: str) -> bool:
    """Whether ``text`` names a file path (``src/app.py``, ``/etc/x``, ``cart.py``)."""
    return bool(_PATH_TOKEN.search(text))


# -- the scene plug-in -----------------------------------------------------------------------


def subject(call: ToolCall) -> str:
    """The fact subject of a run: its purpose and program (``tests (pytest)``)."""
    main = next((s for s in segments(call.command) if command_purpose(s) == call.purpose),
                call.command)
    words = [w for w in main.split() if not w.startswith("-")]
    program = " ".join(words[:2]) if call.purpose in ("deploy", "migrations") else (
        words[0] if words else call.command)
    if words[:2] in (["python", "-m"], ["python3", "-m"], ["uv", "run"], ["poetry", "run"],
                     ["npx", words[1] if len(words) > 1 else ""]) and len(words) > 2:
        program = words[2] if words[0] in ("python", "python3") else words[1]
    if call.purpose in KNOWLEDGE_PURPOSES:
        return f"{call.purpose} ({program[:40]})"
    return f"`{' '.join(words[:2])[:50]}`"


def command_text(call: ToolCall, limit: int = 120) -> str:
    command = flat(call.command)
    return command if len(command) <= limit else command[: limit - 1] + "…"


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
        for call in calls:
            facts += _corrections(call, max_chars)
            if call.kind == "edit":
                for key in list(pending):
                    facts[pending.pop(key)] = ""  # stale: the code it judged has changed
                continue
            if call.kind != "run" or call.purpose in ("read", "check"):
                continue
            key = subject(call)
            statement = self._statement(call, max_chars - len(key) - 2)
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
        replies = [c.output for c in calls if c.kind == "reply"]
        facts += _report_env_facts(replies[-1] if replies else "", max_chars)
        return supersede((), [f for f in facts if f])

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


def _corrections(call: ToolCall, max_chars: int) -> list[str]:
    """``user correction (<its first words>): "<what the user said>"`` per correction."""
    out = []
    for said in call.user:
        if is_correction(said):
            topic = " ".join(re.findall(r"[\w.-]+", said)[:6]).lower()
            out.append(_cut(f'user correction ({topic}): "{flat(said)}"', max_chars))
    return out


_ENV_NAME = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]\b")
_REPORT_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def _report_env_facts(report: str, max_chars: int) -> list[str]:
    """``env NAME: <sentence>`` for each environment variable the final report explains (the
    sentence that names it first; a name only, a value is never quoted by these rules)."""
    out: dict[str, str] = {}
    for sentence in _REPORT_SENTENCE.split(report):
        text = flat(sentence.replace("`", "").replace("**", ""))
        for name in _ENV_NAME.findall(text):
            out.setdefault(name, _cut(f"env {name}: {text}", max_chars))
    return list(out.values())


Coding = CodingScene  # the name the scene registry (``deltamem.scenes.make_scene``) loads


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
