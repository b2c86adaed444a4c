"""The coding scene: a software project, and what a coding agent's tool calls teach about it.

**Project identity.** A project is its repository root (the nearest folder above the working
directory holding ``.git``), or the working directory when there is none
(:func:`project_root`, the only function here that touches the file system). Its scene text is
``"software project <name> at <root>"`` (:func:`project_scene`) and its
:meth:`CodingScene.signature` is the root path, normalised, compared exactly: ``api``, ``api2``,
``api-admin`` and ``/srv/other/api`` are four projects, and ``api/v1`` belongs to ``api``.
A text that names no path has the signature ``""``.

**A tool call** (:func:`parse_call`) is an action -- the tool, the command or the file path that
matters -- with a result: a status (``ok``, ``error``, ``no-match``, ``unknown``, ``rejected``,
``interrupted``), the exit code when the transcript records one, and the output. The meaningful
part of an output is never its head: :func:`reason` is the last line that reads as an error
(clauses cut from the front, so "... refused: [policy] X must be set" keeps the policy; a
runner's totals and trailers are never the reason), :func:`summary` the last test or build
summary line, :func:`gist` both with the tail.

**Status rules** (documented in docs/integrations.md):

* a result the client marked as an error (``is_error``, ``error: `` prefix, ``exit code N``
  with N > 0) is ``error``, except an *expected non-zero exit of a check*: ``grep``/``rg`` finding
  nothing (exit 1), ``test``/``[`` being false, ``diff``/``cmp`` showing differences, ``which``
  or ``command -v`` not finding a program -- those are ``no-match``;
* a verifying run (tests, checks, build, deploy, migration) whose test runner's own summary
  reports failures (:func:`runner_verdict`: pytest, unittest, jest, vitest, mocha, cypress,
  rspec, minitest/``rails test``, ``go test``, ``cargo test``, Maven/surefire, Gradle, XCTest,
  swift-testing, PHPUnit, Pest/``artisan test``, ``dotnet test``; also inside ``docker compose
  run`` and package runners) is ``error``; with no exit code and no summary, a tool's
  documented error prefix (``error:``, ``fatal:``, ``npm ERR!``, ``Error from server``, a
  traceback) makes it ``error``: tools of agent frameworks often return text without an exit
  code;
* a test run with no output and no exit code is ``unknown``: a runner always prints a summary,
  so its result was never written; it is never a pass;
* the user rejecting the call is ``rejected``; the user interrupting it ``interrupted``.

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
* a convention the user stated (``we use pnpm here``; :func:`prompt_kind`), quoted.

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
    ("tests", r"^(pytest|py\.test|python3? -m (pytest|unittest)|tox|nox|go test|gotestsum|"
              r"cargo (test|nextest)|jest|vitest|mocha|ava|karma|tap|jasmine|cypress run|"
              r"playwright test|(npm|yarn|pnpm|bun)( run)? (test|e2e)\S*|rspec|(bin/)?rails "
              r"test|(bin/)?rake (spec|test)\S*|ruby -Itest|(\./)?mvnw? .*\b(test|verify|"
              r"integration-test)\b|(\./)?gradlew? .*\b(test|check|\w*Test|connectedCheck)\b|"
              r"swift test|xcodebuild .*\btest\b|(vendor/bin/)?(phpunit|pest)|php artisan test|"
              r"dotnet test|mix test|deno test|bun test|ctest|sbt .*\btest\b|bazel test|"
              r"flutter test|dart test|just test|nx (run )?\S*test|turbo (run )?test|"
              r"make (test|check)\S*|(python3? )?manage\.py test|hatch (run )?test|"
              r"behave|cucumber)\b"),
    ("type checks", r"^(mypy|pyright|tsc|(npm|yarn|pnpm) run (typecheck|type-check|tsc)|"
                    r"npx tsc|cargo check|uv run mypy|poetry run mypy|make (typecheck|mypy))\b"),
    ("lint", r"^(ruff|flake8|pylint|black|isort|eslint|npx (eslint|prettier)|prettier|helm lint|"
             r"kubeconform|kubeval|kube-linter|"
             r"(npm|yarn|pnpm) run (lint|format)\S*|golangci-lint|go vet|gofmt|cargo clippy|"
             r"cargo fmt|rubocop|shellcheck|tflint|terraform (fmt|validate)|hadolint|"
             r"make (lint|fmt|format)|pre-commit|uv run ruff)\b"),
    ("build", r"^(make|cmake|(npm|yarn|pnpm|bun) run build\S*|(npm|yarn|pnpm) build|"
              r"go build|cargo build|docker (build|compose build)|docker-compose build|"
              r"(\./)?mvnw?|(\./)?gradlew?|python3? -m build|uv build|poetry build|terraform "
              r"plan|tofu plan|bazel|buck|dotnet build|swift build|xcodebuild|webpack|vite build|"
              r"next build|sbt|composer dump-autoload)\b"),
    ("install", r"^(pip3? install|uv (sync|pip install|add)|poetry (install|add)|"
                r"(npm|pnpm|yarn|bun) (install|ci|add|i)|go mod (tidy|download)|"
                r"bundle (install|add)|cargo (fetch|add)|composer (install|require)|terraform "
                r"init|tofu init|helm dependency|dotnet (restore|add .*package)|swift package "
                r"resolve|gem install|go get|brew install|pod install)\b"),
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
# Commands that run another command: containers (``docker compose run [opts] SERVICE CMD``) and
# package runners (``uv run``, ``bundle exec``, ``npx``, ``yarn``/``pnpm`` running a bin).
_CONTAINER = re.compile(
    r"^(?:docker[ -]compose|docker|podman(?:[ -]compose)?|nerdctl)\s+(?:-f\s+\S+\s+)*"
    r"(?:run|exec)\s+(?:(?:-[ewuv]|--(?:env|workdir|user|volume|entrypoint|name|env-file))"
    r"[ =]\S+\s+|-{1,2}[\w-]+\s+)*(?:\S+)\s+(?=\S)")
_RUNNER = re.compile(r"^(?:(?:uv|poetry|pipenv|hatch|pdm|rye) run|bundle exec|npx|pnpx|bunx|"
                     r"(?:pnpm|yarn|npm) (?:exec|dlx)|(?:pnpm|yarn)(?= (?!run\b|add\b|install\b|"
                     r"test\b|build\b|lint\b|ci\b|i\b|remove\b|why\b|list\b|ls\b)\S)|"
                     r"dotnet tool run|kubectl exec .*?--)\s+")
_SHELL_C = re.compile(r"^(?:bash|sh|zsh)\s+-l?c\s+")
_EXIT = re.compile(r"^(?:error:\s*)?(?:exit code|exit status|exited with code|Exit code)"
                   r"[:\s]+(-?\d+)[:\s]*", re.I)
# Test runners' own summary lines (their documented output), failed and passed.
# Their totals (counts of a whole run), failed ...
_RUNNER_TOTALS_FAILED = (
    r"\b[1-9]\d* (?:failed|failing|failures?|errors?)\b|\bBUILD FAIL(?:ED|URE)\b|"
    r"Tests run: \d+, Failures: (?:[1-9]|\d+, Errors: [1-9])|\bTests?:?\s+[1-9]\d* failed|"
    r"\bTest Files\s+[1-9]\d* failed|\btest result: FAILED|\d+ examples?, [1-9]\d* failures?|"
    r"\d+ runs, \d+ assertions, (?:[1-9]\d* failures|\d+ failures, [1-9]\d* errors)|"
    r"Executed \d+ tests?, with [1-9]\d* failures?|^Test Suite '.*' failed|"
    r"\bTest run with \d+ tests?.* failed\b|Tests: \d+, Assertions: \d+, (?:Failures|Errors): "
    r"[1-9]|^Failed!\s+-\s+Failed:\s+[1-9]|^FAILED \((?:failures|errors)=|"
    r"✖\s+[1-9]\d* of \d+ failed")
_RUNNER_TOTALS = re.compile(_RUNNER_TOTALS_FAILED, re.I | re.M)
# ... and any failure line a runner prints (these also name the test and often the reason).
_RUNNER_FAILED = re.compile(
    _RUNNER_TOTALS_FAILED + r"|^FAILED\b|^FAIL\b|--- FAIL|^FAILURES!|^ERRORS!|"
    r"\bThere (?:was|were) \d+ failures?\b", re.I | re.M)
_RUNNER_PASSED = re.compile(
    r"\b\d+ (?:passed|passing)\b|^ok\s+\S+|^PASS\b|\bBUILD SUCCESS(?:FUL)?\b|"
    r"Tests run: \d+, Failures: 0, Errors: 0|\btest result: ok\b|\d+ examples?, 0 failures|"
    r"\d+ runs, \d+ assertions, 0 failures, 0 errors|Executed \d+ tests?, with 0 failures|"
    r"\bTest run with \d+ tests?.* passed\b|^OK(?: \(\d+ tests?|$)|^Passed!\s+-\s+Failed:\s+0|"
    r"All specs passed|\bTests?:?\s+\d+ passed", re.I | re.M)
# Errors any tool reports by their documented prefixes.
_FAILED_SUMMARY = re.compile(
    r"^npm ERR!|^error(?:\[\w+\])?:|\bFound [1-9]\d* errors?\b|^Error\b|^fatal:|"
    r"\bError from server\b|^Traceback \(most recent call last\)", re.M)
_SUMMARY = re.compile(
    r"(\b\d+ (passed|failed|failing|passing|errors?|skipped|tests?|warnings?|examples?|runs)\b|"
    r"^(ok|PASS|FAIL|FAILED|BUILD \w+|OK)\b|^Tests?:|^Test Files|Tests run:|test result:|"
    r"Executed \d+ tests?|Test run with|^(?:Passed|Failed)!|Success: no issues|All checks passed|"
    r"All specs passed|^Found \d+ errors?|\bno issues found\b|^Apply complete|^Plan:|"
    r"\bDone in\b|Successfully (built|tagged|installed))", re.I)


def runner_verdict(output: str) -> str | None:
    """``"failed"`` or ``"passed"`` by the last summary line a test runner printed (pytest,
    unittest, jest, vitest, mocha, cypress, rspec, minitest, go test, cargo test, Maven,
    Gradle, XCTest, swift-testing, PHPUnit, Pest/artisan, dotnet test), None without one."""
    verdict, at = None, -1
    for pattern, name in ((_RUNNER_FAILED, "failed"), (_RUNNER_PASSED, "passed")):
        for found in pattern.finditer(_ANSI.sub("", output)):
            line_end = output.find("\n", found.start())
            end = len(output) if line_end < 0 else line_end
            if end > at or (end == at and name == "failed"):
                verdict, at = name, end
    return verdict


_ERROR_LINE = re.compile(
    r"(\b(error|errors|exception|fatal|failed|failure|forbidden|denied|refused|rejected|"
    r"not allowed|not permitted|cannot|can't|could not|couldn't|unable to|invalid|"
    r"not found|no such|missing|timed out|timeout|panic|traceback|violat\w+|"
    r"unauthori[sz]ed|must|required|expected|but was|assert\w*|want)\b|^E\s{2,}|"
    r"^\w+(Error|Exception):)", re.I)
# What test runners and build tools print after the failures (how to rerun, where to read
# more, a list of the failed ones): their documented trailers, never the reason.
_EPILOGUE = re.compile(
    r"to rerun|there (?:are|were) (?:test )?failures|there were failing tests|re-run maven|"
    r"for more information about|failed to execute goal|what went wrong|^\W*try:|"
    r"^failed examples|^build fail|^failures!?:?$|run with --(?:stacktrace|info|debug|scan)|"
    r"get more help|^\[error\]\s*(?:->|$)|^\[error\] (?:results|failures):?\s*$|"
    r"^test case '.*' (?:passed|failed)|^[\w ]{1,40}:$", re.I)
_MISSING_ENV = (
    re.compile(r"KeyError: (?:key not found: )?['\"]([A-Z][A-Z0-9]*_[A-Z0-9_]+)['\"]"),
    re.compile(r"(?:environment variable|env var(?:iable)?|config var)\s+[`'\"]?"
               r"([A-Z][A-Z0-9_]{2,})", re.I),
    re.compile(r"\b([A-Z][A-Z0-9]*_[A-Z0-9_]+)[`'\"]? (?:is not set|not set|is required|is "
               r"missing|must be set|is undefined|is empty)", re.I),
    re.compile(r"(?:missing|undefined|unset) (?:required )?(?:env(?:ironment)? )?(?:variable)?"
               r"[:\s]+[`'\"]?([A-Z][A-Z0-9]*_[A-Z0-9_]+)"),
)
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
    status: str = "ok"  # "ok", "error", "no-match", "unknown", "rejected", "interrupted"
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
        status = _run_status(purpose, status, code, command, output)
        if re.match(r"^sed -i|^perl -p?i|^tee |^cp |^mv |^rm |^touch |^mkdir ", command):
            kind = "edit"
            paths = paths or [relative(p, root) for p in _PATH_TOKEN.findall(command)[-1:]]
        else:
            kind = "run"
        return ToolCall(tool, kind, relative(command, root, inline=True), tuple(paths), status,
                        code, output, purpose, user)
    kind = _kind(name)
    return ToolCall(tool, kind, "", tuple(paths), status, code, output, "", user)


def _run_status(purpose: str, status: str, code: int | None, command: str, output: str) -> str:
    """A run's status refined by what it is: a check's expected non-zero exit is
    ``no-match``; a verifying run whose runner's summary reports failures (or, with no exit
    code and no summary, a tool's documented error prefix) is ``error``; a test run with no
    output and no exit code is ``unknown`` (a runner always prints a summary: its result was
    never written), never a pass."""
    if purpose == "check" and status == "error" and _expected_exit(command, code, output):
        return "no-match"
    if status != "ok" or purpose not in VERIFYING:
        return status
    verdict = runner_verdict(output)
    if verdict == "failed" or (code is None and verdict is None
                               and _FAILED_SUMMARY.search(output)):
        return "error"
    if purpose == "tests" and code is None and not output.strip():
        return "unknown"
    return status


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


def inner_command(segment: str) -> str:
    """The command a container or package runner runs (``docker compose run --rm app pytest
    -q`` -> ``pytest -q``; ``uv run pytest`` -> ``pytest``; ``yarn jest`` -> ``jest``)."""
    for _ in range(4):
        peeled = _RUNNER.sub("", _CONTAINER.sub("", segment, count=1), count=1)
        peeled = _ENV_ASSIGN.sub("", peeled)
        if peeled == segment:
            break
        segment = peeled
    return segment


def command_purpose(command: str) -> str:
    """What a shell command is for (see the module's purpose table); ``"run"`` when unknown.

    A chain takes the weightiest purpose of its parts (``cd x && pytest`` is tests; ``pytest &&
    grep ...`` is tests)."""
    found = []
    for part in segments(command) or [command]:
        piped = inner_command(part.split("|")[0].strip())
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
# A line of counts ("Error: 3 files checked, 1 failed", "22 issues:"): a summary, not a reason.
_COUNTISH = re.compile(r"^[\W_]*(?:\w+:\s*)?(?:\d+\s+[\w()]+(?:\s+\w+)?[,;:]?\s*)+[\W_]*$")


def reason(output: str, limit: int = 200) -> str:
    """Why a command failed, cut from the front: the headline of the last error block
    (``Error: Error acquiring the state lock``, ``FAILED tests/...``, ``Error from server
    (Forbidden): ... [policy] ...``) with the error line after it when there is room,
    else the last line that reads as an error and says more than counts; ``""`` when none."""
    lines = [line for line in _lines(output)
             if not _COUNT_ONLY.match(line) and not _COUNTISH.match(line)
             and not _EPILOGUE.search(line.strip()) and not _RUNNER_TOTALS.search(line)
             and not _RUNNER_PASSED.search(line)]
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


# ---- prompt classification (issue 44): by sentence form, not by phrases ---------------------
PROMPT_KINDS = ("new-task", "continuation", "negative-feedback", "convention",
                "question-or-request")
# Discourse openers that carry no content: answers, acknowledgements, hesitations.
_ANSWER = (r"(?:yes|yeah|yep|yup|y|sure|ok(?:ay)?|k|alright|all right|fine|please|pls|go ahead|"
           r"lgtm|sounds good|looks good|👍|✅)")
_ACK = (r"(?:thanks?|thank you|thx|great|perfect|cool|nice|good|right|excellent|awesome|got it|"
        r"that'?s (?:fine|good|great|ok|okay|perfect|right)|that works)")
_HESITATE = (r"(?:wait|hold on|hang on|stop|hmm+|hm+|ugh|actually|nope|so|well|oh|ah|"
             r"no+(?=\s*[,.!:;-]|\s+(?:wait|no|stop|hold|actually)\b)|"
             r"before you (?:continue|go on|proceed))")
_OPENER = re.compile(r"^(?:(?:" + _ANSWER + "|" + _ACK + "|" + _HESITATE + r")\b[\s,.!:;-]*)+",
                     re.I)
_INTERROGATIVE = re.compile(
    r"^(?:what|what's|whats|why|how|where|which|who|whose|when|is|are|was|were|does|do|did|"
    r"can|could|would|will|should|shall|has|have|had|isn't|aren't|doesn't|don't|didn't|won't|"
    r"wouldn't|shouldn't|am)\b", re.I)
_REQUEST_FRAME = re.compile(r"^(?:can|could|would|will)\s+you\s+(?:please\s+)?(?P<verb>\w+)",
                            re.I)
# Verbs that ask the agent to say something, not to change anything.
_TELL = re.compile(r"^(?:please\s+)?(?:first\s+)?(?P<verb>show|explain|tell|print|paste|"
                   r"summari[sz]e|walk|describe|clarify|list|remind)\b", re.I)
_TELL_VERBS = re.compile(r"(?i)^(?:show|explain|tell|print|paste|summari[sz]e|walk|describe|"
                         r"clarify|list|remind)$")
# A pointer back at the work under way: deixis and the agent as the actor.
_BACK = re.compile(r"\b(?:it|its|it's|that|that's|this|these|those|them|you|you're|your|so far|"
                   r"left|same|again|the (?:diff|change|changes|plan|patch|output|error|fix|"
                   r"result|file|test output|first|second|other|last))\b", re.I)
# Negative feedback: the last result is judged bad (persistence, failed accomplishment,
# evaluation, damage, a demand to take it back).
_PERSIST = re.compile(r"\bstill\b|\banymore\b|\bno longer\b", re.I)
_FAILED_DEED = re.compile(
    r"\b(?:did(?:n'?t| not)|does(?:n'?t| not)|is(?:n'?t| not)|was(?:n'?t| not)|are(?:n'?t| not)|"
    r"won'?t|can'?t|cannot|nothing)\s+(?:actually\s+|even\s+|really\s+)?(?:work|fix|help|solve|"
    r"change|compile|build|pass|start|load|render|close|open|show|happen|do)\w*|\bnot working\b|"
    r"\bnot fixed\b|\bnot what i\b", re.I)
_VERDICT = re.compile(
    r"\b(?:that|this|it|which|you)(?:'?s| is| are|'re| was)\s+(?:not\s+|still\s+|now\s+)?"
    r"(?:wrong|incorrect|broken|not right|not it|worse|off)\b|^(?:wrong|incorrect|broken)\b|"
    r"\bmade (?:it|things|this|that) worse\b|\b(?:you|that|this|it) (?:broke|broken|messed up)\b",
    re.I)
_TAKE_BACK = re.compile(r"^(?:please\s+)?(?:revert|undo|roll ?back)\b|[,;]\s*(?:revert|undo|"
                        r"roll ?back) (?:it|that|this)\b", re.I)
_NOW_BAD = re.compile(r"(?:\bnow\b.*\b(?:fail\w*|broken|crash\w*|errors?|red|off|blank|empty|"
                      r"\d{3})\b|\b(?:fail\w*|broken|crash\w*|errors?|red|off|blank|empty|\d{3})"
                      r"\b.*\bnow\b)", re.I)
# Conventions: a standing rule, stated (we/our/this repo + a habitual verb; never/always;
# a prohibition; a preference of one thing over another; an obligation).
_WE = re.compile(r"\b(?:we|our team|our \w+|this (?:repo|project|codebase|team))\s+(?:always\s+|"
                 r"never\s+|only\s+|usually\s+|also\s+|don'?t\s+|do not\s+|do\s+)?(?:use|prefer|"
                 r"keep|stick|wrap|add|follow|write|put|map|pin|store|avoid|name|format|commit|"
                 r"run|deploy|start|go|live|test|build|install|sort|squash|rebase|merge|ship)\w*\b",
                 re.I)
_RULE_ADVERB = re.compile(r"(?:^|[,;.]\s*)(?:please\s+)?(?:never|always|don'?t\s+ever|do not ever)"
                          r"\b", re.I)
_PROHIBIT = re.compile(r"(?:^|[,;.]\s*)(?:please\s+)?(?:don'?t|do not|no)\s+(?!wait\b|no\b|that\b|"
                       r"it\b|this\b|i\b|one\b|problem)\w+", re.I)
_PREFER = re.compile(r"^(?:please\s+)?(?:use|prefer|go with|stick (?:to|with)|keep using)\b|"
                     r",\s*not\s+\S", re.I)
_OBLIGE = re.compile(r"\b(?:must|should|shall)\s+(?:always\s+|never\s+)?(?:be|go|use|have|"
                     r"follow|start|run|stay)\b", re.I)
# Continuation: what is left after the openers names no new work.
_FLOW = re.compile(
    r"^(?:please\s+)?(?:(?:(?:go|carry|keep)\s+(?:ahead|on|going|for it)|proceed|continue)\b.*|"
    r"(?:do (?:it|that|this|so|the same|both)|try (?:it\s+)?again|retry|again|ship it|"
    r"(?:commit|push|merge|apply|finish|wrap|land|deploy|release|run|rerun|re-run|open|"
    r"create|make|submit|send)\b(?:\s+(?:it|that|this|them|those|these|up|the (?:pr|patch|"
    r"change|changes|fix|plan|tests?|suite|whole suite|full suite|branch|build|mr)|a pr|pr|"
    r"(?:and|&)\s+\w+|again|too|as well|now)\b)*)(?:\s+(?:for|in|on|to) (?:the )?(?:other|"
    r"rest|remaining|same)\b.*)?)[\s.!,]*$", re.I)
_CHOICE = re.compile(r"^(?:the\s+)?(?:option\s+\w+|(?:first|second|third|last|other|former|"
                     r"latter)(?:\s+(?:one|option|approach|way))?|both(?: of (?:them|those))?|"
                     r"\d|[a-c])\b", re.I)
_ACKNOWLEDGED = re.compile(r"^(?:" + _ANSWER + "|" + _ACK + r")\b", re.I)
_ANSWERED = re.compile(r"^(?:" + _ANSWER + r")\b", re.I)


def prompt_kind(text: str, *, asked: bool = False) -> str:
    """What a user's prompt in a coding session is (one of :data:`PROMPT_KINDS`), by its form:

    * ``negative-feedback`` -- a statement that the last result is bad: the problem persists
      (``still``, ``anymore``), a deed failed (``didn't work``, ``doesn't compile``), a verdict
      on it (``that's wrong``, ``you broke``, ``made it worse``), a demand to take it back
      (``revert``/``undo`` first), or a failure that holds ``now``;
    * ``question-or-request`` -- a question, or a request to say something (show, explain,
      print ...), about the work under way (it points back, or the agent is its actor, or it is
      short); a question about something new is a new task;
    * ``convention`` -- a standing rule stated: ``we``/``our``/``this repo`` with a habitual
      verb, ``never``/``always``, a prohibition (``don't X``, ``no X in Y``), a preference
      (``use X``, ``X instead of Y``, ``X, not Y``), an obligation (``X must be Y``);
    * ``continuation`` -- nothing new is asked: only answers and acknowledgements, a workflow
      step on the work under way (go ahead, commit that, run the tests again, open the PR), a
      choice (option 2, the second one), a short answer, or -- when the agent's last reply
      asked a question (``asked``) -- a short reply that points back;
    * ``new-task`` -- everything else.
    """
    raw = flat(text)
    opener = _OPENER.match(raw)
    rest = raw[opener.end():].strip() if opener else raw
    lead = opener.group(0) if opener else ""
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", rest) if s.strip()]
    questions = [s for s in sentences if s.rstrip().endswith("?")]
    statement = " ".join(s for s in sentences if not s.rstrip().endswith("?"))
    words = re.findall(r"[\w'/.+-]+", rest)
    if not rest or not words:
        return "continuation"
    if statement and (_PERSIST.search(statement) or _FAILED_DEED.search(statement)
                      or _VERDICT.search(raw) or _TAKE_BACK.search(rest)
                      or _NOW_BAD.search(statement)):
        return "negative-feedback"
    if questions and not statement.strip():
        question = rest
        frame = _REQUEST_FRAME.match(question)
        if frame and not _TELL_VERBS.match(frame.group("verb")):
            return "new-task"  # "can you set up pre-commit?": a request to act
        if _BACK.search(question) or len(words) <= 8 or lead:
            return "question-or-request"
        return "new-task"
    if _TELL.match(rest):
        return "question-or-request"
    if _WE.search(rest) or _RULE_ADVERB.search(rest) or _PROHIBIT.search(rest) \
            or _PREFER.search(rest) or _OBLIGE.search(rest):
        return "convention"
    step = re.sub(r"(?i)^(?:now|then|next|and)\s+", "", rest)
    if _FLOW.match(step) or _CHOICE.match(step):
        return "continuation"
    if _ANSWERED.match(lead.strip()) and len(words) <= 8 and not re.match(
            r"(?i)^(?:now|next|also)\b", rest):
        return "continuation"
    if asked and len(words) <= 12 and _BACK.search(rest):
        return "continuation"
    return "new-task"


def is_correction(text: str) -> bool:
    """Whether a user message states a convention the agent should keep ("we use pnpm here",
    "never push to main", "use X instead of Y"); a question or a request is none."""
    return prompt_kind(text) == "convention"


def is_negative_feedback(text: str) -> bool:
    """Whether a user message says the last result did not work (:func:`prompt_kind`)."""
    return prompt_kind(text) == "negative-feedback"


def names_project_files(text: str) -> bool:
    """Whether ``text`` names a file path (``src/app.py``, ``/etc/x``, ``cart.py``)."""
    return bool(_PATH_TOKEN.search(text))


# -- the scene plug-in -----------------------------------------------------------------------


def subject(call: ToolCall) -> str:
    """The fact subject of a run: its purpose and program (``tests (pytest)``), the program
    that a container or package runner runs; for another command, the program and its first
    argument (```python -m calc.cli```)."""
    main = next((s for s in segments(call.command) if command_purpose(s) == call.purpose),
                call.command)
    tokens = inner_command(main).split()
    if tokens[:2] in (["python", "-m"], ["python3", "-m"]) and len(tokens) > 2:
        tokens = tokens[2:]
    words = [w for w in tokens if not w.startswith("-")]
    if call.purpose in KNOWLEDGE_PURPOSES:
        program = " ".join(words[:2]) if call.purpose in ("deploy", "migrations") else (
            PurePosixPath(words[0]).name if words else call.command)
        return f"{call.purpose} ({program[:40]})"
    return f"`{' '.join(tokens[:2])[:50]}`"


# What narrows a test run to part of the suite: selector options, test names, test files.
_SELECTOR = re.compile(
    r"^(?:-k|-run|--run|--filter|--tests?|-Dtest(?:=.*)?|-Dit\.test(?:=.*)?|--spec|--grep|-t|"
    r"--testNamePattern|--test-name-pattern|-p|--package|--only|-e|--example|--pattern|"
    r"--filter=.*|--tests=.*|--spec=.*|-run=.*)$|::|#|^(?!\./\.\.\.$)\S*/\S+|"
    r"\.(?:py|rb|ts|tsx|js|jsx|mjs|go|rs|java|kt|php|cs|swift|feature|exs?)\b|"
    r"^(?:Test[A-Z_]\w*|\w+Tests?|test_\w+|\w+(?:\.\w+)*\.test_\w+|tests?\.\w+.*)$")


def focused(call: ToolCall) -> bool:
    """Whether a run narrows its purpose to part of the project (``pytest tests/test_a.py``,
    ``./mvnw test -Dtest=OrderTest``, ``go test ./pkg -run TestX``, ``cargo test parser::``),
    as opposed to the whole suite (``./mvnw verify``, ``go test ./...``, ``pnpm vitest run``)."""
    main = next((s for s in segments(call.command) if command_purpose(s) == call.purpose),
                call.command)
    inner = inner_command(main)
    head = next((m for purpose, pattern in _PURPOSES if purpose == call.purpose
                 and (m := pattern.match(inner))), None)
    rest = inner[head.end():] if head else " ".join(inner.split()[1:])
    return any(_SELECTOR.search(word.strip("'\"")) for word in rest.split())


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


Coding = CodingScene  # the name the scene registry (``deltamem.scenes.make_scene``) loads


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
