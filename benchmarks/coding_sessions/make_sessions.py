"""Generate the labelled coding-session suite (``benchmarks/coding_sessions/``) from compact specs.

Each session below is a short script of what happened: the user's turns, the assistant's words
and its tool calls with their results. ``render_claude`` writes it as Claude Code records a
session on disk (``~/.claude/projects/<dir>/<session>.jsonl``: one line per user/assistant
record, one line per content block of a reply, tool results as user records with
``tool_result`` blocks and a ``toolUseResult`` summary, interrupts as user text
``[Request interrupted by user]``, rejected tool calls as an ``is_error`` result saying so);
``render_codex`` writes it as Codex's rollout file (``~/.codex/sessions/YYYY/MM/DD/
rollout-*.jsonl``: ``session_meta``, ``turn_context``, ``response_item`` and ``event_msg``
lines, shell calls as ``function_call`` with the JSON output and exit code, edits as the
``apply_patch`` custom tool, an interrupt as a ``turn_aborted`` event).

``labels.json`` holds, per session in the order they happened: the file, its format, the
repository root, the working directory, the task as the user stated it, the true outcome, the
phrases a good memory should surface next time (``lessons``), the secrets the transcript
carries (fake values in the real formats) and the strings an edit made stale; and the probes:
a new session's directory and first prompt, whether anything should be injected, the phrases
the injection must contain and must not contain.

The secrets are fake, made from a seeded random generator in the shapes real ones have
(Stripe ``sk_live_``/``whsec_``, AWS ``AKIA``, GitHub ``ghp_``, JWTs, PEM private keys,
passwords in database URLs), so scanners that look for the formats see them as real.

    python benchmarks/coding_sessions/make_sessions.py [FOLDER]   # default: rewrite in place
"""

from __future__ import annotations

