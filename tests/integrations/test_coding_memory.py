"""Memory a coding agent's user keeps on: every bad case quoted at the top of issue 31, as a
test on transcripts in Claude Code's and Codex's on-disk formats (``tests/coding_transcripts``).

The hooks run in-process through ``run_hook`` (the function ``deltamem hook`` calls) on a real
SQLite memory with the real bundled MiniLM embedder; projects are real folders with ``.git``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coding_transcripts import ClaudeSession, CodexRollout
from deltamem.core.model import Knowledge, Skill
from deltamem.engine.memory import DeltaMem
from deltamem.errors import ConfigError
from deltamem.extract.coding_session import CodingExtractor
from deltamem.extract.llm import LLMExtractor
from deltamem.integrations.claude_code import hook_extractor, run_hook
from deltamem.integrations.coding_memory import (
    HEAD_TOKENS,
    UNFINISHED,
    CodingMemory,
    count_tokens,
    coverage,
    head_quote,
    rarity,
)
from deltamem.testing import ScriptedLLM

CHECKOUT = "the checkout test fails with a wrong total, can you find out why?"
BUGGY = "return round_money(subtotal(items) - discount)"
CART = f'''from shop.money import round_money


def subtotal(items):
    return sum(i.price * i.qty for i in items)


def total(items, discount):
    discount = apply_discount(subtotal(items), discount)
    {BUGGY}
'''
POLICY = ("[require-change-ticket] deployments in namespace prod must carry the annotation "
          "change-ticket with an approved ticket id")


def pytest_failure(root: str) -> str:
    lines = ["============================= test session starts =============================",
             "platform linux -- Python 3.12.3, pytest-8.3.3, pluggy-1.5.0",
             f"rootdir: {root}", "configfile: pyproject.toml", "plugins: cov-5.0.0",
             "collected 14 items", "",
             "tests/test_cart.py .......                                              [ 50%]",
             "tests/test_checkout.py ..F....                                          [100%]",
             "", "================================== FAILURES ==================================",
             "__________________________ test_total_with_discount __________________________",
             "", "    def test_total_with_discount():",
             '        items = [Item("mug", 50.0, 1), Item("plate", 50.0, 1)]',
             ">       assert total(items, discount=10.0) == 90.0",
             "E       assert 80.0 == 90.0",
             "E        +  where 80.0 = total([Item(...), Item(...)], discount=10.0)", "",
             "tests/test_checkout.py:21: AssertionError"]
    lines += [f"  warning: DeprecationWarning: datetime.utcnow() is deprecated (case {i})"
              for i in range(22)]
    lines += ["=========================== short test summary info ==========================",
              "FAILED tests/test_checkout.py::test_total_with_discount - assert 80.0 == 90.0",
              "======================== 1 failed, 13 passed in 0.41s ========================"]
    return "\n".join(lines)


def kubectl_denied() -> str:
    lines = [f"configmap/shop-config-{i} unchanged" for i in range(30)]
    lines += ["namespace/prod unchanged", "service/shop unchanged", "ingress/shop unchanged",
              "horizontalpodautoscaler.autoscaling/shop unchanged",
              "poddisruptionbudget.policy/shop unchanged", "serviceaccount/shop unchanged",
              "role.rbac.authorization.k8s.io/shop unchanged",
              "rolebinding.rbac.authorization.k8s.io/shop unchanged",
              "networkpolicy.networking.k8s.io/shop unchanged",
              "secret/shop-tls unchanged", "cronjob.batch/shop-cleanup unchanged",
              'Error from server (Forbidden): error when creating "k8s/prod/deployment.yaml": '
              'admission webhook "validation.gatekeeper.sh" denied the request: ' + POLICY]
    return "\n".join(lines)


def repo(base: Path, *parts: str) -> Path:
    path = base.joinpath(*parts)
    (path / ".git").mkdir(parents=True)
    return path


def checkout_fix(root: Path) -> ClaudeSession:
    """The failing pytest diagnosed, then "yes please fix it" with a final grep finding nothing."""
    cart = f"{root}/shop/cart.py"
    return (ClaudeSession(str(root)).user(CHECKOUT)
            .todo("Run the checkout tests", "Find the wrong total")
            .bash("pytest -q tests/test_checkout.py", pytest_failure(str(root)), code=1,
                  thought="Let me run the failing test first.")
            .grep("def total", [cart, f"{root}/tests/test_checkout.py"])
            .read(cart, CART)
            .say("`total()` subtracts the discount after `apply_discount` already applied it, "
                 "so it is applied twice (80.0 instead of 90.0). Want me to fix it?")
            .user("yes please fix it, then run the whole suite")
            .edit(cart, BUGGY, "return round_money(discount)")
            .bash("pytest -q", "..............                                      [100%]\n"
                               "14 passed in 0.52s")
            .bash('grep -rn "subtotal(items) - discount" shop/', "", code=1,
                  thought="Check the double discount is gone everywhere.")
            .say("Fixed: `total()` applied the discount twice. All 14 tests pass."))


def deploy_denied(root: Path) -> ClaudeSession:
    return (ClaudeSession(str(root)).user("deploy the shop to production")
            .bash("docker build -t registry.example.com/shop:1.4.2 .",
                  "Successfully built 3f2a9c1d\nSuccessfully tagged "
                  "registry.example.com/shop:1.4.2")
            .bash("kubectl apply -f k8s/prod", kubectl_denied(), code=1)
            .say("The deploy was denied by the cluster's Gatekeeper policy: deployments in prod "
                 "need a change-ticket annotation. I did not change the manifests."))


def migration(root: Path) -> ClaudeSession:
    models = f"{root}/shop/models.py"
    return (ClaudeSession(str(root)).user("add a created_at column to orders")
            .read(models, "class Order(Base):\n    id = Column(Integer, primary_key=True)\n")
            .edit(models, "    id = Column(Integer, primary_key=True)",
                  "    id = Column(Integer, primary_key=True)\n"
                  "    created_at = Column(DateTime, nullable=False)")
            .bash('alembic revision --autogenerate -m "add created_at to orders"',
                  "INFO  [alembic.autogenerate.compare] Detected added column "
                  "'orders.created_at'\n  Generating migrations/versions/3f2a_add_created_at.py"
                  " ...  done")
            .bash("alembic upgrade head", "INFO  [alembic.runtime.migration] Running upgrade "
                                          "1a2b -> 3f2a, add created_at to orders")
            .bash("pytest -q", "14 passed in 0.50s")
            .say("Added `Order.created_at` with migration 3f2a; tests pass."))


def upgrade_db(root: Path) -> ClaudeSession:
    """A task that names nothing of its project: portable across projects."""
    return (ClaudeSession(str(root)).user("bring the local database up to the latest migration")
            .bash("alembic current", "1a2b (head)")
            .bash("alembic upgrade head", "INFO  [alembic.runtime.migration] Running upgrade "
                                          "1a2b -> 3f2a")
            .bash("alembic current", "3f2a (head)")
            .say("The database is at head (3f2a)."))


@pytest.fixture(scope="module")
def embedder() -> Any:
    from deltamem.embed import make_embedder

    return make_embedder("minilm")


@pytest.fixture
def mem(tmp_path: Path, embedder: Any) -> Any:
    with DeltaMem.open(tmp_path / "memory.db", embedder=embedder) as opened:
        yield opened


def stop(mem: DeltaMem, session: ClaudeSession | CodexRollout, path: Path,
         cwd: str = "") -> None:
    run_hook(mem, "stop", {"session_id": "s-1", "hook_event_name": "Stop",
                           "cwd": cwd or session.cwd,
                           "transcript_path": str(session.write(path))})


def start_note(mem: DeltaMem, cwd: str | Path, **kwargs: Any) -> str:
    out = run_hook(mem, "session-start", {"hook_event_name": "SessionStart", "cwd": str(cwd),
                                          "source": "startup"}, **kwargs)
    return str(out["hookSpecificOutput"]["additionalContext"]) if out else ""


def prompt_note(mem: DeltaMem, cwd: str | Path, prompt: str, **kwargs: Any) -> str:
    out = run_hook(mem, "user-prompt", {"hook_event_name": "UserPromptSubmit", "cwd": str(cwd),
                                        "prompt": prompt}, **kwargs)
    return str(out["hookSpecificOutput"]["additionalContext"]) if out else ""


def episodes(mem: DeltaMem) -> dict[str, Any]:
    return {e.task: e for e in mem.store.episodes(mem.space)}


# -- the bad cases of issue 31 -----------------------------------------------------------------


def test_session_start_is_a_short_note_without_noise_or_the_pre_fix_line(
        mem: DeltaMem, tmp_path: Path) -> None:
    root = repo(tmp_path, "home", "bob", "src", "shop")
    stop(mem, checkout_fix(root), tmp_path / "a.jsonl")
    stop(mem, deploy_denied(root), tmp_path / "b.jsonl")
    note = start_note(mem, root)
    assert note.startswith("deltamem notes on shop")
    for noise in ("\u2192", "has been updated", "cat -n", "Todos have been modified",
                  "Found 2 files", BUGGY, "def total"):
        assert noise not in note, noise
    assert "`pytest -q` works (14 passed in 0.52s)" in note
    assert count_tokens(note) <= 200


def test_the_reason_at_the_end_of_a_long_output_is_kept(mem: DeltaMem, tmp_path: Path) -> None:
    root = repo(tmp_path, "shop")
    stop(mem, deploy_denied(root), tmp_path / "a.jsonl")
    assert POLICY in start_note(mem, root)
    lesson = prompt_note(mem, root, "deploy the shop to production")
    assert "FAILED" in lesson and "denied the request: " + POLICY in lesson
    assert not episodes(mem)["deploy the shop to production"].success
    # One unrelated session later the policy is still what the project start says.
    stop(mem, migration(root), tmp_path / "b.jsonl")
    note = start_note(mem, root)
    assert POLICY in note and "alembic upgrade head" in note


def test_a_fix_that_ends_with_a_grep_finding_nothing_is_a_success(
        mem: DeltaMem, tmp_path: Path) -> None:
    root = repo(tmp_path, "shop")
    stop(mem, checkout_fix(root), tmp_path / "a.jsonl")
    episode = episodes(mem)[CHECKOUT]
    assert episode.success and episode.meta["outcome_rule"] == "the last tests run passed"
    assert not [n for n in mem.nodes() if n.outcome.value == "failure"]


def test_a_codex_fix_that_ends_with_a_grep_finding_nothing_is_a_success(
        mem: DeltaMem, tmp_path: Path) -> None:
    root = repo(tmp_path, "shop")
    rollout = (CodexRollout(str(root)).user("make the checkout total right again")
               .shell("pytest -q tests/test_checkout.py", pytest_failure(str(root)), code=1)
               .patch("shop/cart.py", "-    " + BUGGY + "\n+    return round_money(discount)")
               .shell("pytest -q", "14 passed in 0.52s")
               .shell('grep -rn "subtotal(items) - discount" shop/', "", code=1)
               .say("Fixed the double discount; 14 passed."))
    stop(mem, rollout, tmp_path / "rollout.jsonl")
    episode = episodes(mem)["make the checkout total right again"]
    assert episode.success
    note = prompt_note(mem, root, "make the checkout total right again")
    assert "- edit shop/cart.py" in note and "14 passed" in note


def test_an_interrupted_turn_is_learned_as_a_failure(mem: DeltaMem, tmp_path: Path) -> None:
    root = repo(tmp_path, "shop")
    rename = "rename the DEBUG_MODE setting to APP_DEBUG across the repo"
    session = (ClaudeSession(str(root)).user(rename)
               .grep("DEBUG_MODE", [f"{root}/shop/settings.py", f"{root}/vendor/flags.py"])
               .rejected("Bash", {"command": "sed -i 's/DEBUG_MODE/APP_DEBUG/g' shop/settings.py "
                                             "vendor/flags.py", "description": "Rename"}))
    session.user("rename it in shop/settings.py only, the vendor folder is third-party code")
    session.edit(f"{root}/shop/settings.py", "DEBUG_MODE = False", "APP_DEBUG = False")
    session.bash("pytest -q", "14 passed in 0.50s").say("Renamed in shop/settings.py only.")
    stop(mem, session, tmp_path / "a.jsonl")
    learned = episodes(mem)
    assert rename in learned and not learned[rename].success
    assert "interrupted" in learned[rename].meta["outcome_rule"]
    note = prompt_note(mem, root, rename)
    assert "FAILED" in note and "the user rejected `sed -i" in note


def test_a_task_spans_its_follow_ups_and_is_recalled_by_a_new_wording(
        mem: DeltaMem, tmp_path: Path) -> None:
    root = repo(tmp_path, "shop")
    stop(mem, checkout_fix(root), tmp_path / "a.jsonl")
    tasks = [n.key for n in mem.nodes() if n.tree.value == "task"]
    assert tasks and set(tasks) == {CHECKOUT}  # not "yes please fix it, then run ..."
    note = prompt_note(mem, root, "fix the failing checkout test")
    assert "did a task like this and it worked" in note
    assert "- edit shop/cart.py" in note and "- run `pytest -q` -> 14 passed in 0.52s" in note
    assert count_tokens(note) <= 300


def test_the_prompt_hooks_recall_without_importing_the_answer_models(
        mem: DeltaMem, tmp_path: Path) -> None:
    """A cold hook daemon's first prompt waits for its imports: the recall the prompt hooks make
    reads the trees without building an answer model, so a process that only recalls never
    imports pydantic (issue 48; ``_util.lazymod``)."""
    root = repo(tmp_path, "shop")
    stop(mem, checkout_fix(root), tmp_path / "a.jsonl")
    code = f"""
