"""The reader of a coding agent's tool calls: what a call did and what its result says.

**A tool call** (:func:`parse_call`) is an action -- the tool, the command or the file path that
matters -- with a result: a status (``ok``, ``error``, ``no-match``, ``unknown``, ``rejected``,
``interrupted``), the exit code when the transcript records one, and the output. A shell
command has a purpose (:func:`command_purpose`: tests, type checks, lint, build, deploy,
migrations, install, a check, a read, or a plain run), read from the program a segment runs --
the program a container or package runner runs (``docker compose run app pytest`` runs
``pytest``) -- and a subject (:func:`subject`). The meaningful part of an output is never its
head: :func:`reason` is the last line that reads as an error (clauses cut from the front, so
"... refused: [policy] X must be set" keeps the policy; a runner's totals and trailers are never
the reason), :func:`summary` the last test or build summary line, :func:`gist` both with the
tail.

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
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import PurePosixPath

from deltamem._util.lazyre import lazy
from deltamem.core.model import Step

_ANSI = lazy(r"\x1b\[[0-9;?]*[A-Za-z]")
_WS = lazy(r"\s+")

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
_PURPOSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((p, lazy(r, re.I)) for p, r in (
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
    # Any other tool whose sub-command (or task-runner task) is named ``test``: build tools and
    # task runners document ``<tool> test`` (``stack test``, ``cabal test``, ``zig build
    # test``, ``molecule test``, ``bazelisk test``, ``deno task test``, ``mise run test``).
    ("tests", r"^[\w.\-/]+(?: (?:task|run|build|exec|make))? (?:test|tests|spec)(?=\s|$)"),
))
# Purposes whose runs are project knowledge (how the project is checked, built, shipped).
KNOWLEDGE_PURPOSES = ("deploy", "migrations", "tests", "type checks", "lint", "build", "install")
# Purposes whose failure reason stays worth knowing after a later run succeeds (a policy, a
# credential, a lock, a missing dependency), unlike a test's assertion that a fix made false.
GATED = ("deploy", "migrations", "install", "build")
# Purposes whose runs verify a change: the last one decides a task's outcome.
VERIFYING = ("tests", "type checks", "lint", "build", "deploy", "migrations")
_CHECK_PROGRAMS = lazy(r"^(grep|egrep|fgrep|rg|ag|ack|test|\[|\[\[|diff|cmp|which|"
                       r"command -v|type|pgrep|git diff)(?=\s|$)")
_SEGMENT_SPLIT = lazy(r"\s*(?:&&|\|\||;|\n)\s*")
_ENV_ASSIGN = lazy(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)+")
_WRAPPERS = lazy(r"^(?:sudo|time|timeout \S+|nice|env|command|exec|xargs)\s+")
# Commands that run another command: containers (``docker compose run [opts] SERVICE CMD``) and
# package runners (``uv run``, ``bundle exec``, ``npx``, ``yarn``/``pnpm`` running a bin).
_CONTAINER = lazy(
    r"^(?:docker[ -]compose|docker|podman(?:[ -]compose)?|nerdctl)\s+(?:-f\s+\S+\s+)*"
    r"(?:run|exec)\s+(?:(?:-[ewuv]|--(?:env|workdir|user|volume|entrypoint|name|env-file))"
    r"[ =]\S+\s+|-{1,2}[\w-]+\s+)*(?:\S+)\s+(?=\S)")
# Environment runners too, each by its documented grammar: ``direnv exec DIR CMD``, ``pyenv``/
# ``rbenv``/``nodenv exec CMD``, ``rustup run TOOLCHAIN CMD``, ``conda``/``mamba``/``micromamba
# run [-n ENV] CMD``, ``nix develop [INSTALLABLE] --command CMD``.
_RUNNER = lazy(r"^(?:(?:uv|poetry|pipenv|hatch|pdm|rye) run|bundle exec|npx|pnpx|bunx|"
               r"(?:pnpm|yarn|npm) (?:exec|dlx)|(?:pnpm|yarn)(?= (?!run\b|add\b|install\b|"
               r"test\b|build\b|lint\b|ci\b|i\b|remove\b|why\b|list\b|ls\b)\S)|"
               r"dotnet tool run|kubectl exec .*?--|direnv exec \S+|(?:pyenv|rbenv|nodenv) "
               r"exec|rustup run \S+|(?:conda|mamba|micromamba) run(?:\s+(?:-[np]|--name|"
               r"--prefix)\s+\S+|\s+--[\w-]+)*|nix develop(?:\s+[^-\s]\S*)?\s+"
               r"(?:-c|--command))\s+")
_SHELL_C = lazy(r"^(?:bash|sh|zsh)\s+-l?c\s+")
_EXIT = lazy(r"^(?:error:\s*)?(?:exit code|exit status|exited with code|Exit code)"
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
_RUNNER_TOTALS = lazy(_RUNNER_TOTALS_FAILED, re.I | re.M)
# ... and any failure line a runner prints (these also name the test and often the reason).
_RUNNER_FAILED = lazy(
    _RUNNER_TOTALS_FAILED + r"|^FAILED\b|^FAIL\b|--- FAIL|^FAILURES!|^ERRORS!|"
    r"\bThere (?:was|were) \d+ failures?\b", re.I | re.M)
_RUNNER_PASSED = lazy(
    r"\b\d+ (?:passed|passing)\b|^ok\s+\S+|^PASS\b|\bBUILD SUCCESS(?:FUL)?\b|"
    r"Tests run: \d+, Failures: 0, Errors: 0|\btest result: ok\b|\d+ examples?, 0 failures|"
    r"\d+ runs, \d+ assertions, 0 failures, 0 errors|Executed \d+ tests?, with 0 failures|"
    r"\bTest run with \d+ tests?.* passed\b|^OK(?: \(\d+ tests?|$)|^Passed!\s+-\s+Failed:\s+0|"
    r"All specs passed|\bTests?:?\s+\d+ passed", re.I | re.M)
# Errors any tool reports by their documented prefixes.
_FAILED_SUMMARY = lazy(
    r"^npm ERR!|^error(?:\[\w+\])?:|\bFound [1-9]\d* errors?\b|^Error\b|^fatal:|"
    r"\bError from server\b|^Traceback \(most recent call last\)", re.M)
_SUMMARY = lazy(
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


_ERROR_LINE = lazy(
    r"(\b(error|errors|exception|fatal|failed|failure|forbidden|denied|refused|rejected|"
    r"not allowed|not permitted|cannot|can't|could not|couldn't|unable to|invalid|"
    r"not found|no such|missing|timed out|timeout|panic|traceback|violat\w+|"
    r"unauthori[sz]ed|must|required|expected|but was|assert\w*|want)\b|^E\s{2,}|"
    r"^\w+(Error|Exception):)", re.I)
# What test runners and build tools print after the failures (how to rerun, where to read
# more, a list of the failed ones): their documented trailers, never the reason.
_EPILOGUE = lazy(
    r"to rerun|there (?:are|were) (?:test )?failures|there were failing tests|re-run maven|"
    r"for more information about|failed to execute goal|what went wrong|^\W*try:|"
    r"^failed examples|^build fail|^failures!?:?$|run with --(?:stacktrace|info|debug|scan)|"
    r"get more help|^\[error\]\s*(?:->|$)|^\[error\] (?:results|failures):?\s*$|"
    r"^test case '.*' (?:passed|failed)|^[\w ]{1,40}:$", re.I)
_MISSING_ENV = (
    lazy(r"KeyError: (?:key not found: )?['\"]([A-Z][A-Z0-9]*_[A-Z0-9_]+)['\"]"),
    lazy(r"(?:environment variable|env var(?:iable)?|config var)\s+[`'\"]?"
         r"([A-Z][A-Z0-9_]{2,})", re.I),
    lazy(r"\b([A-Z][A-Z0-9]*_[A-Z0-9_]+)[`'\"]? (?:is not set|not set|is required|is "
         r"missing|must be set|is undefined|is empty)", re.I),
    lazy(r"(?:missing|undefined|unset) (?:required )?(?:env(?:ironment)? )?(?:variable)?"
         r"[:\s]+[`'\"]?([A-Z][A-Z0-9]*_[A-Z0-9_]+)"),
)
_PATH_TOKEN = lazy(r"(?<![\w/.-])((?:/|\./|~/)?[\w.@-]+(?:/[\w.@-]+)+|[\w-]+\.(?:py|ts|tsx|"
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
    if status == "error" and code == 124 and purpose not in VERIFYING \
            and re.match(r"timeout\s", _ENV_ASSIGN.sub("", command)):
        return "ok"  # ``timeout``'s own status: its limit stopped a command that was running
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


_COUNT_ONLY = lazy(r"^[\s=*_-]*(?:\d+ \w+,? ?)+(?:in [\d.]+m?s)?[\s=*_-]*$")


# An absolute path (POSIX, home-relative or a Windows drive) of more than four parts: the
# machine's own place, where a failure's words (the error and its message) are what carries.
_PATH_PART = r"[/\\][^\s/\\'\"`:]+"
_LONG_PATH = lazy(rf"(?<![\w.~/-])(?:~|[A-Za-z]:)?(?:{_PATH_PART}){{4,}}"
                  rf"(?P<tail>(?:{_PATH_PART}){{3}})")


def tail_cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters from the front (the end is kept), at a clause
    boundary when there is one, marked with ``…``. A text too long has its long absolute paths
    shortened to their last three parts first (``…/gw0/3/2.png``): an error line's paths take
    its room, and a cut from the front would lose the error's own words first."""
    text = flat(text)
    if len(text) <= limit:
        return text
    text = _LONG_PATH.sub(lambda m: "…" + m.group("tail"), text)
    if len(text) <= limit:
        return text
    keep = text[len(text) - (limit - 1):]
    for sep in (": ", "; ", ". ", ", ", " "):
        at = keep.find(sep)
        if 0 <= at < len(keep) // 2:
            keep = keep[at + len(sep):]
            break
    return "…" + keep


_HEADLINE = lazy(r"^[\W_]*(?:error(?:\[\w+\])?:|\[error\]|error from server|fatal:|"
                 r"failed\b|\w*(?:error|exception):|panic:|--- fail)", re.IGNORECASE)
# A line of counts ("Error: 3 files checked, 1 failed", "22 issues:"): a summary, not a reason.
_COUNTISH = lazy(r"^[\W_]*(?:\w+:\s*)?(?:\d+\s+[\w()]+(?:\s+\w+)?[,;:]?\s*)+[\W_]*$")


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


def names_project_files(text: str) -> bool:
    """Whether ``text`` names a file path (``src/app.py``, ``/etc/x``, ``cart.py``)."""
    return bool(_PATH_TOKEN.search(text))


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
_SELECTOR = lazy(
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