import base64
import json
import random
import sys
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RNG = random.Random(31)
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def b64url(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode() \
        .rstrip("=")


def jwt(claims: dict[str, Any]) -> str:
    return (b64url({"alg": "HS256", "typ": "JWT"}) + "." + b64url(claims) + "."
            + base64.urlsafe_b64encode(RNG.randbytes(32)).decode().rstrip("="))


def pem_body(lines: int = 12) -> list[str]:
    return [base64.b64encode(RNG.randbytes(48)).decode() for _ in range(lines)]


# ---- the fake secrets (fixed by the seed) ---------------------------------------------------
SECRETS: dict[str, str] = {
    "stripe_live": "sk_live_51" + rand(22) + rand(30),
    "whsec_live": "whsec_" + rand(32),
    "whsec_test": "whsec_" + rand(32),
    "shop_db_pw": "Qm7-" + rand(14),
    "ledger_db_pw": "ldg_" + rand(16),
    "aws_key_id": "AKIA" + rand(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
    "aws_secret": rand(40, ALNUM + "+/"),
    "ghp": "ghp_" + rand(36),
    "django_key": "django-insecure-" + rand(
        40, "abcdefghijklmnopqrstuvwxyz0123456789!@#%^&*(-_=+)"),
    "auth_jwt": jwt({"sub": "svc-gateway-it", "aud": "auth.acme.internal", "iat": 1764806400,
                     "exp": 1796342400, "scope": "tokens:issue"}),
    "kube_token": jwt({"iss": "kubernetes/serviceaccount", "sub":
                       "system:serviceaccount:ci:deployer", "kubernetes.io/serviceaccount/"
                       "namespace": "ci"}),
    "sentry_dsn_key": rand(32, "0123456789abcdef"),
}
PEM_LINES = pem_body()
KUBE_KEY_DATA = base64.b64encode(
    ("-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_LINES)
     + "\n-----END RSA PRIVATE KEY-----\n").encode()).decode()
SECRETS["kube_client_key"] = KUBE_KEY_DATA
SECRETS["pem_line"] = PEM_LINES[3]


# ---- session specs --------------------------------------------------------------------------
@dataclass
class Call:
    """One tool call and its result (``code`` is the exit status of a command)."""

    tool: str
    args: dict[str, Any]
    out: str
    code: int = 0
    rejected: bool = False
    text: str = ""  # what the assistant said just before the call


@dataclass
class Say:
    text: str


@dataclass
class Interrupt:
    for_tool_use: bool = False


@dataclass
class Session:
    slug: str
    fmt: str  # "claude" or "codex"
    cwd: str
    repo: str
    task: str
    outcome: str
    lessons: list[str]
    turns: list[tuple[str, list[Any]]]
    secrets: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    branch: str = "main"


def bash(cmd: str, out: str, code: int = 0, text: str = "", desc: str = "") -> Call:
    return Call("Bash", {"command": cmd, "description": desc or cmd[:40]}, out, code, text=text)


def numbered(text: str, start: int = 1) -> str:
    return "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(text.split("\n"), start))


def read(path: str, text: str, start: int = 1, say: str = "") -> Call:
    return Call("Read", {"file_path": path}, numbered(text, start), text=say)


def edit(path: str, old: str, new: str, snippet: str, start: int = 1, say: str = "") -> Call:
    return Call("Edit", {"file_path": path, "old_string": old, "new_string": new},
                f"The file {path} has been updated. Here's the result of running `cat -n` on a "
                f"snippet of the edited file:\n{numbered(snippet, start)}", text=say)


def write(path: str, content: str, say: str = "") -> Call:
    return Call("Write", {"file_path": path, "content": content},
                f"File created successfully at: {path}", text=say)


def grep(pattern: str, out: str, path: str = "") -> Call:
    args = {"pattern": pattern, "output_mode": "content", "-n": True}
    if path:
        args["path"] = path
    return Call("Grep", args, out or "No matches found")


def todo(*items: str) -> Call:
    todos = [{"content": t, "status": "in_progress" if i == 0 else "pending",
              "activeForm": t} for i, t in enumerate(items)]
    return Call("TodoWrite", {"todos": todos},
                "Todos have been modified successfully. Ensure that you continue to use the todo "
                "list to track your progress. Please proceed with the current tasks if "
                "applicable")


def sh(cmd: str, out: str, code: int = 0, text: str = "") -> Call:
    return Call("shell", {"command": ["bash", "-lc", cmd]}, out, code, text=text)


def patch(path: str, old: str, new: str, text: str = "") -> Call:
    body = "\n".join(["*** Begin Patch", f"*** Update File: {path}", "@@"]
                     + [f"-{line}" for line in old.split("\n")]
                     + [f"+{line}" for line in new.split("\n")] + ["*** End Patch"])
    return Call("apply_patch", {"input": body},
                f"Success. Updated the following files:\nM {path}\n", text=text)


def rejected(call: Call) -> Call:
    call.rejected = True
    return call


# ---- realistic long outputs -----------------------------------------------------------------
def pytest_out(root: str, files: list[tuple[str, int]], failures: list[str], summary: str,
               short: list[str], py: str = "3.12.3") -> str:
    total = sum(n for _, n in files)
    lines = ["============================= test session starts "
             "==============================",
             f"platform linux -- Python {py}, pytest-8.3.4, pluggy-1.5.0",
             f"rootdir: {root}", "configfile: pyproject.toml",
             "plugins: cov-5.0.0, anyio-4.6.2, mock-3.14.0", f"collected {total} items", ""]
    done = 0
    for name, n in files:
        done += n
        marks = "F" if any(name in s for s in short) else "."
        dots = ("." * (n - 1) + marks) if n else ""
        lines.append(f"{name} {dots}".ljust(75) + f"[{100 * done // total:3d}%]")
    if failures:
        lines += ["", "=================================== FAILURES "
                  "===================================", *failures,
                  "=========================== short test summary info "
                  "============================", *short]
    lines.append(summary)
    return "\n".join(lines)


def filler_files(prefix: str, names: list[str], per: int = 6) -> list[tuple[str, int]]:
    return [(f"{prefix}{n}", per + (i % 5)) for i, n in enumerate(names)]


PY_TESTS = ["test_api.py", "test_auth.py", "test_cart.py", "test_catalog.py", "test_checkout.py",
            "test_coupons.py", "test_emails.py", "test_inventory.py", "test_orders.py",
            "test_payments.py", "test_search.py", "test_shipping.py", "test_taxes.py",
            "test_users.py", "test_webhooks.py"]


def kubectl_apply(lines: list[str], error: str) -> str:
    return "\n".join(lines + [error])


def tf_refresh(resources: list[str]) -> list[str]:
    return [f"{r}: Refreshing state... [id={r.split('.')[-1]}-{rand(8, '0123456789abcdef')}]"
            for r in resources]


# ---- the sessions, in the order they happened -----------------------------------------------
def sessions() -> list[Session]:  # noqa: PLR0915 - one long script of sessions, by design
    S = SECRETS
    out: list[Session] = []

    # 1. shop: a failing pytest diagnosed, "yes please fix it", then the whole suite, ending
    #    with a verification grep that finds nothing (exit 1, expected).
    buggy = "        return apply_discount(apply_discount(subtotal(items), code), code)"
    fixed = "        return apply_discount(subtotal(items), code)"
    cart = ("from shop.money import round_money\nfrom shop.pricing import apply_discount, "
            "subtotal\n\n\nclass Cart:\n    def __init__(self, items, code=None):\n"
            "        self.items = items\n        self.code = code\n\n    def total(self):\n"
            "        items, code = self.items, self.code\n" + buggy + "\n")
    fail_tb = ["_______________________ test_checkout_total_with_discount "
               "_______________________", "",
               "    def test_checkout_total_with_discount():",
               "        cart = Cart([Item('mug', 50.0), Item('tee', 50.0)], code='TEN')",
               ">       assert cart.total() == 90.0", "E       assert 81.0 == 90.0",
               "E        +  where 81.0 = <bound method Cart.total of <shop.cart.Cart object at "
               "0x7f3a2c1e5b50>>()", "E        +    where <bound method Cart.total ...> = "
               "<shop.cart.Cart object at 0x7f3a2c1e5b50>.total", "",
               "tests/test_checkout.py:27: AssertionError"]
    out.append(Session(
        "shop-checkout-discount", "claude", "/home/dev/shop", "/home/dev/shop",
        "the checkout test fails with a wrong total, fix it", "success",
        ["shop/cart.py", "discount", "twice", "pytest -q"],
        [("the checkout test fails with a wrong total, fix it", [
            todo("Reproduce the failing checkout test", "Find the cause", "Fix and re-run"),
            bash("pytest -q tests/test_checkout.py", pytest_out(
                "/home/dev/shop", [("tests/test_checkout.py", 9)], fail_tb,
                "========================= 1 failed, 8 passed in 0.41s "
                "=========================",
                ["FAILED tests/test_checkout.py::test_checkout_total_with_discount - "
                 "assert 81.0 == 90.0"]), 1, "Let me reproduce the failure first."),
            grep("def total", "shop/cart.py:10:    def total(self):\n"
                 "shop/invoice.py:31:    def total(self, lines):"),
            read("/home/dev/shop/shop/cart.py", cart),
            Say("Found it: `Cart.total` in `shop/cart.py` applies the discount twice "
                "(`apply_discount(apply_discount(...))`), so a 10% code takes 19% off: "
                "100 -> 81 instead of 90. The fix is to apply it once. Shall I fix it?"),
        ]), ("yes please fix it", [
            edit("/home/dev/shop/shop/cart.py", buggy, fixed,
                 "    def total(self):\n        items, code = self.items, self.code\n" + fixed,
                 10),
            bash("pytest -q tests/test_checkout.py", ".........                      "
                 "                                          [100%]\n9 passed in 0.38s"),
            Say("Fixed: the discount is now applied once; the checkout tests pass."),
        ]), ("now run the whole suite", [
            bash("pytest -q", pytest_out("/home/dev/shop", filler_files("tests/", PY_TESTS), [],
                                         "============================= 120 passed in 3.42s "
                                         "==============================", [])),
            bash("grep -rn 'apply_discount(apply_discount' shop/", "", 1,
                 "Checking no other place applies a discount twice."),
            Say("All 120 tests pass, and no other code path applies the discount twice "
                "(the grep finds nothing)."),
        ])], stale=[buggy.strip()]))

    # 2. platform: kubectl apply to prod denied by a Gatekeeper constraint; reason at the end.
    applied = [f"{kind} configured" if i % 3 else f"{kind} unchanged" for i, kind in enumerate([
        "namespace/prod", "serviceaccount/api", "configmap/api-config", "configmap/api-flags",
        "secret/api-tls", "service/api", "service/api-internal", "poddisruptionbudget.policy/api",
        "horizontalpodautoscaler.autoscaling/api", "networkpolicy.networking.k8s.io/api-ingress",
        "networkpolicy.networking.k8s.io/api-egress", "ingress.networking.k8s.io/api",
        "servicemonitor.monitoring.coreos.com/api", "role.rbac.authorization.k8s.io/api-reader",
        "rolebinding.rbac.authorization.k8s.io/api-reader", "cronjob.batch/api-cleanup",
        "configmap/api-dashboards", "service/api-metrics"])]
    applied = [f"Warning: resource {a.split()[0]} is missing the kubectl.kubernetes.io/"
               "last-applied-configuration annotation which is required by kubectl apply. "
               "kubectl apply should only be used on resources created declaratively by either "
               "kubectl create --save-config or kubectl apply. The missing annotation will be "
               "patched automatically.\n" + a if i in (4, 9) else a
               for i, a in enumerate(applied)]
    applied += [f"configmap/api-feature-{n} unchanged" for n in range(1, 21)]
    denial = ('Error from server (Forbidden): error when creating "prod/api-deployment.yaml": '
              'admission webhook "validation.gatekeeper.sh" denied the request: '
              "[require-change-ticket] deployments in namespace prod must carry the annotation "
              "acme.io/change-ticket with an approved ticket id")
    deploy_yaml = ("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n"
                   "  namespace: prod\n  labels:\n    app: api\nspec:\n  replicas: 4\n"
                   "  template:\n    spec:\n      containers:\n        - name: api\n"
                   "          image: registry.acme.io/api:v2.14.0")
    out.append(Session(
        "platform-prod-deploy-gatekeeper", "claude", "/home/dev/platform/deploy/k8s",
        "/home/dev/platform", "deploy api v2.14.0 to production", "success",
        ["require-change-ticket", "acme.io/change-ticket", "kubectl rollout status"],
        [("deploy api v2.14.0 to production", [
            bash("kubectl config current-context", "acme-prod"),
            bash("kubectl apply -f prod/", kubectl_apply(applied, denial), 1),
            Say("The apply was denied by Gatekeeper: the `require-change-ticket` constraint says "
                "deployments in namespace prod must carry the annotation "
                "`acme.io/change-ticket` with an approved ticket id. Do you have the ticket?"),
        ]), ("the ticket is CHG-4821, add it", [
            read("/home/dev/platform/deploy/k8s/prod/api-deployment.yaml", deploy_yaml),
            edit("/home/dev/platform/deploy/k8s/prod/api-deployment.yaml",
                 "  namespace: prod\n", "  namespace: prod\n  annotations:\n"
                 "    acme.io/change-ticket: \"CHG-4821\"\n",
                 "  name: api\n  namespace: prod\n  annotations:\n"
                 "    acme.io/change-ticket: \"CHG-4821\"", 4),
            bash("kubectl apply -f prod/", "\n".join(a.split("\n")[-1] for a in applied)
                 + "\ndeployment.apps/api configured"),
            bash("kubectl rollout status deployment/api -n prod --timeout=300s",
                 "\n".join(f'Waiting for deployment "api" rollout to finish: {i} of 4 updated '
                           "replicas are available..." for i in range(1, 4))
                 + '\ndeployment "api" successfully rolled out'),
            Say("Deployed v2.14.0 to prod with `acme.io/change-ticket: CHG-4821`; the rollout "
                "finished (4/4 replicas)."),
        ])]))

    # 3. ledger: alembic migration, multiple heads after a merge; cat .env prints a DB password.
    heads_tb = ["Traceback (most recent call last):",
                '  File "/home/dev/ledger/.venv/bin/alembic", line 8, in <module>',
                "    sys.exit(main())"]
    frames = [("alembic/config.py", 636, "main", "CommandLine(prog=prog).main(argv=argv)"),
              ("alembic/config.py", 626, "main", "self.run_cmd(cfg, options)"),
              ("alembic/config.py", 603, "run_cmd", "fn("),
              ("alembic/command.py", 406, "upgrade", "script.run_env()"),
              ("alembic/script/base.py", 582, "run_env", 'util.load_python_file(self.dir, '
               '"env.py")'),
              ("alembic/util/pyfiles.py", 95, "load_python_file", "module = "
               "load_module_py(module_id, path)"),
              ("alembic/util/pyfiles.py", 113, "load_module_py",
               "spec.loader.exec_module(module)  # type: ignore"),
              ("<frozen importlib._bootstrap_external>", 995, "exec_module", ""),
              ("<frozen importlib._bootstrap>", 488, "_call_with_frames_removed", ""),
              ("migrations/env.py", 78, "<module>", "run_migrations_online()"),
              ("migrations/env.py", 72, "run_migrations_online", "context.run_migrations()"),
              ("<string>", 8, "run_migrations", ""),
              ("alembic/runtime/environment.py", 946, "run_migrations",
               "self.get_context().run_migrations(**kw)"),
              ("alembic/runtime/migration.py", 615, "run_migrations",
               "for step in self._migrations_fn(heads, self):"),
              ("alembic/command.py", 395, "upgrade", "return script._upgrade_revs(revision, rev)"),
              ("alembic/script/base.py", 458, "_upgrade_revs",
               "for script in reversed(list(revs))"),
              ("alembic/script/revision.py", 814, "iterate_revisions",
               "revisions, heads = fn("),
              ("alembic/script/revision.py", 1447, "_collect_upgrade_revisions",
               "targets: Collection[Revision] = self._parse_upgrade_target("),
              ("alembic/script/revision.py", 1234, "_parse_upgrade_target",
               "return self.get_revisions(target)"),
              ("alembic/script/revision.py", 542, "get_revisions",
               "resolved_id, branch_label = self._resolve_revision_number("),
              ("alembic/script/revision.py", 768, "_resolve_revision_number",
               "self._revision_map")]
    for path, line, fn, code in frames:
        where = path if path.startswith("<") or path.startswith("migrations") else \
            f"/home/dev/ledger/.venv/lib/python3.11/site-packages/{path}"
        heads_tb.append(f'  File "{where}", line {line}, in {fn}')
        if code:
            heads_tb.append(f"    {code}")
    heads_tb += ["alembic.script.revision.MultipleHeads: Multiple heads are present for given "
                 "argument 'head'; 4b1e2a7c9d10, 9f3c5d2e1a47", "",
                 "During handling of the above exception, another exception occurred:", "",
                 "FAILED: Multiple head revisions are present for given argument 'head'; please "
                 "specify a specific target revision, '<branchname>@head' to narrow to a "
                 "specific head, or 'heads' for all heads"]
    ledger_env = (f"DATABASE_URL=postgresql+psycopg://ledger:{S['ledger_db_pw']}@localhost:5432/"
                  "ledger\nTEST_DATABASE_URL=postgresql+psycopg://ledger:"
                  f"{S['ledger_db_pw']}@localhost:5432/ledger_test\nLOG_LEVEL=debug\n"
                  "FX_RATES_URL=https://fx.acme.internal/v1/rates")
    mig = ('"""add currency to invoices\n\nRevision ID: 9f3c5d2e1a47\nRevises: 2c8d1e0b7a55\n'
           '"""\nfrom alembic import op\nimport sqlalchemy as sa\n\nrevision = "9f3c5d2e1a47"\n'
           'down_revision = "2c8d1e0b7a55"\n\n\ndef upgrade():\n    pass\n\n\n'
           "def downgrade():\n    pass")
    out.append(Session(
        "ledger-currency-migration", "claude", "/home/dev/ledger", "/home/dev/ledger",
        "add a currency column to invoices with a migration", "success",
        ["alembic merge heads", "alembic upgrade head", "Multiple head"],
        [("add a currency column to invoices with a migration", [
            bash("cat .env", ledger_env, text="Checking which database alembic talks to."),
            bash("alembic revision --autogenerate -m 'add currency to invoices'",
                 "INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.\n"
                 "INFO  [alembic.runtime.migration] Will assume transactional DDL.\n"
                 "  Generating /home/dev/ledger/migrations/versions/"
                 "9f3c5d2e1a47_add_currency_to_invoices.py ...  done"),
            read("/home/dev/ledger/migrations/versions/9f3c5d2e1a47_add_currency_to_invoices.py",
                 mig),
            edit("/home/dev/ledger/migrations/versions/9f3c5d2e1a47_add_currency_to_invoices.py",
                 "def upgrade():\n    pass",
                 "def upgrade():\n    op.add_column(\"invoices\", sa.Column(\"currency\", "
                 "sa.String(3), nullable=False, server_default=\"EUR\"))",
                 "def upgrade():\n    op.add_column(\"invoices\", sa.Column(\"currency\", "
                 "sa.String(3), nullable=False, server_default=\"EUR\"))", 14),
            bash("alembic upgrade head", "\n".join(heads_tb), 1),
            bash("alembic heads", "4b1e2a7c9d10 (head)\n9f3c5d2e1a47 (head)",
                 text="Two heads: main gained a migration after I branched."),
            bash("alembic merge heads -m 'merge currency and main'",
                 "  Generating /home/dev/ledger/migrations/versions/"
                 "c7a9e3f1b2d4_merge_currency_and_main.py ...  done"),
            bash("alembic upgrade head",
                 "INFO  [alembic.runtime.migration] Context impl PostgresqlImpl.\n"
                 "INFO  [alembic.runtime.migration] Will assume transactional DDL.\n"
                 "INFO  [alembic.runtime.migration] Running upgrade 2c8d1e0b7a55 -> "
                 "9f3c5d2e1a47, add currency to invoices\n"
                 "INFO  [alembic.runtime.migration] Running upgrade 4b1e2a7c9d10, 9f3c5d2e1a47 "
                 "-> c7a9e3f1b2d4, merge currency and main"),
            bash("pytest -q tests/test_migrations.py", "......\n6 passed in 2.11s"),
            Say("Added `invoices.currency` (String(3), default EUR). `alembic upgrade head` first "
                "failed with 'Multiple head revisions are present' because main had a new "
                "migration; I ran `alembic merge heads` and the upgrade and migration tests pass."),
        ])], secrets=[S["ledger_db_pw"]]))

    # 4. webapp (Codex): vitest date test after a timezone change.
    vitest_pass = [f" ✓ src/{p}.test.ts ({n} tests) {12 + 3 * n}ms" for p, n in [
        ("api/client", 14), ("api/retry", 6), ("components/Header", 4), ("components/Cart", 11),
        ("components/Table", 9), ("hooks/useDebounce", 3), ("hooks/useFetch", 7),
        ("store/cart", 12), ("store/session", 8), ("utils/currency", 10), ("utils/strings", 15),
        ("utils/url", 6), ("pages/Checkout", 5), ("pages/Orders", 7), ("i18n/format", 9),
        ("components/Modal", 4), ("components/Toast", 3), ("utils/array", 8),
        ("utils/validators", 13), ("api/errors", 5), ("components/Pagination", 6),
        ("components/Select", 9), ("components/DatePicker", 7), ("store/filters", 6),
        ("utils/sort", 4), ("utils/debounce", 3)]]
    vitest_fail = "\n".join([" RUN  v2.1.8 /home/dev/webapp", "", *vitest_pass,
                             " ❯ src/utils/date.test.ts (6 tests | 1 failed) 31ms",
                             "   × formatDate > formats the billing day in UTC 9ms", "",
                             "⎯⎯⎯⎯⎯⎯⎯ Failed Tests 1 ⎯⎯⎯⎯⎯⎯⎯", "",
                             " FAIL  src/utils/date.test.ts > formatDate > formats the billing "
                             "day in UTC",
                             "AssertionError: expected '2026-02-28' to be '2026-03-01' // "
                             "Object.is equality", "", "- Expected", "+ Received", "",
                             "- 2026-03-01", "+ 2026-02-28", "",
                             " ❯ src/utils/date.test.ts:18:45", "",
                             " Test Files  1 failed | 26 passed (27)",
                             "      Tests  1 failed | 205 passed (206)",
                             "   Duration  4.12s"])
    date_old = ("export function formatDate(d: Date): string {\n"
                "  return format(d, 'yyyy-MM-dd');\n}")
    date_new = ("export function formatDate(d: Date): string {\n"
                "  return formatInTimeZone(d, 'UTC', 'yyyy-MM-dd');\n}")
    out.append(Session(
        "webapp-vitest-timezone", "codex", "/home/dev/webapp", "/home/dev/webapp",
        "vitest fails on the date formatting test after the timezone change, fix it", "success",
        ["src/utils/date.ts", "formatInTimeZone", "npx vitest run", "America/New_York"],
        [("vitest fails on the date formatting test after the timezone change, fix it", [
            sh("npx vitest run", vitest_fail, 1),
            sh("sed -n '1,40p' src/utils/date.ts", "import { format } from 'date-fns';\n"
               "import { formatInTimeZone } from 'date-fns-tz';\n\n" + date_old),
            sh("grep -n TZ vitest.config.ts package.json",
               "vitest.config.ts:7:    env: { TZ: 'America/New_York' },"),
            Say("The test runner sets TZ=America/New_York in vitest.config.ts; formatDate uses "
                "local time, so midnight UTC becomes the previous day. Formatting in UTC fixes "
                "it."),
            patch("src/utils/date.ts", date_old, date_new),
            sh("npx vitest run src/utils/date.test.ts", " ✓ src/utils/date.test.ts (6 tests) "
               "14ms\n\n Test Files  1 passed (1)\n      Tests  6 passed (6)"),
            sh("npx vitest run", "\n".join(vitest_pass) + "\n ✓ src/utils/date.test.ts (6 "
               "tests) 14ms\n\n Test Files  27 passed (27)\n      Tests  206 passed (206)"),
            Say("formatDate now formats with formatInTimeZone(d, 'UTC', ...); all 206 vitest "
                "tests pass."),
        ])], stale=["return format(d, 'yyyy-MM-dd');"]))

    # 5. gateway (Go): go test -race finds a data race; diagnosis, then "fix it".
    race = ["==================", "WARNING: DATA RACE",
            "Write at 0x00c0001a4038 by goroutine 23:",
            "  github.com/acme/gateway/internal/ratelimit.(*Bucket).Take()",
            "      /home/dev/gateway/internal/ratelimit/bucket.go:42 +0x7c",
            "  github.com/acme/gateway/internal/ratelimit.TestBucketConcurrent.func1()",
            "      /home/dev/gateway/internal/ratelimit/bucket_test.go:61 +0x4f", "",
            "Previous write at 0x00c0001a4038 by goroutine 22:",
            "  github.com/acme/gateway/internal/ratelimit.(*Bucket).Take()",
            "      /home/dev/gateway/internal/ratelimit/bucket.go:42 +0x7c",
            "  github.com/acme/gateway/internal/ratelimit.TestBucketConcurrent.func1()",
            "      /home/dev/gateway/internal/ratelimit/bucket_test.go:61 +0x4f", "",
            "Goroutine 23 (running) created at:",
            "  github.com/acme/gateway/internal/ratelimit.TestBucketConcurrent()",
            "      /home/dev/gateway/internal/ratelimit/bucket_test.go:58 +0x9a",
            "  testing.tRunner()", "      /usr/local/go/src/testing/testing.go:1690 +0x226",
            "==================", "--- FAIL: TestBucketConcurrent (0.03s)",
            "    testing.go:1399: race detected during execution of test", "FAIL",
            "FAIL\tgithub.com/acme/gateway/internal/ratelimit\t1.241s"]
    go_ok = [f"ok  \tgithub.com/acme/gateway/{p}\t{0.1 + i / 10:.3f}s" for i, p in enumerate([
        "cmd/gateway", "internal/auth", "internal/config", "internal/http", "internal/metrics",
        "internal/proxy", "internal/router", "internal/tls", "internal/upstream",
        "pkg/headers", "pkg/retry", "pkg/trace", "internal/cache", "internal/health",
        "pkg/logging", "pkg/backoff"])]
    bucket_old = ("func (b *Bucket) Take() bool {\n\tif b.tokens > 0 {\n\t\tb.tokens--\n"
                  "\t\treturn true\n\t}\n\treturn false\n}")
    bucket_new = ("func (b *Bucket) Take() bool {\n\tb.mu.Lock()\n\tdefer b.mu.Unlock()\n"
                  "\tif b.tokens > 0 {\n\t\tb.tokens--\n\t\treturn true\n\t}\n\treturn false\n}")
    out.append(Session(
        "gateway-ratelimit-race", "claude", "/home/dev/gateway", "/home/dev/gateway",
        "go test -race fails in the ratelimit package, find out why", "success",
        ["go test -race", "internal/ratelimit/bucket.go", "b.mu"],
        [("go test -race fails in the ratelimit package, find out why", [
            bash("go test -race ./...", "\n".join(go_ok[:6] + race + go_ok[6:]) + "\nFAIL", 1),
            read("/home/dev/gateway/internal/ratelimit/bucket.go",
                 "package ratelimit\n\nimport \"sync\"\n\ntype Bucket struct {\n\tmu     "
                 "sync.Mutex\n\ttokens int\n}\n\n" + bucket_old, 1),
            Say("`Bucket.Take` (internal/ratelimit/bucket.go:42) decrements `b.tokens` without "
                "holding `b.mu`, so two goroutines race on it. Taking the mutex in Take fixes "
                "it."),
        ]), ("ok fix it", [
            edit("/home/dev/gateway/internal/ratelimit/bucket.go", bucket_old, bucket_new,
                 bucket_new, 38),
            bash("go test -race ./internal/ratelimit/",
                 "ok  \tgithub.com/acme/gateway/internal/ratelimit\t1.318s"),
            bash("go test -race ./...", "\n".join(go_ok) +
                 "\nok  \tgithub.com/acme/gateway/internal/ratelimit\t1.302s"),
            bash("go vet ./...", ""),
            Say("Take now holds b.mu; `go test -race ./...` and `go vet ./...` are clean."),
        ])], stale=["func (b *Bucket) Take() bool {\n\tif b.tokens > 0 {"]))

    # 6. infra-live (Terraform): no credentials; `env | grep` prints static AWS keys.
    tf_resources = [f"module.network.aws_subnet.private[{i}]" for i in range(6)] + [
        "module.network.aws_vpc.main", "module.network.aws_nat_gateway.main[0]",
        "module.rds.aws_db_subnet_group.main", "module.rds.aws_db_instance.main",
        "module.eks.aws_eks_cluster.main", "module.eks.aws_iam_role.cluster",
        "module.eks.aws_eks_node_group.default", "module.exports.aws_s3_bucket.exports",
        "module.dns.aws_route53_zone.internal", "module.dns.aws_route53_record.api"]
    tf_init = ["Initializing the backend...", "Initializing modules...",
               "Initializing provider plugins...",
               '- Reusing previous version of hashicorp/aws from the dependency lock file',
               "- Using previously-installed hashicorp/aws v5.82.2", "",
               "Terraform has been successfully initialized!"]
    nocreds = tf_init + [""] * 1 + [
        "Planning failed. Terraform encountered an error while generating this plan.", "",
        "╷", "│ Error: No valid credential sources found", "│",
        '│   with provider["registry.terraform.io/hashicorp/aws"],',
        "│   on providers.tf line 12, in provider \"aws\":", "│   12: provider \"aws\" {", "│",
        "│ Please see https://registry.terraform.io/providers/hashicorp/aws",
        "│ for more information about providing credentials.", "│",
        "│ Error: failed to refresh cached credentials, operation error STS: "
        "GetCallerIdentity, https response error StatusCode: 403, RequestID: "
        "4f1c2d3e-5a6b-4c7d-8e9f-0a1b2c3d4e5f, api error InvalidClientTokenId: The security "
        "token included in the request is invalid.", "╵"]
    nocreds = [f"{r}: Reading..." for r in tf_resources] + nocreds
    env_aws = (f"AWS_PROFILE=acme-staging\nAWS_REGION=eu-west-1\nAWS_ACCESS_KEY_ID="
               f"{S['aws_key_id']}\nAWS_SECRET_ACCESS_KEY={S['aws_secret']}\n"
               "AWS_SDK_LOAD_CONFIG=1")
    out.append(Session(
        "infra-staging-plan-credentials", "claude", "/home/dev/infra-live/envs/staging",
        "/home/dev/infra-live", "run terraform plan for staging", "success",
        ["aws sso login --profile acme-staging", "unset AWS_ACCESS_KEY_ID",
         "InvalidClientTokenId"],
        [("run terraform plan for staging", [
            bash("terraform plan -out=staging.tfplan", "\n".join(nocreds), 1),
            bash("env | grep -i aws", env_aws),
            Say("Static AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY are exported in your shell and "
                "take precedence over AWS_PROFILE=acme-staging; STS rejects them "
                "(InvalidClientTokenId). Unsetting them and logging in with SSO should work."),
            bash("unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY && aws sso login --profile "
                 "acme-staging", "Attempting to automatically open the SSO authorization page "
                 "in your default browser.\nSuccessfully logged into Start URL: "
                 "https://acme.awsapps.com/start"),
            bash("unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY && terraform plan "
                 "-out=staging.tfplan", "\n".join(tf_refresh(tf_resources) + [
                     "", "Terraform will perform the following actions:", "",
                     "  # module.rds.aws_db_instance.main will be updated in-place",
                     "  ~ resource \"aws_db_instance\" \"main\" {",
                     "      ~ instance_class = \"db.t4g.medium\" -> \"db.t4g.large\"",
                     "    }", "", "Plan: 0 to add, 1 to change, 0 to destroy.", "",
                     "Saved the plan to: staging.tfplan"])),
            Say("The plan works after `unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY` and `aws "
                "sso login --profile acme-staging`: 0 to add, 1 to change, 0 to destroy."),
        ])], secrets=[S["aws_key_id"], S["aws_secret"]]))

    # 7. shop: webhook 400; cat .env prints live keys; fixed with the `stripe listen` secret.
    sig_tb = ["__________________________ test_webhook_accepts_signed_event "
              "__________________________", "",
              "client = <FlaskClient <Flask 'shop'>>, signed_event = {...}", "",
              "    def test_webhook_accepts_signed_event(client, signed_event):",
              "        resp = client.post('/webhooks/stripe', data=signed_event.body,",
              "                           headers=signed_event.headers)",
              ">       assert resp.status_code == 200", "E       assert 400 == 200",
              "E        +  where 400 = <WrapperTestResponse streamed [400 BAD REQUEST]>"
              ".status_code", "", "tests/test_webhooks.py:22: AssertionError",
              "------------------------------ Captured log call "
              "-------------------------------",
              "WARNING  shop.webhooks:webhooks.py:31 rejecting webhook: "
              "stripe.error.SignatureVerificationError: No signatures found matching the "
              "expected signature for payload"]
    shop_env = (f"FLASK_ENV=development\nDATABASE_URL=postgresql://shop:{S['shop_db_pw']}"
                f"@localhost:5432/shop\nSTRIPE_SECRET_KEY={S['stripe_live']}\n"
                f"STRIPE_WEBHOOK_SECRET={S['whsec_live']}\nMAIL_FROM=orders@shop.example")
    out.append(Session(
        "shop-stripe-webhook-secret", "claude", "/home/dev/shop", "/home/dev/shop",
        "the stripe webhook returns 400 in local dev, figure out why", "success",
        ["STRIPE_WEBHOOK_SECRET", "stripe listen --print-secret", "SignatureVerificationError"],
        [("the stripe webhook returns 400 in local dev, figure out why", [
            bash("pytest -q tests/test_webhooks.py", pytest_out(
                "/home/dev/shop", [("tests/test_webhooks.py", 7)], sig_tb,
                "========================= 1 failed, 6 passed in 0.52s "
                "=========================",
                ["FAILED tests/test_webhooks.py::test_webhook_accepts_signed_event - "
                 "assert 400 == 200"]), 1),
            bash("cat .env", shop_env),
            Say("STRIPE_WEBHOOK_SECRET in .env is the live endpoint's signing secret, but local "
                "events are signed by `stripe listen`, so signature verification fails "
                "(SignatureVerificationError). Use the secret `stripe listen --print-secret` "
                "prints."),
        ]), ("ok do that", [
            bash("stripe listen --print-secret", S["whsec_test"]),
            edit("/home/dev/shop/.env", f"STRIPE_WEBHOOK_SECRET={S['whsec_live']}",
                 f"STRIPE_WEBHOOK_SECRET={S['whsec_test']}",
                 f"STRIPE_WEBHOOK_SECRET={S['whsec_test']}", 4),
            bash("pytest -q tests/test_webhooks.py", ".......\n7 passed in 0.47s"),
            Say("Local STRIPE_WEBHOOK_SECRET now comes from `stripe listen --print-secret`; the "
                "webhook tests pass."),
        ])], secrets=[S["stripe_live"], S["whsec_live"], S["whsec_test"], S["shop_db_pw"]]))

    # 8. webapp (Claude): eslint import order, fixed with --fix.
    lint_lines = []
    for i, f in enumerate(["src/api/client.ts", "src/components/Cart.tsx", "src/pages/Checkout"
                           ".tsx", "src/store/cart.ts", "src/hooks/useFetch.ts",
                           "src/components/Header.tsx", "src/utils/currency.ts"]):
        lint_lines += ["", f"/home/dev/webapp/{f}"]
        for j in range(2):
            first, second = [("react", "../store"), ("./styles.css", "clsx")][j]
            lint_lines.append(f"  {3 + j}:1  error  `{first}` import should occur before "
                              f"import of `{second}`  import/order")
        if i % 3 == 0:
            lint_lines.append("  12:7  warning  'unused' is assigned a value but never used  "
                              "@typescript-eslint/no-unused-vars")
    lint_out = "\n".join(["> webapp@3.4.0 lint", "> eslint . --max-warnings=0", *lint_lines, "",
                          "✖ 17 problems (14 errors, 3 warnings)",
                          "  14 errors and 0 warnings potentially fixable with the `--fix` "
                          "option.", "", "ESLint found too many warnings (maximum: 0)."])
    out.append(Session(
        "webapp-eslint-import-order", "claude", "/home/dev/webapp", "/home/dev/webapp",
        "eslint fails in CI on the import order, fix it", "success",
        ["npx eslint . --fix", "import/order", "npm run lint", "--max-warnings=0"],
        [("eslint fails in CI on the import order, fix it", [
            bash("npm run lint", lint_out, 1),
            bash("npx eslint . --fix", lint_out.split("✖")[0].split("\n")[0] + "\n\n"
                 "/home/dev/webapp/src/api/client.ts\n  12:7  warning  'unused' is assigned a "
                 "value but never used  @typescript-eslint/no-unused-vars\n\n✖ 3 problems (0 "
                 "errors, 3 warnings)", 0),
            grep("const unused", "src/api/client.ts:12:const unused = retryPolicy();\n"
                 "src/store/cart.ts:12:const unused = 0;\nsrc/components/Header.tsx:12:const "
                 "unused = useTheme();"),
            edit("/home/dev/webapp/src/api/client.ts", "const unused = retryPolicy();\n", "",
                 "const client = createClient({ baseUrl });", 12),
            edit("/home/dev/webapp/src/store/cart.ts", "const unused = 0;\n", "",
                 "export const cartSlice = createSlice({", 12),
            edit("/home/dev/webapp/src/components/Header.tsx", "const unused = useTheme();\n",
                 "", "export function Header() {", 12),
            bash("npm run lint", "> webapp@3.4.0 lint\n> eslint . --max-warnings=0"),
            Say("Import order fixed with `npx eslint . --fix`; I removed the three unused "
                "variables by hand because CI runs eslint with --max-warnings=0. `npm run lint` "
                "is clean."),
        ])]))

    # 9. shop2 (Django): migrations fail on a fresh database; wrong dependency.
    mig_lines = [f"  Applying {a}... OK" for a in [
        "contenttypes.0001_initial", "auth.0001_initial", "admin.0001_initial",
        "admin.0002_logentry_remove_auto_add", "admin.0003_logentry_add_action_flag_choices",
        "contenttypes.0002_remove_content_type_name", "auth.0002_alter_permission_name_max_"
        "length", "auth.0003_alter_user_email_max_length", "auth.0004_alter_user_username_opts",
        "auth.0005_alter_user_last_login_null", "auth.0006_require_contenttypes_0002",
        "auth.0007_alter_validators_add_error_messages", "auth.0008_alter_user_username_max_"
        "length", "auth.0009_alter_user_last_name_max_length", "auth.0010_alter_group_name_"
        "max_length", "auth.0011_update_proxy_permissions", "auth.0012_alter_user_first_name_"
        "max_length", "catalog.0001_initial", "orders.0001_initial", "orders.0002_order_status"]]
    django_tb = ["Traceback (most recent call last):",
                 '  File "/home/dev/shop2/.venv/lib/python3.12/site-packages/django/db/backends/'
                 'utils.py", line 105, in _execute', "    return self.cursor.execute(sql, params)",
                 "psycopg.errors.UndefinedTable: relation \"catalog_category\" does not exist",
                 "", "The above exception was the direct cause of the following exception:", "",
                 "Traceback (most recent call last):",
                 '  File "/home/dev/shop2/manage.py", line 22, in <module>',
                 "    main()"] + [
                 f'  File "/home/dev/shop2/.venv/lib/python3.12/site-packages/django/{p}", '
                 f"line {n}, in {fn}" for p, n, fn in [
                     ("core/management/__init__.py", 442, "execute_from_command_line"),
                     ("core/management/__init__.py", 436, "execute"),
                     ("core/management/base.py", 413, "run_from_argv"),
                     ("core/management/base.py", 459, "execute"),
                     ("core/management/commands/migrate.py", 357, "handle"),
                     ("db/migrations/executor.py", 135, "migrate"),
                     ("db/migrations/executor.py", 167, "_migrate_all_forwards"),
                     ("db/migrations/executor.py", 255, "apply_migration"),
                     ("db/migrations/migration.py", 132, "apply"),
                     ("db/migrations/operations/fields.py", 110, "database_forwards"),
                     ("db/backends/base/schema.py", 750, "add_field"),
                     ("db/backends/postgresql/schema.py", 48, "execute")]] + [
                 "django.db.utils.ProgrammingError: relation \"catalog_category\" does not "
                 "exist"]
    dep_old = "        ('orders', '0002_order_status'),"
    dep_new = "        ('orders', '0002_order_status'),\n        ('catalog', '0002_category'),"
    out.append(Session(
        "shop2-django-migration-dependency", "claude", "/home/dev/shop2", "/home/dev/shop2",
        "migrations are failing on a fresh database, fix it", "success",
        ["python manage.py migrate", "orders/migrations/0003_order_category.py",
         "0002_category"],
        [("migrations are failing on a fresh database, fix it", [
            bash("dropdb --if-exists shop2_fresh && createdb shop2_fresh && "
                 "DATABASE_NAME=shop2_fresh python manage.py migrate",
                 "Operations to perform:\n  Apply all migrations: admin, auth, catalog, "
                 "contenttypes, orders, sessions\nRunning migrations:\n" + "\n".join(mig_lines)
                 + "\n  Applying orders.0003_order_category..." + "\n".join(django_tb), 1),
            read("/home/dev/shop2/orders/migrations/0003_order_category.py",
                 "from django.db import migrations, models\nimport django.db.models.deletion\n"
                 "\n\nclass Migration(migrations.Migration):\n    dependencies = [\n" + dep_old
                 + "\n    ]"),
            edit("/home/dev/shop2/orders/migrations/0003_order_category.py", dep_old, dep_new,
                 "    dependencies = [\n" + dep_new + "\n    ]", 6),
            bash("dropdb --if-exists shop2_fresh && createdb shop2_fresh && "
                 "DATABASE_NAME=shop2_fresh python manage.py migrate",
                 "Operations to perform:\n  Apply all migrations: admin, auth, catalog, "
                 "contenttypes, orders, sessions\nRunning migrations:\n" + "\n".join(mig_lines)
                 + "\n  Applying catalog.0002_category... OK\n  Applying "
                 "orders.0003_order_category... OK\n  Applying sessions.0001_initial... OK"),
            bash("python manage.py test", "Found 84 test(s).\nCreating test database for "
                 "alias 'default'...\nSystem check identified no issues (0 silenced).\n"
                 + "." * 84 + "\n" + "-" * 70 + "\nRan 84 tests in 6.210s\n\nOK\nDestroying "
                 "test database for alias 'default'..."),
            Say("orders/migrations/0003_order_category.py referenced catalog_category without "
                "depending on ('catalog', '0002_category'); with the dependency added, `python "
                "manage.py migrate` works on a fresh database and the 84 tests pass."),
        ])]))

    # 10. ledger: a rejected `alembic downgrade base`, the user stops the task.
    out.append(Session(
        "ledger-reset-db-rejected", "claude", "/home/dev/ledger", "/home/dev/ledger",
        "reset my local database and reapply all migrations", "failure",
        ["alembic downgrade base", "audit"],
        [("reset my local database and reapply all migrations", [
            bash("alembic current", "INFO  [alembic.runtime.migration] Context impl "
                 "PostgresqlImpl.\nINFO  [alembic.runtime.migration] Will assume transactional "
                 "DDL.\nc7a9e3f1b2d4 (head)"),
            rejected(bash("alembic downgrade base", "", text="Downgrading to base, then "
                          "upgrading again.")),
            Interrupt(for_tool_use=True),
        ]), ("no, downgrade base drops the audit tables and their triggers. leave it, I'll "
             "reset it myself", [
            Say("Understood, I won't touch the database. Note for later: `alembic downgrade "
                "base` drops the audit tables, so a reset must not go through it."),
        ])]))

    # 11. gateway (Codex): a /healthz endpoint; build error, then tests, and a verifying grep.
    routes_old = '\tr.Get("/metrics", handlers.Metrics)'
    routes_new = '\tr.Get("/metrics", handlers.Metrics)\n\tr.Get("/healthz", handlers.Health)'
    out.append(Session(
        "gateway-healthz-endpoint", "codex", "/home/dev/gateway", "/home/dev/gateway",
        "add a /healthz endpoint and run the tests", "success",
        ["internal/http/routes.go", "handlers.Health", "go test ./..."],
        [("add a /healthz endpoint and run the tests", [
            sh("rg -n 'r.Get\\(' internal/http/routes.go",
               '14:\tr.Get("/", handlers.Index)\n15:\tr.Get("/metrics", handlers.Metrics)'),
            patch("internal/http/routes.go", routes_old, routes_new),
            sh("go build ./...", "# github.com/acme/gateway/internal/http\n"
               "internal/http/routes.go:16:23: undefined: handlers.Health", 1),
            patch("internal/http/handlers/health.go", "", "package handlers\n\nimport "
                  "\"net/http\"\n\n// Health answers 200 while the process serves.\nfunc "
                  "Health(w http.ResponseWriter, _ *http.Request) {\n\tw.WriteHeader(http."
                  "StatusOK)\n\t_, _ = w.Write([]byte(\"ok\"))\n}"),
            sh("go build ./... && go test ./...", "\n".join(go_ok) +
               "\nok  \tgithub.com/acme/gateway/internal/ratelimit\t1.302s"),
            sh("rg -n 'TODO\\(healthz\\)' .", "", 1),
            Say("Added GET /healthz (handlers.Health in internal/http/handlers/health.go, "
                "routed in internal/http/routes.go). `go test ./...` passes; no TODO(healthz) "
                "left."),
        ])]))

    # 12. platform: a kubeconfig printed whole (client key, token), then a context switch.
    kubeconfig = "\n".join([
        "apiVersion: v1", "clusters:", "- cluster:",
        "    certificate-authority-data: " + base64.b64encode(RNG.randbytes(90)).decode(),
        "    server: https://k8s-staging.acme.internal:6443", "  name: acme-staging",
        "- cluster:", "    certificate-authority-data: "
        + base64.b64encode(RNG.randbytes(90)).decode(),
        "    server: https://k8s-prod.acme.internal:6443", "  name: acme-prod", "contexts:",
        "- context:", "    cluster: acme-staging", "    user: dev-staging",
        "  name: acme-staging", "- context:", "    cluster: acme-prod", "    user: deployer",
        "  name: acme-prod", "current-context: acme-prod", "kind: Config", "preferences: {}",
        "users:", "- name: dev-staging", "  user:", "    client-certificate-data: "
        + base64.b64encode(RNG.randbytes(120)).decode(),
        f"    client-key-data: {KUBE_KEY_DATA}", "- name: deployer", "  user:",
        f"    token: {S['kube_token']}"])
    pods = "\n".join(["NAME                       READY   STATUS    RESTARTS   AGE"] + [
        f"api-7d9c8b{rand(4, 'bcdfghjklmnpqrstvwxz2456789')}-{rand(5, 'bcdfghjklmnpqrstvwxz')}"
        f"   1/1     Running   0          {2 + i}d" for i in range(4)])
    out.append(Session(
        "platform-kubeconfig-contexts", "claude", "/home/dev/platform", "/home/dev/platform",
        "show me the kubeconfig for the staging cluster, I need the context names", "success",
        ["acme-staging", "kubectl config use-context acme-staging", "kubectl get pods -n api"],
        [("show me the kubeconfig for the staging cluster, I need the context names", [
            bash("kubectl config view --raw", kubeconfig),
            Say("Two contexts: `acme-staging` (user dev-staging) and `acme-prod` (user "
                "deployer); the current context is acme-prod."),
        ]), ("switch to staging and show me the api pods", [
            bash("kubectl config use-context acme-staging",
                 'Switched to context "acme-staging".'),
            bash("kubectl get pods -n api", pods),
            Say("Now on acme-staging; the api namespace runs 4 healthy pods."),
        ])], secrets=[S["kube_token"], S["kube_client_key"]]))

    # 13. infra-live (Codex): terraform apply in prod blocked by CI's state lock; user stops.
    lock = tf_init + tf_refresh(tf_resources[:14]) + [
        "╷", "│ Error: Error acquiring the state lock", "│",
        "│ Error message: operation error DynamoDB: PutItem, https response error StatusCode: "
        "400, RequestID: Q3J1N0QH5SS0, ConditionalCheckFailedException: The conditional "
        "request failed", "│ Lock Info:", "│   ID:        9d3c41e2-7a0b-4d5e-8f61-2b3c4d5e6f70",
        "│   Path:      acme-tf-state/prod/terraform.tfstate", "│   Operation: "
        "OperationTypeApply", "│   Who:       ci@runner-7", "│   Version:   1.9.8",
        "│   Created:   2026-12-02 09:14:03.812 +0000 UTC", "│   Info:", "│", "│",
        "│ Terraform acquires a state lock to protect the state from being written",
        "│ by multiple users at the same time. Please resolve the issue above and try",
        "│ again. For most commands, you can disable locking with the \"-lock=false\"",
        "│ flag, but this is not recommended.", "╵"]
    out.append(Session(
        "infra-prod-apply-state-lock", "codex", "/home/dev/infra-live/envs/prod",
        "/home/dev/infra-live", "apply the rds instance class change in prod", "failure",
        ["state lock", "ci@runner-7", "force-unlock"],
        [("apply the rds instance class change in prod", [
            sh("terraform apply -auto-approve", "\n".join(lock), 1),
            Say("The apply could not take the state lock: CI (ci@runner-7) holds it for an "
                "apply on acme-tf-state/prod. I should not force-unlock while CI is applying. "
                "Wait and retry?"),
        ]), ("no, leave it, CI applies prod from the merge anyway", [
            Say("Leaving it: prod is applied by CI after the merge, and `terraform force-unlock` "
                "must not be used while CI holds the lock."),
        ])]))

    # 14. shop-admin (Codex): react-router upgrade breaks the build.
    vite_out = ["> shop-admin@1.8.0 build", "> tsc -b && vite build", ""] + [
        f"src/pages/{p}.tsx:{3 + i}:10 - error TS2305: Module '\"react-router-dom\"' has no "
        f"exported member '{m}'." for i, (p, m) in enumerate([
            ("Orders", "useHistory"), ("Products", "useHistory"), ("Customers", "useHistory"),
            ("Settings", "Redirect")])]
    vite_out = vite_out + [""] + [f"  {n} src/pages/{p}.tsx:{n}" for n, p in
                                  enumerate(["Orders", "Products", "Customers", "Settings"], 3)]
    vite_out += ["", "src/App.tsx:4:10 - error TS2305: Module '\"react-router-dom\"' has no "
                 "exported member 'Switch'.", "", "4 import { Switch, Route } from "
                 "'react-router-dom';", "           ~~~~~~", ""] + [
        f"src/components/{c}.tsx:{7 + i}:3 - error TS2322: Type '{{ exact: true; }}' is not "
        f"assignable to type 'IntrinsicAttributes & RouteProps'." for i, c in enumerate(
            ["Nav", "Sidebar", "Breadcrumbs", "Layout", "Tabs", "UserMenu", "Footer"])]
    vite_out += [""] * 2 + ["Found 12 errors in 12 files.", "", "Errors  Files"] + [
        f"     1  src/{f}" for f in ["App.tsx", "pages/Orders.tsx", "pages/Products.tsx",
                                   "pages/Customers.tsx", "pages/Settings.tsx"]] + [
        f"     1  src/components/{c}.tsx" for c in
        ["Nav", "Sidebar", "Breadcrumbs", "Layout", "Tabs", "UserMenu", "Footer"]]
    app_old = "import { Switch, Route } from 'react-router-dom';"
    app_new = "import { Routes, Route } from 'react-router-dom';"
    out.append(Session(
        "shop-admin-react-router-upgrade", "codex", "/home/dev/shop-admin",
        "/home/dev/shop-admin", "the build fails after upgrading react-router, fix it", "success",
        ["react-router-dom", "useNavigate", "<Routes>", "npm run build"],
        [("the build fails after upgrading react-router, fix it", [
            sh("npm run build", "\n".join(vite_out), 2),
            sh("grep -rn \"from 'react-router-dom'\" src | head -20",
               "src/App.tsx:4:" + app_old + "\n" + "\n".join(
                   f"src/pages/{p}.tsx:3:import {{ useHistory }} from 'react-router-dom';"
                   for p in ["Orders", "Products", "Customers"])),
            patch("src/App.tsx", app_old + "\n      <Switch>", app_new + "\n      <Routes>"),
            patch("src/pages/Orders.tsx", "import { useHistory } from 'react-router-dom';",
                  "import { useNavigate } from 'react-router-dom';"),
            patch("src/pages/Products.tsx", "import { useHistory } from 'react-router-dom';",
                  "import { useNavigate } from 'react-router-dom';"),
            patch("src/pages/Customers.tsx", "import { useHistory } from 'react-router-dom';",
                  "import { useNavigate } from 'react-router-dom';"),
            patch("src/pages/Settings.tsx", "<Redirect to=\"/settings/profile\" />",
                  "<Navigate to=\"/settings/profile\" replace />"),
            sh("npx eslint src --fix && npm run build", "> shop-admin@1.8.0 build\n> tsc -b && "
               "vite build\n\nvite v5.4.11 building for production...\n✓ 412 modules "
               "transformed.\ndist/index.html                   0.46 kB\ndist/assets/index-"
               "Bq3k1.css   18.21 kB\ndist/assets/index-Dp9x2.js   402.77 kB\n✓ built in "
               "5.83s"),
            sh("npm test -- --run", " Test Files  18 passed (18)\n      Tests  96 passed (96)"),
            Say("Migrated to react-router-dom v6: <Switch> -> <Routes>, useHistory -> "
                "useNavigate, <Redirect> -> <Navigate replace>, dropped `exact`. `npm run "
                "build` and the tests pass."),
        ])], stale=[app_old]))

    # 15. shop, from a subfolder: a new test; the user corrects pip to uv.
    out.append(Session(
        "shop-coupon-expiry-test-uv", "claude", "/home/dev/shop/shop", "/home/dev/shop",
        "add a test for coupon expiry", "success",
        ["uv sync --extra test", "uv run pytest", "freezegun"],
        [("add a test for coupon expiry", [
            write("/home/dev/shop/tests/test_coupon_expiry.py",
                  "from datetime import date\n\nfrom freezegun import freeze_time\n\nfrom "
                  "shop.coupons import Coupon\n\n\n@freeze_time('2026-12-01')\ndef "
                  "test_expired_coupon_is_rejected():\n    coupon = Coupon('XMAS', "
                  "expires=date(2026, 11, 30))\n    assert not coupon.valid()\n"),
            bash("cd /home/dev/shop && pytest -q tests/test_coupon_expiry.py", "\n".join([
                "==================================== ERRORS "
                "====================================",
                "______________ ERROR collecting tests/test_coupon_expiry.py ______________",
                "ImportError while importing test module '/home/dev/shop/tests/"
                "test_coupon_expiry.py'.", "Hint: make sure your test modules/packages have "
                "valid Python names.", "Traceback:",
                "/usr/lib/python3.12/importlib/__init__.py:90: in import_module",
                "    return _bootstrap._gcd_import(name[level:], package, level)",
                "tests/test_coupon_expiry.py:3: in <module>",
                "    from freezegun import freeze_time",
                "E   ModuleNotFoundError: No module named 'freezegun'",
                "=========================== short test summary info "
                "============================", "ERROR tests/test_coupon_expiry.py",
                "!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection "
                "!!!!!!!!!!!!!!!!!!!!!", "1 error in 0.21s"]), 2),
            rejected(bash("pip install freezegun", "", text="freezegun is missing; "
                          "installing it.")),
            Interrupt(for_tool_use=True),
        ]), ("don't pip install anything here, we use uv. freezegun is in the test extra: uv "
             "sync --extra test, then uv run pytest", [
            bash("cd /home/dev/shop && uv sync --extra test", "Resolved 48 packages in 12ms\n"
                 "Installed 3 packages in 9ms\n + freezegun==1.5.1\n + pytest-mock==3.14.0\n"
                 " + python-dateutil==2.9.0"),
            bash("cd /home/dev/shop && uv run pytest -q tests/test_coupon_expiry.py",
                 ".\n1 passed in 0.09s"),
            Say("Test added (tests/test_coupon_expiry.py). I'll use `uv sync --extra test` and "
                "`uv run pytest` in this repository from now on."),
        ])]))

    # 16. webapp (Codex), from a package folder: a Button variant and its snapshot.
    btn_old = "export type Variant = 'primary' | 'secondary';"
    btn_new = "export type Variant = 'primary' | 'secondary' | 'danger';"
    out.append(Session(
        "webapp-ui-button-danger", "codex", "/home/dev/webapp/packages/ui", "/home/dev/webapp",
        "add a danger variant to Button and update its snapshot", "success",
        ["packages/ui/src/Button.tsx", "npx vitest run -u"],
        [("add a danger variant to Button and update its snapshot", [
            patch("src/Button.tsx", btn_old, btn_new),
            patch("src/Button.tsx", "  secondary: 'bg-gray-100 text-gray-900',",
                  "  secondary: 'bg-gray-100 text-gray-900',\n  danger: 'bg-red-600 text-white',"),
            sh("npx vitest run", "\n".join([" RUN  v2.1.8 /home/dev/webapp/packages/ui", "",
                                            " ❯ src/Button.test.tsx (5 tests | 1 failed) 44ms",
                                            "   × Button > renders every variant 21ms",
                                            "", " FAIL  src/Button.test.tsx > Button > renders "
                                            "every variant", "Error: Snapshot `Button > renders "
                                            "every variant 1` mismatched", "",
                                            "- Expected", "+ Received", "",
                                            "+   <button class=\"bg-red-600 text-white\">",
                                            "", " Test Files  1 failed | 8 passed (9)",
                                            "      Tests  1 failed | 41 passed (42)"]), 1),
            sh("npx vitest run -u", " Test Files  9 passed (9)\n      Tests  42 passed (42)\n"
               "  Snapshots  1 updated"),
            Say("Added the danger variant in packages/ui/src/Button.tsx and updated the "
                "snapshot with `npx vitest run -u`; 42 tests pass."),
        ])], stale=[btn_old]))

    # 17. bob's shop (Rails), a same-named repository elsewhere.
    rspec_fail = ["Randomized with seed 41234", ""] + ["." * 60] * 3 + [
        "F" + "." * 20, "", "Failures:", "",
        "  1) OrderMailer confirmation renders the subject",
        "     Failure/Error: expect(mail.subject).to eq(\"Your order #1001\")", "",
        "       expected: \"Your order #1001\"", "            got: \"Your Order #1001\"", "",
        "       (compared using ==)",
        "     # ./spec/mailers/order_mailer_spec.rb:9:in `block (3 levels) in <top "
        "(required)>'", "", "Finished in 4.31 seconds (files took 2.8 seconds to load)",
        "202 examples, 1 failure", "", "Failed examples:", "",
        "rspec ./spec/mailers/order_mailer_spec.rb:8 # OrderMailer confirmation renders the "
        "subject"]
    out.append(Session(
        "bob-shop-mailer-subject", "claude", "/home/bob/src/shop", "/home/bob/src/shop",
        "rspec fails on the order mailer spec", "success",
        ["bundle exec rspec", "config/locales/en.yml", "Your order"],
        [("rspec fails on the order mailer spec", [
            bash("bundle exec rspec", "\n".join(rspec_fail), 1),
            grep("Your Order", "config/locales/en.yml:14:      subject: \"Your Order "
                 "#%{number}\""),
            edit("/home/bob/src/shop/config/locales/en.yml", "subject: \"Your Order "
                 "#%{number}\"", "subject: \"Your order #%{number}\"",
                 "    confirmation:\n      subject: \"Your order #%{number}\"", 13),
            bash("bundle exec rspec spec/mailers", "Randomized with seed 5120\n........\n\n"
                 "Finished in 0.61 seconds\n8 examples, 0 failures"),
            Say("The subject comes from config/locales/en.yml; fixed the capitalisation there. "
                "The mailer specs pass."),
        ])], stale=['subject: "Your Order #%{number}"']))

    # 18. ledger (Codex): a question first (why does it fail), then the fix.
    dec_tb = pytest_out("/home/dev/ledger", [("tests/test_accounts.py", 12),
                                             ("tests/test_invoices.py", 9),
                                             ("tests/test_parse.py", 14),
                                             ("tests/test_reports.py", 8)], [
        "___________________________ test_invoice_totals_large "
        "____________________________", "", "    def test_invoice_totals_large():",
        ">       inv = load_invoice(FIXTURES / 'large.csv')", "", "tests/test_invoices.py:41: ",
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _",
        "ledger/io.py:28: in load_invoice", "    lines = [parse_line(r) for r in rows]",
        "ledger/io.py:28: in <listcomp>", "    lines = [parse_line(r) for r in rows]",
        "ledger/parse.py:17: in parse_line", "    amount = Decimal(row['amount'])",
        "E   decimal.InvalidOperation: [<class 'decimal.ConversionSyntax'>]"],
        "==================== 1 failed, 42 passed in 1.84s ====================",
        ["FAILED tests/test_invoices.py::test_invoice_totals_large - "
         "decimal.InvalidOperation: [<class 'decimal.ConversionSyntax'>]"], "3.11.9")
    out.append(Session(
        "ledger-decimal-thousands", "codex", "/home/dev/ledger", "/home/dev/ledger",
        "why does test_invoice_totals_large fail with a Decimal error?", "success",
        ["ledger/parse.py", "thousands separator", "ConversionSyntax"],
        [("why does test_invoice_totals_large fail with a Decimal error?", [
            sh("pytest -q tests/test_invoices.py::test_invoice_totals_large", dec_tb, 1),
            sh("sed -n '10,20p' ledger/parse.py", "def parse_line(row):\n    amount = "
               "Decimal(row['amount'])\n    return Line(row['sku'], amount)"),
            sh("head -3 tests/fixtures/large.csv", "sku,amount\nSRV-ANNUAL,\"1,200.00\"\n"
               "SRV-SETUP,350.00"),
            Say("large.csv has amounts with a thousands separator (\"1,200.00\"), and "
                "`Decimal(row['amount'])` in ledger/parse.py raises ConversionSyntax on the "
                "comma."),
        ]), ("fix it in parse.py by stripping the thousands separator", [
            patch("ledger/parse.py", "    amount = Decimal(row['amount'])",
                  "    amount = Decimal(row['amount'].replace(',', ''))"),
            sh("pytest -q", "...........................................\n43 passed in 1.77s"),
            Say("parse_line strips the thousands separator before Decimal(); 43 tests pass."),
        ])], stale=["amount = Decimal(row['amount'])"]))

    # 19. gateway: golangci-lint, a failing refactor, the user interrupts and reverts.
    lint = [f"internal/{p}:{n}:{c}: {m}" for p, n, c, m in [
        ("proxy/director.go", 31, 2, "SA1019: httputil.ReverseProxy.Director is deprecated: "
         "use Rewrite instead. (staticcheck)"),
        ("proxy/director.go", 47, 9, "SA1019: httputil.ReverseProxy.Director is deprecated: "
         "use Rewrite instead. (staticcheck)"),
        ("proxy/transport.go", 22, 6, "exported: exported type Transport should have comment "
         "or be unexported (revive)"),
        ("config/load.go", 58, 12, "Error return value of `f.Close` is not checked "
         "(errcheck)"),
        ("auth/jwt.go", 91, 3, "ineffectual assignment to err (ineffassign)"),
        ("router/table.go", 12, 1, "File is not `gofumpt`-ed (gofumpt)")]]
    lint_out = "\n".join(sum(([line, "\t" + "src := " + str(i), "\t^"] for i, line in
                              enumerate(lint)), []) + [
        f"internal/metrics/collector.go:{40 + i}:2: G104: Errors unhandled (gosec)"
        for i in range(16)] + ["22 issues:", "* errcheck: 1", "* gofumpt: 1",
                               "* gosec: 16", "* ineffassign: 1", "* revive: 1",
                               "* staticcheck: 2"])
    proxy_fail = "\n".join(go_ok[:5] + [
        "--- FAIL: TestDirectorPreservesHost (0.00s)",
        "    director_test.go:44: Host = \"upstream.internal\", want \"api.acme.io\"",
        "--- FAIL: TestDirectorStripsPrefix (0.00s)",
        "    director_test.go:71: Path = \"/v1/orders\", want \"/orders\"", "FAIL",
        "FAIL\tgithub.com/acme/gateway/internal/proxy\t0.021s"] + go_ok[6:] + ["FAIL"])
    out.append(Session(
        "gateway-golangci-rewrite-reverted", "claude", "/home/dev/gateway", "/home/dev/gateway",
        "bump golangci-lint to v1.62 and fix what it reports", "failure",
        ["golangci-lint run ./...", "SA1019", "Rewrite"],
        [("bump golangci-lint to v1.62 and fix what it reports", [
            bash("go install github.com/golangci/golangci-lint/cmd/golangci-lint@v1.62.2", ""),
            bash("golangci-lint run ./...", lint_out, 1),
            todo("Fix errcheck/ineffassign/gofumpt", "Migrate Director to Rewrite (SA1019)",
                 "Handle gosec G104 in metrics"),
            edit("/home/dev/gateway/internal/proxy/director.go",
                 "\tproxy := &httputil.ReverseProxy{Director: director(target)}",
                 "\tproxy := &httputil.ReverseProxy{Rewrite: rewrite(target)}",
                 "\tproxy := &httputil.ReverseProxy{Rewrite: rewrite(target)}", 31),
            bash("go test ./internal/proxy/...", proxy_fail, 1),
            Interrupt(),
        ]), ("stop. revert the proxy changes, the Director to Rewrite migration needs its own "
             "PR", [
            bash("git checkout -- internal/proxy && git status --short", ""),
            Say("Reverted internal/proxy. The SA1019 (Director -> Rewrite) migration is left "
                "for its own PR; golangci-lint still reports 22 issues."),
        ])]))

    # 20. platform, from the chart folder: helm lint; an indentation fix.
    helm_out = ["==> Linting .", "[INFO] Chart.yaml: icon is recommended"] + [
        f"[WARNING] templates/{t}: object name does not conform to Kubernetes naming "
        "requirements" for t in ["_helpers.tpl"]] + [
        f"[INFO] values.yaml: key '{k}' is deprecated" for k in ["image.pullPolicy"]] + [
        "[ERROR] templates/deployment.yaml: unable to parse YAML: error converting YAML to "
        "JSON: yaml: line 34: did not find expected key", "",
        "Error: 1 chart(s) linted, 1 chart(s) failed"]
    helm_debug = "\n".join(
        [f"{i + 1:>3}  " + line for i, line in enumerate(
            ["apiVersion: apps/v1", "kind: Deployment", "metadata:", "  name: api",
             "  labels:", "    app.kubernetes.io/name: api", "spec:", "  replicas: 3",
             "  selector:", "    matchLabels:", "      app.kubernetes.io/name: api",
             "  template:", "    metadata:", "      labels:", "        app.kubernetes.io/name: "
             "api", "    spec:", "      serviceAccountName: api", "      containers:",
             "        - name: api", "          image: registry.acme.io/api:v2.14.0",
             "          ports:", "            - containerPort: 8080", "          env:",
             "            - name: LOG_LEVEL", "              value: info",
             "          readinessProbe:", "            httpGet:", "              path: /healthz",
             "              port: 8080", "          livenessProbe:", "            httpGet:",
             "              path: /healthz", "          resources:", "          limits:",
             "            cpu: 500m", "            memory: 512Mi", "          requests:",
             "            cpu: 100m", "            memory: 128Mi"])])
    out.append(Session(
        "platform-helm-lint-indent", "claude", "/home/dev/platform/charts/api",
        "/home/dev/platform", "helm lint fails on the api chart", "success",
        ["helm lint", "nindent 12", "templates/deployment.yaml"],
        [("helm lint fails on the api chart", [
            bash("helm lint .", "\n".join(helm_out), 1),
            bash("helm template . --debug 2>&1 | tail -50", helm_debug + "\nError: YAML parse "
                 "error on api/templates/deployment.yaml: error converting YAML to JSON: yaml: "
                 "line 34: did not find expected key", 1),
            read("/home/dev/platform/charts/api/templates/deployment.yaml",
                 "          resources:\n            {{- toYaml .Values.resources | nindent 10 "
                 "}}", 33),
            edit("/home/dev/platform/charts/api/templates/deployment.yaml",
                 "{{- toYaml .Values.resources | nindent 10 }}",
                 "{{- toYaml .Values.resources | nindent 12 }}",
                 "          resources:\n            {{- toYaml .Values.resources | nindent 12 "
                 "}}", 33),
            bash("helm lint .", "==> Linting .\n[INFO] Chart.yaml: icon is recommended\n\n1 "
                 "chart(s) linted, 0 chart(s) failed"),
            Say("resources were rendered with `nindent 10`, one level too shallow, in "
                "templates/deployment.yaml; `nindent 12` fixes it and helm lint passes."),
        ])], stale=["{{- toYaml .Values.resources | nindent 10 }}"]))

    # 21. infra-live: a new S3 module; fmt check exits 3 first; a verifying grep finds nothing.
    out.append(Session(
        "infra-exports-bucket-module", "claude", "/home/dev/infra-live", "/home/dev/infra-live",
        "add an S3 bucket for the exports with versioning", "success",
        ["aws_s3_bucket_versioning", "terraform validate", "terraform fmt"],
        [("add an S3 bucket for the exports with versioning", [
            write("/home/dev/infra-live/modules/exports/main.tf",
                  "resource \"aws_s3_bucket\" \"exports\" {\n  bucket = var.name\n}\n\n"
                  "resource \"aws_s3_bucket_versioning\" \"exports\" {\n  bucket = "
                  "aws_s3_bucket.exports.id\n  versioning_configuration {\n    status = "
                  "\"Enabled\"\n  }\n}\n"),
            bash("terraform fmt -check -recursive", "modules/exports/main.tf", 3),
            bash("terraform fmt -recursive", "modules/exports/main.tf"),
            bash("cd envs/staging && terraform init -upgrade >/dev/null && terraform validate",
                 "Success! The configuration is valid."),
            bash("grep -rn 'acl *= *\"public-read\"' modules/", "", 1,
                 "Making sure nothing is public."),
            Say("Added modules/exports with aws_s3_bucket and aws_s3_bucket_versioning "
                "(Enabled); `terraform fmt` and `terraform validate` pass, and no public-read "
                "ACL anywhere."),
        ])]))

    # 22. shop2 (Codex): celery needs redis; `env` prints a Django key, a GitHub token, a DSN.
    celery_err = ["", " -------------- celery@dev-laptop v5.4.0 (opalescent)",
                  "--- ***** ----- ", "-- ******* ---- Linux-6.8.0-49-generic-x86_64 2026-12-03",
                  "- *** --- * --- ", "- ** ---------- [config]",
                  "- ** ---------- .> app:         shop2:0x7f2b1c3d4e50",
                  "- ** ---------- .> transport:   redis://localhost:6379/0",
                  "- ** ---------- .> results:     redis://localhost:6379/1",
                  "- *** --- * --- .> concurrency: 8 (prefork)",
                  "-- ******* ---- .> task events: OFF", "--- ***** ----- ",
                  " -------------- [queues]", "                .> celery           "
                  "exchange=celery(direct) key=celery", "", "[tasks]"] + [
        f"  . shop2.{t}" for t in ["orders.tasks.send_confirmation", "orders.tasks.expire_carts",
                                   "catalog.tasks.reindex", "catalog.tasks.sync_prices",
                                   "payments.tasks.capture", "payments.tasks.refund",
                                   "reports.tasks.daily_sales"]] + [""] + [
        f"[2026-12-03 10:0{i}:1{i},33{i}: ERROR/MainProcess] consumer: Cannot connect to "
        f"redis://localhost:6379/0: Error 111 connecting to localhost:6379. Connection "
        f"refused..\nTrying again in {2 * (i + 1)}.00 seconds... ({i + 1}/100)"
        for i in range(8)] + [
        "kombu.exceptions.OperationalError: Error 111 connecting to localhost:6379. "
        "Connection refused."]
    env_out = "\n".join([
        "SHELL=/bin/bash", "USER=dev", "HOME=/home/dev", "PWD=/home/dev/shop2", "LANG=en_US.UTF-8",
        "DJANGO_SETTINGS_MODULE=shop2.settings.local", f"DJANGO_SECRET_KEY={S['django_key']}",
        "CELERY_BROKER_URL=redis://localhost:6379/0", f"GITHUB_TOKEN={S['ghp']}",
        f"SENTRY_DSN=https://{S['sentry_dsn_key']}@o450123.ingest.sentry.io/5512345",
        "VIRTUAL_ENV=/home/dev/shop2/.venv", "PATH=/home/dev/shop2/.venv/bin:/usr/local/bin:"
        "/usr/bin:/bin"])
    out.append(Session(
        "shop2-celery-redis", "codex", "/home/dev/shop2", "/home/dev/shop2",
        "celery tasks don't run locally", "success",
        ["docker compose up -d redis", "celery -A shop2 worker", "6379"],
        [("celery tasks don't run locally", [
            sh("env", env_out),
            sh("timeout 20 celery -A shop2 worker -l info", "\n".join(celery_err), 124),
            Say("The worker cannot reach the broker: redis://localhost:6379 refuses "
                "connections, so no redis is running."),
            sh("docker compose up -d redis", " Container shop2-redis-1  Creating\n Container "
               "shop2-redis-1  Created\n Container shop2-redis-1  Starting\n Container "
               "shop2-redis-1  Started"),
            sh("timeout 20 celery -A shop2 worker -l info 2>&1 | tail -3",
               "[2026-12-03 10:12:01,112: INFO/MainProcess] Connected to "
               "redis://localhost:6379/0\n[2026-12-03 10:12:01,140: INFO/MainProcess] mingle: "
               "all alone\n[2026-12-03 10:12:01,201: INFO/MainProcess] celery@dev-laptop ready."),
            Say("Redis wasn't running. After `docker compose up -d redis`, `celery -A shop2 "
                "worker` connects and is ready."),
        ])], secrets=[S["django_key"], S["ghp"], S["sentry_dsn_key"]]))

    # 23. shop-admin (Claude): a login loop explained; the fix changes a test's expectation.
    session_old = "  sameSite: 'strict',"
    session_new = "  sameSite: 'lax',"
    out.append(Session(
        "shop-admin-login-loop-samesite", "claude", "/home/dev/shop-admin",
        "/home/dev/shop-admin", "why is the admin login redirecting forever", "success",
        ["SameSite", "src/auth/session.ts", "lax"],
        [("why is the admin login redirecting forever", [
            grep("sameSite", "src/auth/session.ts:9:  sameSite: 'strict',"),
            read("/home/dev/shop-admin/src/auth/session.ts",
                 "export const sessionCookie = {\n  name: 'admin_session',\n  httpOnly: true,\n"
                 "  secure: true,\n" + session_old + "\n  domain: '.shop.example',\n};", 5),
            Say("The SSO callback comes from auth.shop.example, a cross-site navigation, so the "
                "browser drops the `SameSite=strict` session cookie and the app redirects to "
                "login again. `lax` keeps it on top-level navigations."),
        ]), ("ok change it to lax", [
            edit("/home/dev/shop-admin/src/auth/session.ts", session_old, session_new,
                 session_new, 9),
            bash("npm test -- --run", "\n".join([
                " ❯ src/auth/session.test.ts (3 tests | 1 failed) 12ms",
                "   × sessionCookie > is strict 4ms", "",
                "AssertionError: expected 'lax' to be 'strict' // Object.is equality", "",
                " ❯ src/auth/session.test.ts:8:38", "", " Test Files  1 failed | 17 passed "
                "(18)", "      Tests  1 failed | 95 passed (96)"]), 1),
            edit("/home/dev/shop-admin/src/auth/session.test.ts",
                 "it('is strict', () => expect(sessionCookie.sameSite).toBe('strict'));",
                 "it('is lax for the SSO redirect', () => "
                 "expect(sessionCookie.sameSite).toBe('lax'));",
                 "it('is lax for the SSO redirect', () => "
                 "expect(sessionCookie.sameSite).toBe('lax'));", 8),
            bash("npm test -- --run", " Test Files  18 passed (18)\n      Tests  96 passed (96)"),
            Say("sessionCookie is SameSite=lax now (src/auth/session.ts) and its test says why; "
                "96 tests pass."),
        ])], stale=["sameSite: 'strict'"]))

    # 24. shop: deploy to staging fails, a missing secret; the user stops to add it in vault.
    helm_wait = ["Release \"shop\" does not exist. Installing it now."] + [
        f"client.go:{480 + i}: [debug] {m}" for i, m in enumerate([
            "creating 14 resource(s)", "beginning wait for 14 resources with timeout of 5m0s",
            "Deployment is not ready: staging/shop. 0 out of 2 expected pods are ready"] * 12)]
    helm_wait += ["Error: INSTALLATION FAILED: context deadline exceeded",
                  "make: *** [Makefile:41: deploy-staging] Error 1"]
    logs = ["Traceback (most recent call last):",
            '  File "/app/shop/wsgi.py", line 5, in <module>',
            "    app = create_app()", '  File "/app/shop/__init__.py", line 22, in create_app',
            "    app.config.from_mapping(load_settings())",
            '  File "/app/shop/settings.py", line 48, in load_settings',
            "    webhook_secret=os.environ[\"STRIPE_WEBHOOK_SECRET\"],",
            '  File "<frozen os>", line 714, in __getitem__', "KeyError: 'STRIPE_WEBHOOK_SECRET'",
            "[2026-12-03 16:02:11 +0000] [1] [ERROR] Worker (pid:7) exited with code 3"]
    out.append(Session(
        "shop-deploy-staging-missing-secret", "claude", "/home/dev/shop", "/home/dev/shop",
        "deploy the shop to staging", "failure",
        ["make deploy-staging", "STRIPE_WEBHOOK_SECRET", "vault"],
        [("deploy the shop to staging", [
            bash("make deploy-staging", "\n".join(helm_wait), 2),
            bash("kubectl -n staging logs deploy/shop --tail=30", "\n".join(logs)),
            Say("The pods crash at start: KeyError 'STRIPE_WEBHOOK_SECRET' - staging has no "
                "STRIPE_WEBHOOK_SECRET. It comes from vault (secret/shop/staging)."),
        ]), ("I'll add it in vault myself, stop here", [
            Say("OK, stopping. Once STRIPE_WEBHOOK_SECRET is in vault at secret/shop/staging, "
                "`make deploy-staging` should go through."),
        ])]))

    # 25. webapp: playwright browsers missing; reason at the end of the run.
    pw = ["Running 64 tests using 4 workers", ""] + [
        f"  ✘  {i} [chromium] › e2e/{f}.spec.ts:{10 + i}:5 › {f} › loads (12ms)"
        for i, f in enumerate(["cart", "checkout", "login", "orders", "search", "profile",
                               "admin", "coupons", "wishlist", "returns"] * 4)] + [
        "", "  1) [chromium] › e2e/cart.spec.ts:10:5 › cart › loads "
        "──────────────────────", "",
        "    Error: browserType.launch: Executable doesn't exist at /home/dev/.cache/"
        "ms-playwright/chromium_headless_shell-1148/chrome-linux/headless_shell",
        "    ╔═════════════════════════════════════════════════════════════════════════╗",
        "    ║ Looks like Playwright Test or Playwright was just installed or updated. ║",
        "    ║ Please run the following command to download new browsers:              ║",
        "    ║                                                                         ║",
        "    ║     npx playwright install                                              ║",
        "    ╚═════════════════════════════════════════════════════════════════════════╝",
        "", "  40 failed", "  24 did not run"]
    out.append(Session(
        "webapp-playwright-browsers", "claude", "/home/dev/webapp", "/home/dev/webapp",
        "run the e2e tests", "success",
        ["npx playwright install chromium", "npx playwright test"],
        [("run the e2e tests", [
            bash("npx playwright test", "\n".join(pw), 1),
            bash("npx playwright install chromium", "Downloading Chromium 131.0.6778.33 "
                 "(playwright build v1148)...\n|■■■■■■■■■■■■■■■■■■■■| 100% of 167.3 MiB\n"
                 "Chromium 131.0.6778.33 downloaded to /home/dev/.cache/ms-playwright/"
                 "chromium-1148"),
            bash("npx playwright test", "Running 64 tests using 4 workers\n\n  64 passed "
                 "(41.2s)"),
            Say("Playwright's browsers were missing after the upgrade; `npx playwright install "
                "chromium` fixed it and all 64 e2e tests pass."),
        ])]))

    # 26. gateway: integration tests; cat .env prints a JWT and a GitHub token.
    gw_env = (f"AUTH_URL=http://localhost:9000\nAUTH_TOKEN={S['auth_jwt']}\n"
              f"GITHUB_TOKEN={S['ghp']}\nUPSTREAM=http://localhost:8081")
    out.append(Session(
        "gateway-integration-auth-down", "claude", "/home/dev/gateway", "/home/dev/gateway",
        "the integration tests can't reach the auth service", "success",
        ["go test -tags integration", "docker compose up -d auth"],
        [("the integration tests can't reach the auth service", [
            bash("go test -tags integration ./test/...", "\n".join(
                [f"=== RUN   TestAuth{n}" for n in ["Login", "Refresh", "Revoke", "Scopes"]]
                + [f"    auth_test.go:{20 + i}: POST http://localhost:9000/token: dial tcp "
                   "127.0.0.1:9000: connect: connection refused" for i in range(4)]
                + ["--- FAIL: TestAuthLogin (0.00s)", "FAIL",
                   "FAIL\tgithub.com/acme/gateway/test\t0.044s", "FAIL"]), 1),
            bash("cat .env", gw_env),
            bash("head -40 test/testdata/auth-signing.pem", "-----BEGIN RSA PRIVATE KEY-----\n"
                 + "\n".join(PEM_LINES) + "\n-----END RSA PRIVATE KEY-----",
                 text="Checking the stub's signing key is there."),
            bash("docker compose ps", "NAME              IMAGE                      STATUS\n"
                 "gateway-auth-1    acme/auth-stub:0.9.1       Exited (137) 2 hours ago\n"
                 "gateway-redis-1   redis:7.4                  Up 2 hours"),
            bash("docker compose up -d auth", " Container gateway-auth-1  Starting\n "
                 "Container gateway-auth-1  Started"),
            bash("go test -tags integration ./test/...",
                 "ok  \tgithub.com/acme/gateway/test\t0.812s"),
            Say("The auth stub container had exited; `docker compose up -d auth` brought it "
                "back and `go test -tags integration ./test/...` passes."),
        ])], secrets=[S["auth_jwt"], S["ghp"], S["pem_line"]]))
    return out


# ---- probes ---------------------------------------------------------------------------------
def probes() -> list[dict[str, Any]]:
    def p(cwd: str, prompt: str, must: list[str], must_not: list[str] | None = None
          ) -> dict[str, Any]:
        return {"cwd": cwd, "prompt": prompt, "inject": bool(must), "must_contain": must,
                "must_not_contain": must_not or []}

    shop_facts = ["shop/cart.py", "STRIPE_WEBHOOK_SECRET", "uv run pytest"]
    out = [
        p("/home/dev/shop", "the checkout total is wrong for discounted carts again",
          ["shop/cart.py", "discount"]),
        p("/home/dev/shop", "the webhook tests fail with a signature error",
          ["STRIPE_WEBHOOK_SECRET", "stripe listen --print-secret"]),
        p("/home/dev/shop/shop", "add a test for gift card balances", ["uv run pytest"]),
        p("/home/dev/shop", "deploy the shop to staging",
          ["make deploy-staging", "STRIPE_WEBHOOK_SECRET"]),
        p("/home/dev/shop/tests", "the coupon expiry test needs freezegun, set it up",
          ["uv sync --extra test"]),
        p("/home/dev/shop2", "migrations fail on a new database again",
          ["python manage.py migrate"], shop_facts),
        p("/home/dev/shop2", "start the celery worker", ["docker compose up -d redis"],
          shop_facts),
        p("/home/dev/shop-admin", "the build broke after upgrading dependencies",
          ["npm run build"], shop_facts),
        p("/home/dev/shop-admin/src/auth", "users get sent back to the login page in a loop",
          ["SameSite"], shop_facts),
        p("/home/bob/src/shop", "the mailer spec fails again",
          ["bundle exec rspec", "config/locales/en.yml"], shop_facts),
        p("/home/dev/ledger", "add an index on invoices.customer_id with a migration",
          ["alembic upgrade head", "alembic merge heads"]),
        p("/home/dev/ledger", "reset the local database", ["alembic downgrade base", "audit"]),
        p("/home/dev/ledger/ledger", "parsing amounts fails for large invoices",
          ["parse.py", "thousands separator"]),
        p("/home/dev/platform/deploy/k8s", "deploy worker v1.9.2 to prod",
          ["acme.io/change-ticket", "require-change-ticket"]),
        p("/home/dev/platform", "roll out the api to production", ["acme.io/change-ticket"]),
        p("/home/dev/platform/charts/api", "helm lint complains about the chart again",
          ["helm lint", "nindent 12"]),
        p("/home/dev/platform", "check the pods on the staging cluster", ["acme-staging"]),
        p("/home/dev/webapp", "date tests fail again around midnight",
          ["src/utils/date.ts", "formatInTimeZone"]),
        p("/home/dev/webapp", "lint fails in CI", ["npx eslint . --fix", "--max-warnings=0"]),
        p("/home/dev/webapp/packages/ui", "add an outline variant to Button",
          ["npx vitest run -u"]),
        p("/home/dev/webapp", "run the playwright e2e suite", ["npx playwright install"]),
        p("/home/dev/gateway", "there is a data race in the ratelimit tests again",
          ["go test -race", "b.mu"]),
        p("/home/dev/gateway/internal/proxy", "fix the golangci-lint warnings in the proxy",
          ["SA1019", "Rewrite"]),
        p("/home/dev/gateway", "integration tests fail to connect to auth",
          ["docker compose up -d auth"]),
        p("/home/dev/infra-live/envs/staging", "terraform plan says no valid credentials",
          ["aws sso login --profile acme-staging"]),
        p("/home/dev/infra-live/envs/prod", "apply the change in prod", ["state lock"]),
        p("/home/dev/infra-live", "add a bucket for the invoices archive",
          ["aws_s3_bucket_versioning", "terraform validate"]),
        # should not inject: unseen folders, similar names, a parent folder of many projects
        p("/home/dev/newsvc", "set up a Go module with a health endpoint", [],
          ["handlers.Health", "internal/http/routes.go"]),
        p("/home/dev", "which of my projects use postgres?", []),
        p("/home/dev/shop3", "run the tests", [], shop_facts),
        p("/tmp/scratch", "write a python script that renames photos by their date", []),
        p("/home/dev/shop-api", "the checkout test fails with a wrong total, fix it", [],
          shop_facts),
        p("/home/bob/src/shop2", "deploy to staging", [], shop_facts),
        p("/home/dev/platform-docs", "deploy the docs site to production", [],
          ["acme.io/change-ticket", "require-change-ticket"]),
        p("/home/dev/gateway-v2", "go test -race fails", [], ["b.mu", "bucket.go"]),
    ]
    for i, probe in enumerate(out, 1):
        probe["id"] = f"p{i:02d}"
        probe["split"] = "dev"  # the rules were written on this suite: it is never test data
    return out


# ---- rendering ------------------------------------------------------------------------------
class Clock:
    def __init__(self, start: datetime):
        self.now = start

    def tick(self, seconds: float = 3.0) -> str:
        self.now += timedelta(seconds=seconds)
        return self.now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.now.microsecond // 1000:03d}Z"


def render_claude(s: Session, sid: str, clock: Clock) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    counter = [0]
    parent: list[str | None] = [None]

    def ident(prefix: str) -> str:
        counter[0] += 1
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{sid}/{prefix}/{counter[0]}"))

    def record(kind: str, message: dict[str, Any], **extra: Any) -> None:
        uid = ident("u")
        lines.append({"parentUuid": parent[0], "isSidechain": False, "userType": "external",
                      "cwd": s.cwd, "sessionId": sid, "version": "2.0.31",
                      "gitBranch": s.branch, "type": kind, "message": message, "uuid": uid,
                      "timestamp": clock.tick(), **extra})
        parent[0] = uid

    def assistant(blocks: list[dict[str, Any]], stop: str) -> None:
        mid = "msg_01" + ident("m").replace("-", "")[:22]
        for block in blocks:  # Claude Code writes one line per content block
            record("assistant", {"id": mid, "type": "message", "role": "assistant",
                                 "model": "claude-sonnet-4-5-20250929", "content": [block],
                                 "stop_reason": stop if block is blocks[-1] else None,
                                 "stop_sequence": None,
                                 "usage": {"input_tokens": 4, "output_tokens": 180,
                                           "cache_read_input_tokens": 21000}},
                   requestId="req_011C" + ident("r").replace("-", "")[:18])

    for text, items in s.turns:
        record("user", {"role": "user", "content": text})
        for item in items:
            if isinstance(item, Say):
                assistant([{"type": "text", "text": item.text}], "end_turn")
            elif isinstance(item, Interrupt):
                note = "[Request interrupted by user" + (" for tool use]" if item.for_tool_use
                                                         else "]")
                record("user", {"role": "user", "content": [{"type": "text", "text": note}]})
            else:
                call_id = "toolu_01" + ident("t").replace("-", "")[:22]
                blocks = ([{"type": "text", "text": item.text}] if item.text else []) + [
                    {"type": "tool_use", "id": call_id, "name": item.tool, "input": item.args}]
                assistant(blocks, "tool_use")
                summary: Any
                if item.rejected:
                    content = ("The user doesn't want to proceed with this tool use. The tool "
                               "use was rejected (eg. if it was a file edit, the new_string was "
                               "NOT written to the file). STOP what you are doing and wait for "
                               "the user to tell you how to proceed.")
                    error, summary = True, "Error: " + content
                elif item.code:
                    content = f"Exit code {item.code}\n{item.out}".rstrip()
                    error, summary = True, "Error: " + content
                else:
                    content, error = item.out, False
                    summary = ({"stdout": item.out, "stderr": "", "interrupted": False,
                                "isImage": False} if item.tool == "Bash" else
                               {"type": "text", "file": {"filePath": item.args.get(
                                   "file_path", "")}})
                record("user", {"role": "user", "content": [
                    {"tool_use_id": call_id, "type": "tool_result", "content": content,
                     "is_error": error}]}, toolUseResult=summary)
    return lines


def render_codex(s: Session, sid: str, clock: Clock) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    counter = [0]

    def item(kind: str, payload: dict[str, Any]) -> None:
        lines.append({"timestamp": clock.tick(), "type": kind, "payload": payload})

    def call_id() -> str:
        counter[0] += 1
        return "call_" + uuid.uuid5(uuid.NAMESPACE_URL, f"{sid}/{counter[0]}").hex[:24]

    item("session_meta", {"id": sid, "timestamp": clock.tick(0), "cwd": s.cwd,
                          "originator": "codex_cli_rs", "cli_version": "0.63.0",
                          "instructions": None, "source": "cli", "model_provider": "openai",
                          "git": {"commit_hash": uuid.uuid5(uuid.NAMESPACE_URL, sid).hex[:40],
                                  "branch": s.branch,
                                  "repository_url": f"git@github.com:acme/"
                                                    f"{Path(s.repo).name}.git"}})
    item("response_item", {"type": "message", "role": "user", "content": [{
        "type": "input_text", "text": f"<environment_context>\n  <cwd>{s.cwd}</cwd>\n  "
        "<approval_policy>on-request</approval_policy>\n  <sandbox_mode>workspace-write"
        "</sandbox_mode>\n  <network_access>restricted</network_access>\n  <shell>bash</shell>"
        "\n</environment_context>"}]})
    for text, items in s.turns:
        item("response_item", {"type": "message", "role": "user",
                               "content": [{"type": "input_text", "text": text}]})
        item("event_msg", {"type": "user_message", "message": text, "images": []})
        item("turn_context", {"cwd": s.cwd, "approval_policy": "on-request",
                              "sandbox_policy": {"type": "workspace-write"},
                              "model": "gpt-5.1-codex", "effort": "medium", "summary": "auto"})
        for it in items:
            if isinstance(it, Say):
                item("response_item", {"type": "message", "role": "assistant", "content": [
                    {"type": "output_text", "text": it.text}]})
                item("event_msg", {"type": "agent_message", "message": it.text})
            elif isinstance(it, Interrupt):
                item("event_msg", {"type": "turn_aborted", "reason": "interrupted"})
            else:
                cid = call_id()
                if it.text:
                    item("response_item", {"type": "reasoning", "summary": [
                        {"type": "summary_text", "text": f"**{it.text}**"}], "content": None,
                        "encrypted_content": "gAAAAABp" + rand(40)})
                if it.tool == "apply_patch":
                    item("response_item", {"type": "custom_tool_call", "status": "completed",
                                           "call_id": cid, "name": "apply_patch",
                                           "input": it.args["input"]})
                    item("response_item", {"type": "custom_tool_call_output", "call_id": cid,
                                           "output": json.dumps({"output": it.out, "metadata": {
                                               "exit_code": 0, "duration_seconds": 0.0}})})
                    continue
                item("response_item", {"type": "function_call", "name": "shell",
                                       "arguments": json.dumps({**it.args, "workdir": s.cwd,
                                                                "timeout_ms": 120000}),
                                       "call_id": cid})
                output = ("exec command rejected by user" if it.rejected else json.dumps(
                    {"output": it.out, "metadata": {"exit_code": it.code,
                                                    "duration_seconds": 0.4}}))
                item("response_item", {"type": "function_call_output", "call_id": cid,
                                       "output": output})
        item("event_msg", {"type": "token_count", "info": None, "rate_limits": None})
    return lines


def main(folder: Path = HERE) -> None:
    """Write the transcripts and labels.json under ``folder``."""
    start = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    labels: dict[str, Any] = {"version": 1, "sessions": [], "probes": probes()}
    for sub in ("claude", "codex"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        for old in (folder / sub).glob("*.jsonl"):
            old.unlink()
    for i, s in enumerate(sessions(), 1):
        clock = Clock(start + timedelta(days=i // 2, hours=2 * (i % 2)))
        sid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"deltamem-suite/{s.slug}"))
        lines = (render_claude if s.fmt == "claude" else render_codex)(s, sid, clock)
        name = f"{s.fmt}/{i:02d}-{s.slug}.jsonl"
        (folder / name).write_text("".join(json.dumps(line, ensure_ascii=False) + "\n"
                                           for line in lines), encoding="utf-8")
        labels["sessions"].append({
            "id": f"s{i:02d}", "file": name, "format": s.fmt, "repo": s.repo, "cwd": s.cwd,
            "task": s.task, "outcome": s.outcome, "lessons": s.lessons,
            "secrets": s.secrets, "stale": s.stale, "split": "dev"})
    (folder / "labels.json").write_text(
        json.dumps(labels, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(labels['sessions'])} sessions, {len(labels['probes'])} probes -> {folder}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