import json, sys
from deltamem.embed import make_embedder
from deltamem.engine.memory import DeltaMem
from deltamem.integrations.claude_code import run_hook
with DeltaMem.open({str(tmp_path / "memory.db")!r}, embedder=make_embedder("minilm"),
                   create=False) as mem:
    start = run_hook(mem, "session-start", {{"cwd": {str(root)!r}}})
    prompt = run_hook(mem, "user-prompt", {{"cwd": {str(root)!r},
                                           "prompt": "fix the failing checkout test"}})
print(json.dumps([start, prompt, sorted(m for m in sys.modules if m.startswith("pydantic"))]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    start, prompt, loaded = json.loads(done.stdout.splitlines()[-1])
    assert "14 passed" in start["hookSpecificOutput"]["additionalContext"]
    assert "did a task like this" in prompt["hookSpecificOutput"]["additionalContext"]
    assert loaded == []


def test_a_chain_that_does_not_compose_is_a_store_error_naming_the_space(
        mem: DeltaMem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The prompt recall reads the trees as ``DeltaMem.recall`` does: a stored chain that does
    not compose is reported as a ``StoreError`` that names the space and ``deltamem check``."""
    from deltamem.engine.read import Reader
    from deltamem.errors import PatchError, StoreError

    root = repo(tmp_path, "shop")
    stop(mem, checkout_fix(root), tmp_path / "a.jsonl")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise PatchError("splice past the end of steps")

    monkeypatch.setattr(Reader, "tree", broken)
    with pytest.raises(StoreError, match="does not compose.*deltamem check"):
        CodingMemory.for_directory(mem, str(root)).experience_for("fix the checkout test")


def test_a_note_head_quotes_the_first_words_of_a_long_request() -> None:
    """A request that pasted a trace is quoted in a note's head by its first words, within
    ``HEAD_TOKENS`` tokens, so the budget goes to the steps; a short request is quoted whole."""
    pasted = ("the parser test crashes under asan, here is the output: ==48213==ERROR: "
              "AddressSanitizer: heap-use-after-free on address 0x602000000f30 at pc "
              "0x55d4c8a1b2e4 bp 0x7ffd3a6b1c30 sp 0x7ffd3a6b1c28 READ of size 8")
    quoted = head_quote(pasted)
    assert quoted.endswith("…") and pasted.startswith(quoted[:-1])
    assert count_tokens(quoted) <= HEAD_TOKENS < count_tokens(pasted)
    assert head_quote(CHECKOUT) == CHECKOUT
    assert head_quote("0x" + "5f3a" * 40 + " at pc", 8) == "…"  # a first word past the bound


def test_a_request_in_the_past_tasks_own_words_needs_less_of_the_embedding() -> None:
    """The words a request shares with a past task's text count by their rarity among the
    recalled keys: a word every key holds counts for nothing, one no key holds the most."""
    keys = [frozenset({"fix", "checkout", "test"}), frozenset({"fix", "deploy"}),
            frozenset({"fix", "build"})]
    weight = rarity(keys)
    assert weight("fix") == 0.0 < weight("checkout") < weight("round_money")
    request = frozenset({"fix", "checkout", "discount"})
    assert coverage(request, frozenset({"fix"}), weight) == 0.0
    assert coverage(request, frozenset({"fix", "checkout", "discount"}), weight) == 1.0
    assert 0 < coverage(request, frozenset({"checkout"}), weight) < coverage(
        request, frozenset({"discount"}), weight)
    assert coverage(frozenset(), frozenset({"x"}), weight) == 0.0


def test_a_past_task_is_recalled_by_its_own_words_below_the_threshold(
        mem: DeltaMem, tmp_path: Path) -> None:
    """A request about the same code (its function, file and words), far from the task's key
    for the embedding (cosine about 0.33, under two thirds of the threshold), gets the task; a
    request about something the task never touched does not."""
    root = repo(tmp_path, "shop")
    stop(mem, checkout_fix(root), tmp_path / "a.jsonl")
    stop(mem, deploy_denied(root), tmp_path / "b.jsonl")
    assert "did a task like this and it worked" in prompt_note(
        mem, root, "subtotal and discount in the cart")
    assert "did a task like this" not in prompt_note(mem, root, "why is the newsletter signup slow")


def test_a_question_looked_up_in_the_project_is_recalled_by_a_later_request(
        mem: DeltaMem, tmp_path: Path) -> None:
    root = repo(tmp_path, "shop")
    session = (ClaudeSession(str(root)).user("where is the discount applied?")
               .grep("discount", [f"{root}/shop/cart.py"]).read(f"{root}/shop/cart.py", CART)
               .say("In `shop/cart.py`, `total()`."))
    stop(mem, session, tmp_path / "a.jsonl")
    [task] = [n for n in mem.nodes() if n.tree.value == "task"]
    skill = mem.experience(task.id)
    assert isinstance(skill, Skill) and task.outcome.value == "success"
    assert skill.steps == ("what was done: In shop/cart.py, total().", "read shop/cart.py")
    note = prompt_note(mem, root, "the discount is applied twice when the cart has a coupon")
    assert "In shop/cart.py, total()." in note and task.id in note
    assert "answered (" not in start_note(mem, root)  # kept as the skill, not as a fact too


def test_a_past_task_is_recalled_by_what_was_done_when_the_request_is_worded_apart(
        mem: DeltaMem, tmp_path: Path) -> None:
    """A later request often names the problem or its fix, not the first request's words: a
    past task of the project is matched by its gist too (its request, what was done, the first
    failure), and the gist embedded once is cached."""
    root = repo(tmp_path, "ledger")
    invoice = f"{root}/ledger/invoice.py"
    session = (ClaudeSession(str(root)).user("the nightly job went red, have a look")
               .bash("pytest -q", "FAILED tests/test_invoice.py::test_vat - assert 119.99 == "
                     "120.0\n1 failed, 40 passed in 0.61s", code=1)
               .read(invoice, "def gross(net):\n    return net * VAT\n")
               .edit(invoice, "return net * VAT", "return round_half_up(net * VAT, 2)")
               .bash("pytest -q", "41 passed in 0.58s")
               .say("Fixed: invoice totals are now rounded half-up to whole cents after VAT is "
                    "added, so gross amounts no longer come out a cent short."))
    stop(mem, session, tmp_path / "a.jsonl")
    coding = CodingMemory.for_directory(mem, root)
    assert coding.warm() == 1
    mem.embed([""])  # the empty scene a request's recall is read with
    misses = mem.embed_cache.misses
    note = prompt_note(mem, root, "some invoice totals are a cent short after VAT")
    assert "did a task like this and it worked" in note and "round_half_up" not in note
    assert "rounded half-up to whole cents" in note and "edit ledger/invoice.py" in note
    assert mem.embed_cache.misses == misses + 1  # only the request: the gist was warm
    assert "did a task like this" not in prompt_note(mem, root, "add a dark mode to the admin")


def test_a_question_answered_without_looking_is_a_project_fact(mem: DeltaMem,
                                                                tmp_path: Path) -> None:
    root = repo(tmp_path, "shop")
    session = (ClaudeSession(str(root)).user("what does idempotent mean for a webhook?")
               .say("Handling the same event twice has the effect of handling it once."))
    stop(mem, session, tmp_path / "a.jsonl")
    assert not [n for n in mem.nodes() if n.tree.value == "task"]
    assert ("answered (what does idempotent mean for a): Handling the same event twice has "
            "the effect of handling it once.") in start_note(mem, root)


def test_knowledge_never_crosses_projects_and_a_subfolder_gets_its_repository(
        mem: DeltaMem, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shop = repo(home, "bob", "src", "shop")
    stop(mem, deploy_denied(shop), tmp_path / "a.jsonl")
    stop(mem, checkout_fix(shop), tmp_path / "b.jsonl")
    for other in (repo(home, "bob", "src", "shop2"), repo(home, "bob", "src", "shop-admin"),
                  repo(home, "bob", "src", "billing-api"), repo(home, "alice", "src", "shop")):
        assert start_note(mem, other) == "", other
        assert prompt_note(mem, other, "fix the failing checkout test") == "", other
        assert prompt_note(mem, other, "deploy the shop to production") == "", other
    api = shop / "services" / "api"
    api.mkdir(parents=True)
    assert POLICY in start_note(mem, api)
    assert "- edit shop/cart.py" in prompt_note(mem, api, "fix the failing checkout test")


def test_learning_another_project_never_merges_its_facts(mem: DeltaMem, tmp_path: Path) -> None:
    shop, shop2 = repo(tmp_path, "shop"), repo(tmp_path, "shop2")
    stop(mem, deploy_denied(shop), tmp_path / "a.jsonl")
    stop(mem, migration(shop2), tmp_path / "b.jsonl")
    assert POLICY not in start_note(mem, shop2)
    assert "alembic" not in start_note(mem, shop)


def test_portable_skills_cross_projects_by_scope(mem: DeltaMem, tmp_path: Path) -> None:
    shop, billing = repo(tmp_path, "shop"), repo(tmp_path, "billing-api")
    stop(mem, upgrade_db(shop), tmp_path / "a.jsonl")
    prompt = "upgrade my local database to the newest migration"
    assert prompt_note(mem, billing, prompt) == ""  # the default scope is the project
    assert prompt_note(mem, billing, prompt, scope="project") == ""
    note = prompt_note(mem, billing, prompt, scope="user")
    assert "in another project" in note and "run `alembic upgrade head`" in note
    assert "run `alembic upgrade head`" in prompt_note(mem, billing, prompt, scope="global")


def test_a_bad_scope_is_a_one_line_config_error(mem: DeltaMem,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DELTAMEM_SCOPE", "galaxy")
    with pytest.raises(ConfigError, match="DELTAMEM_SCOPE='galaxy' is not one of project"):
        run_hook(mem, "session-start", {"cwd": "/tmp"})


def test_budgets_are_per_hook_and_zero_turns_a_hook_off(
        mem: DeltaMem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = repo(tmp_path, "shop")
    stop(mem, deploy_denied(root), tmp_path / "a.jsonl")
    stop(mem, migration(root), tmp_path / "b.jsonl")
    assert start_note(mem, root)
    monkeypatch.setenv("DELTAMEM_SESSION_START_TOKENS", "0")
    assert start_note(mem, root) == ""
    # 60: the head names the knowledge node it quotes (an id is about 11 tokens)
    monkeypatch.setenv("DELTAMEM_SESSION_START_TOKENS", "60")
    short = start_note(mem, root)
    assert short and count_tokens(short) <= 60
    monkeypatch.setenv("DELTAMEM_USER_PROMPT_TOKENS", "0")
    assert prompt_note(mem, root, "deploy the shop to production") == ""


def test_an_edit_makes_a_known_failing_test_fact_stale(mem: DeltaMem, tmp_path: Path) -> None:
    root = repo(tmp_path, "shop")
    failing = (ClaudeSession(str(root)).user("run the test suite")
               .bash("pytest -q", pytest_failure(str(root)), code=1)
               .say("One test fails: test_total_with_discount (80.0 instead of 90.0)."))
    stop(mem, failing, tmp_path / "a.jsonl")
    assert "assert 80.0 == 90.0" in start_note(mem, root)
    fix = (ClaudeSession(str(root)).user("correct the discount in total()")
           .edit(f"{root}/shop/cart.py", BUGGY, "return round_money(discount)")
           .say("Changed `total()` to apply the discount once."))
    stop(mem, fix, tmp_path / "b.jsonl")
    assert "assert 80.0 == 90.0" not in start_note(mem, root)


# -- the configured extractor ------------------------------------------------------------------


def test_the_hook_honours_the_configured_extractor(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(hook_extractor({}), CodingExtractor)
    with pytest.raises(ConfigError, match="embedded 135M model is not a coding-transcript"):
        hook_extractor({"DELTAMEM_EXTRACTOR": "llm"})
    monkeypatch.setenv("DELTAMEM_LLM_MODEL", "qwen2.5-coder-32b")
    made = hook_extractor({"DELTAMEM_EXTRACTOR": "llm",
                           "DELTAMEM_LLM_BASE_URL": "http://127.0.0.1:9/v1"})
    assert isinstance(made, CodingExtractor) and made.uses_llm
    assert isinstance(made.base, LLMExtractor)


def test_an_llm_extractor_distils_the_session_from_recorded_answers(
        mem: DeltaMem, tmp_path: Path) -> None:
    root = repo(tmp_path, "shop")
    answers = [
        '{"activation": "fix a wrong checkout total", "steps": ["run pytest -q '
        'tests/test_checkout.py", "edit shop/cart.py so total() applies the discount once", '
        '"run pytest -q"], "termination": "14 passed"}',
        '{"trigger": "project shop", "facts": ["tests: pytest -q runs the suite", '
        '"     1\\u2192from shop.money import round_money"]}',
    ]
    llm = ScriptedLLM(answers)
    extractor = CodingExtractor(LLMExtractor(llm))
    run_hook(mem, "stop", {"cwd": str(root), "transcript_path": str(
        checkout_fix(root).write(tmp_path / "a.jsonl"))}, extractor=extractor)
    skill = [mem.experience(n.id) for n in mem.nodes() if n.tree.value == "task"]
    assert skill == [Skill("fix a wrong checkout total", (
        "run pytest -q tests/test_checkout.py",
        "edit shop/cart.py so total() applies the discount once", "run pytest -q"), "14 passed")]
    [knowledge] = [mem.experience(n.id) for n in mem.nodes() if n.tree.value == "env"]
    assert isinstance(knowledge, Knowledge)
    assert "tests: pytest -q runs the suite" in knowledge.facts
    assert not any("\u2192" in f for f in knowledge.facts)  # a file dump is never a fact
    # The model saw the reason and the summary (the end of the outputs), never a head cut.
    assert "14 passed" in llm.calls[0].prompt


def webhook_fix(root: Path) -> ClaudeSession:
    return (ClaudeSession(str(root)).user("the payment webhook test crashes, make it pass")
            .bash("pytest -q tests/test_webhooks.py",
                  "F\nE   KeyError: 'STRIPE_WEBHOOK_SECRET'\n1 failed in 0.12s", code=1)
            .read(f"{root}/.env.example", "DATABASE_URL=postgres://localhost/shop\n")
            .edit(f"{root}/.env.example", "DATABASE_URL=postgres://localhost/shop",
                  "DATABASE_URL=postgres://localhost/shop\nSTRIPE_WEBHOOK_SECRET=")
            .edit(f"{root}/tests/conftest.py", "import pytest",
                  "import pytest\n\nos.environ.setdefault('STRIPE_WEBHOOK_SECRET', 'whsec_test')")
            .bash("pytest -q tests/test_webhooks.py", "3 passed in 0.20s")
            .say("The webhook handler reads STRIPE_WEBHOOK_SECRET; tests now set it."))


def test_a_request_gets_the_project_facts_it_touches_and_a_follow_up_gets_nothing(
        mem: DeltaMem, tmp_path: Path) -> None:
    root = repo(tmp_path, "shop")
    stop(mem, deploy_denied(root), tmp_path / "a.jsonl")
    stop(mem, webhook_fix(root), tmp_path / "b.jsonl")
    stop(mem, migration(root), tmp_path / "c.jsonl")
    start = start_note(mem, root)
    rollout = prompt_note(mem, root, "roll out release 1.5 to the prod cluster")
    assert POLICY in start + rollout
    assert not set(start.splitlines()[1:]) & set(rollout.splitlines())  # nothing said twice
    note = start + prompt_note(mem, root, "stripe webhooks fail in the staging environment")
    # The variable is known from the failing run's output, not from the words of a report.
    assert "env STRIPE_WEBHOOK_SECRET: needed by `pytest -q tests/test_webhooks.py`" in note
    assert "env STRIPE_WEBHOOK_SECRET: The webhook handler" not in note
    assert "whsec_test" not in note
    for follow_up in ("yes, go ahead", "now run the whole suite", "ok commit it"):
        assert prompt_note(mem, root, follow_up) == ""


def test_without_a_repository_on_disk_the_session_and_the_memory_say_where_the_root_is(
        mem: DeltaMem, tmp_path: Path) -> None:
    base = "/nonexistent-home/dev"  # transcripts from another machine: nothing on disk here
    deploy = deploy_denied(Path(f"{base}/platform/deploy/k8s"))
    stop(mem, deploy, tmp_path / "a.jsonl")
    stop(mem, migration(Path(f"{base}/platform")), tmp_path / "b.jsonl")
    assert POLICY in start_note(mem, f"{base}/platform/deploy/k8s")
    assert POLICY in start_note(mem, f"{base}/platform")  # the project owns its subfolders
    assert "alembic" in start_note(mem, f"{base}/platform/charts/api")
    assert "alembic" not in start_note(mem, f"{base}/platform/deploy/k8s")
    for other in (base, f"{base}/platform-docs", f"{base}/platform2"):
        assert start_note(mem, other) == "", other
    # pytest's "rootdir:" shows the root of a session started in a subfolder.
    shop = f"{base}/shop"
    stop(mem, checkout_fix(Path(shop)).user("thanks"), tmp_path / "c.jsonl", cwd=f"{shop}/shop")
    assert "`pytest -q` works" in start_note(mem, shop)


def test_a_skill_says_what_was_done_but_never_the_line_an_edit_replaced(
        mem: DeltaMem, tmp_path: Path) -> None:
    root = repo(tmp_path, "shop")
    session = checkout_fix(root)
    session.lines[-1]["message"]["content"][0]["text"] = (
        f"Fixed: total() applied the discount twice. `{BUGGY}` subtracted it again after "
        "apply_discount; it returns round_money(discount) now. All 14 tests pass.")
    stop(mem, session, tmp_path / "a.jsonl")
    note = prompt_note(mem, root, "fix the failing checkout test")
    assert "- what was done: Fixed: total() applied the discount twice." in note
    assert BUGGY not in note and BUGGY not in start_note(mem, root)
    for node in mem.nodes():
        assert BUGGY not in str(mem.experience(node.id))


def test_a_session_that_ends_in_an_interrupt_is_learned_at_its_end(
        mem: DeltaMem, tmp_path: Path) -> None:
    root = repo(tmp_path, "shop")
    session = (ClaudeSession(str(root)).user("drop the legacy orders table in production")
               .rejected("Bash", {"command": "psql $PROD_DB -c 'DROP TABLE orders_legacy'"}))
    path = session.write(tmp_path / "a.jsonl")
    payload = {"cwd": str(root), "transcript_path": str(path), "session_id": "s-9",
               "reason": "prompt_input_exit"}
    run_hook(mem, "session-end", {**payload, "hook_event_name": "SessionEnd"})
    [episode] = list(mem.store.episodes(mem.space))
    assert not episode.success and episode.task == "drop the legacy orders table in production"
    assert "the user rejected `psql" in prompt_note(mem, root, "drop the legacy orders table")
    # A client that also ran Stop after the interrupt does not get it learned twice.
    run_hook(mem, "session-end", {**payload, "hook_event_name": "SessionEnd"})
    assert len(list(mem.store.episodes(mem.space))) == 1


def asks_first(root: Path) -> ClaudeSession:
    """A change asked for; the agent looks, then asks the user to choose, and edits nothing."""
    return (ClaudeSession(str(root)).user("add rate limiting to the login endpoint")
            .read(f"{root}/shop/auth.py", "def login(request):\n    ...\n")
            .say("There is no limiter yet. Per client IP, or per account name?"))


def test_a_task_waiting_on_the_users_answer_is_learned_once_it_is_answered(
        mem: DeltaMem, tmp_path: Path) -> None:
    root = repo(tmp_path, "shop")
    session = asks_first(root)
    stop(mem, session, tmp_path / "a.jsonl")
    assert list(mem.store.episodes(mem.space)) == []  # not finished, not failed: waiting
    session = (session.user("per IP")
               .edit(f"{root}/shop/auth.py", "def login(request):", "@limit(per_ip=5)\n"
                     "def login(request):")
               .bash("pytest -q", "12 passed in 0.40s").say("Done: 5 logins per minute per IP."))
    stop(mem, session, tmp_path / "a.jsonl")
    [episode] = list(mem.store.episodes(mem.space))
    assert episode.success and episode.task == "add rate limiting to the login endpoint"


def test_a_task_left_waiting_is_learned_unfinished_when_the_user_moves_on_or_leaves(
        mem: DeltaMem, tmp_path: Path) -> None:
    root = repo(tmp_path, "shop")
    moved = (asks_first(root).user("ok, now look at why the docker build is slow")
             .say("The build context holds node_modules; a .dockerignore would skip it."))
    stop(mem, moved, tmp_path / "a.jsonl")
    [episode] = [e for e in mem.store.episodes(mem.space)
                 if e.task == "add rate limiting to the login endpoint"]
    assert not episode.success and episode.meta["outcome_rule"] == UNFINISHED
    other = repo(tmp_path, "blog")
    path = asks_first(other).write(tmp_path / "b.jsonl")
    run_hook(mem, "session-end", {"cwd": str(other), "transcript_path": str(path),
                                  "session_id": "s-8", "hook_event_name": "SessionEnd"})
    left = [e for e in mem.store.episodes(mem.space) if e.meta.get("project") == str(other)]
    assert [(e.success, e.meta["outcome_rule"]) for e in left] == [(False, UNFINISHED)]
    assert "Per client IP, or per account name?" in prompt_note(
        mem, other, "add rate limiting to the login endpoint")


def test_a_request_is_read_by_the_scores_without_the_template_rule(
        mem: DeltaMem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The template rule (``Reader.kind_first``) embeds the template of every key in its pool:
    for coding keys a pasted trace made long it took seconds, past the prompt hook's wait, and
    the note was lost. A coding request is free text: its recall reads by the scores."""
    from deltamem.engine.read import Reader

    root = repo(tmp_path, "shop")
    stop(mem, checkout_fix(root), tmp_path / "a.jsonl")

    weights: list[float] = []
    original = Reader.kind_first

    def spy(self: Reader, *args: Any, **kwargs: Any) -> Any:
        weights.append(self.kind_weight)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Reader, "kind_first", spy)
    note = prompt_note(mem, root, "fix the failing checkout test")
    assert "did a task like this and it worked" in note
    assert weights and set(weights) == {0.0}  # the rule is off for the request's read ...
    assert mem.reader.kind_weight > 0  # ... and the memory's own reads keep it
