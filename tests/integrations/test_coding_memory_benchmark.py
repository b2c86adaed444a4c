"""The coding-memory benchmark (benchmarks/coding_memory.py, issue 31): its labelled suite is
consistent and regenerable, its metric functions are right on tiny hand-made inputs, and a smoke
run through the real hook commands computes every metric for both arms (the figures themselves
are the benchmark's business, not a test's)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "coding_sessions"
STACKS = ROOT / "benchmarks" / "coding_sessions_stacks"
APART = ROOT / "benchmarks" / "coding_sessions_apart"
BOTH = pytest.mark.parametrize("folder", [SUITE, STACKS, APART], ids=["first", "stacks", "apart"])


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("coding_memory",
                                                  ROOT / "benchmarks" / "coding_memory.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["coding_memory"] = module
    spec.loader.exec_module(module)
    return module


cm = _load()


def claude_line(kind: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "cwd": "/w/app", "message": {"role": kind, "content": content}, **extra}


def tool_use(call_id: str, command: str) -> dict[str, Any]:
    return claude_line("assistant", [{"type": "tool_use", "id": call_id, "name": "Bash",
                                      "input": {"command": command}}])


def tool_result(call_id: str, text: str, error: bool = False) -> dict[str, Any]:
    return claude_line("user", [{"type": "tool_result", "tool_use_id": call_id,
                                 "content": text, "is_error": error}])


# ---- the suite ------------------------------------------------------------------------------
def test_suite_has_the_size_and_variety_issue_31_asks_for() -> None:
    suite = cm.load_suite([SUITE])
    assert len(suite.sessions) >= 24 and len(suite.probes) >= 30
    assert len(suite.repos) >= 6
    assert {s["format"] for s in suite.sessions} == {"claude", "codex"}
    assert {s["outcome"] for s in suite.sessions} == {"success", "failure"}
    assert any(not p["inject"] for p in suite.probes) and any(p["inject"] for p in suite.probes)
    assert sum(len(s["secrets"]) for s in suite.sessions) >= 10
    assert sum(len(s["stale"]) for s in suite.sessions) >= 5


@BOTH
def test_labels_name_what_each_transcript_holds(folder: Path) -> None:
    suite = cm.load_suite([folder])
    for session in suite.sessions:
        records = cm.read_records(cm.session_file(session))
        text = "\n".join(cm.json_strings(records))
        for phrase in [*session["lessons"], *session["stale"]]:
            assert cm.phrases_found(text, [phrase]), (session["id"], phrase)
        for secret in session["secrets"]:
            assert secret in text, (session["id"], secret[:12])
        assert session["cwd"] == session["repo"] or session["cwd"].startswith(
            session["repo"] + "/")
        assert cm.stop_points(records), session["id"]
        first = next(t for r in records if (t := cm.request_text(r)))
        # (the suite written apart labels a request with a long paste by its first line)
        assert session["task"] in (first, first.split("\n", 1)[0])


@BOTH
def test_probes_ask_only_what_sessions_of_their_own_repository_taught(folder: Path) -> None:
    suite = cm.load_suite([folder])
    for probe in suite.probes:
        repo = suite.repo_of(probe["cwd"])
        assert probe["inject"] == (repo is not None), probe["id"]
        lessons = " ".join(" ".join(s["lessons"]) for s in suite.sessions if s["repo"] == repo)
        assert len(cm.phrases_found(lessons, probe["must_contain"])) == len(
            probe["must_contain"]), probe["id"]


@BOTH
def test_the_suite_regenerates_byte_for_byte(folder: Path, tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(folder / "make_sessions.py"), str(tmp_path)], check=True,
                   capture_output=True, timeout=120)
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert made == sorted(p.relative_to(folder) for p in folder.rglob("*")
                          if p.is_file() and p.suffix in (".json", ".jsonl"))
    for rel in made:
        assert (tmp_path / rel).read_bytes() == (folder / rel).read_bytes(), rel


@pytest.mark.parametrize(("folder", "least"), [(STACKS, 40), (APART, 20)],
                         ids=["stacks", "apart"])
def test_the_later_suites_are_split_by_repository_before_any_rule(folder: Path,
                                                                  least: int) -> None:
    dev = cm.load_suite([folder], "dev")
    test = cm.load_suite([folder], "test")
    assert len(dev.sessions) + len(test.sessions) == len(cm.load_suite([folder]).sessions)
    assert not set(dev.repos) & set(test.repos)
    assert len(dev.sessions) >= least and len(test.sessions) >= least
    assert all(s.get("split", "dev") == "dev" for s in cm.load_suite([SUITE]).sessions)


# ---- metric functions -----------------------------------------------------------------------
def test_secret_scanner_finds_a_planted_secret_whole_partial_or_in_other_case(
        tmp_path: Path) -> None:
    key = "sk_live_51Hq8ZvK3mN4pQ7rS2tU9wX0yA1bC3dE5fG7hJ9kL"
    other = "AKIAQ3EXAMPLE7ABCDEF"
    scanner = cm.SecretScanner([key, other])
    stored = tmp_path / "memory.db"
    stored.write_bytes(b"\x00\x01header" + f"STRIPE={key}".encode() + b"\x00tail")
    assert scanner.scan_file(stored) == {key}
    assert scanner.scan("note: " + key[5:40] + " cut") == {key}  # 35 characters of it
    assert scanner.scan(other.lower()) == {other}
    assert scanner.scan("STRIPE=sk_live_[REDACTED] and AKIA[REDACTED]") == set()
    assert scanner.scan_file(tmp_path / "missing") == set()
    assert scanner.scan(scanner.mask(f"a {key} b {key[3:33]} c {other.lower()}")) == set()


def test_phrases_match_case_and_space_blind_but_not_inside_words() -> None:
    text = "Run  `UV run pytest` after apply_discount; tzinfo=UTC"
    assert cm.phrases_found(text, ["uv run pytest", "discount", "TZ", "pytest -q"]) == [
        "uv run pytest", "discount"]


def test_cross_project_check_flags_a_foreign_phrase_or_path_not_an_own_one() -> None:
    suite = cm.Suite(Path("."), [
        {"repo": "/home/dev/shop", "lessons": ["shop/cart.py", "twice"], "stale": []},
        {"repo": "/home/dev/shop2", "lessons": ["python manage.py migrate"], "stale": []},
    ], [])
    probe = {"cwd": "/home/dev/shop2/orders", "must_contain": [], "must_not_contain": []}
    assert cm.cross_project(suite, probe, "use python manage.py migrate") == []
    assert cm.cross_project(suite, probe, "see /home/dev/shop2/orders/x.py") == []
    assert cm.cross_project(suite, probe, "the bug was in shop/cart.py") == ["shop/cart.py"]
    assert cm.cross_project(suite, probe, "ran it in /home/dev/shop today") == [
        "/home/dev/shop"]
    assert cm.cross_project(suite, probe, "it ran twice") == []  # a plain word tells nothing
    forbid = {**probe, "must_not_contain": ["STRIPE_WEBHOOK_SECRET"]}
    assert cm.cross_project(suite, forbid, "set STRIPE_WEBHOOK_SECRET") == [
        "STRIPE_WEBHOOK_SECRET"]


def test_a_phrase_the_own_transcripts_say_is_not_foreign(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps(claude_line("user", "run pytest -q")) + "\n")
    suite = cm.Suite(tmp_path, [
        {"repo": "/w/shop", "file": "x.jsonl", "lessons": ["pytest -q"], "stale": []},
        {"repo": "/w/ledger", "file": "a.jsonl", "lessons": ["alembic upgrade head"],
         "stale": []}], [])
    probe = {"cwd": "/w/ledger", "must_contain": [], "must_not_contain": []}
    assert cm.cross_project(suite, probe, "pytest -q passes") == []
    assert cm.foreign_phrases(suite, "/w/shop") == ["alembic upgrade head"]


def test_stale_strings_are_found_in_an_injection() -> None:
    suite = cm.Suite(Path("."), [{"repo": "/r", "lessons": [], "stale": [
        "return apply_discount(apply_discount(x))"]}], [])
    assert cm.stale_found(suite, "Fact: return  apply_discount(apply_discount(x))") == [
        "return apply_discount(apply_discount(x))"]
    assert cm.stale_found(suite, "return apply_discount(x)") == []


def test_verdict_reads_the_outcome_a_learn_wrote() -> None:
    before = {"a": ("success", 1, 0)}
    assert cm.verdict(before, before) is None
    assert cm.verdict(before, {**before, "b": ("failure", 0, 1)}) == "failure"
    assert cm.verdict(before, {"a": ("success", 2, 0)}) == "success"
    assert cm.verdict(before, {"a": ("success", 2, 1)}) == "mixed"


def test_stop_runs_after_each_turn_but_not_after_an_interrupted_one() -> None:
    records = [claude_line("user", "fix the test"), tool_use("t1", "pytest"),
               tool_result("t1", "1 failed", error=True),
               claude_line("user", [{"type": "text", "text": "[Request interrupted by user]"}]),
               claude_line("user", "no, run it with uv"), tool_use("t2", "uv run pytest"),
               tool_result("t2", "3 passed"),
               claude_line("assistant", [{"type": "text", "text": "Done."}])]
    assert cm.stop_points(records) == [8]
    codex = [{"type": "session_meta", "payload": {"cwd": "/w"}},
             {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
                 {"type": "input_text", "text": "<environment_context>x</environment_context>"}]}},
             {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
                 {"type": "input_text", "text": "deploy it"}]}},
             {"type": "event_msg", "payload": {"type": "turn_aborted", "reason": "interrupted"}},
             {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
                 {"type": "input_text", "text": "ok, only build it"}]}},
             {"type": "response_item", "payload": {"type": "message", "role": "assistant",
                                                   "content": [{"type": "output_text",
                                                                "text": "Built."}]}}]
    assert cm.stop_points(codex) == [6]


def test_flat_baseline_keeps_head_cut_calls_and_judges_by_the_last_result() -> None:
    records = [claude_line("user", "check"), tool_use("t1", "grep -rn TODO src"),
               tool_result("t1", "x" * 500), tool_use("t2", "grep -rn FIXME src"),
               tool_result("t2", "Exit code 1", error=True)]
    calls, last_error = cm.flat_calls(records, 300)
    assert len(calls) == 2 and last_error
    assert calls[0].endswith("x" * 300) and "x" * 301 not in calls[0]


def test_token_counter_uses_the_shipped_tokenizer() -> None:
    count = cm.TokenCounter()
    assert count("") == 0
    assert 0 < count("run uv run pytest -q before you push") < 20


# ---- a smoke run through the real hook commands ---------------------------------------------
@pytest.mark.slow
def test_smoke_run_computes_every_metric_for_both_arms(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    report = cm.main(["--smoke", "--embedder", "hashing", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(report))
    assert set(report["arms"]) == {"deltamem", "flat"}
    suite = report["suite"]
    assert suite["sessions"] == 4 and suite["probes"] >= 4
    for arm in report["arms"].values():
        assert 0.0 <= arm["outcome_accuracy"] <= 1.0 and 0.0 <= arm["lesson_recall"] <= 1.0
        assert len(arm["sessions"]) == 4 and len(arm["probes"]) == suite["probes"]
        assert all(s["stored"] in ("success", "failure", "mixed", "none")
                   for s in arm["sessions"])
        assert {"memory.db", "export", "hook stderr"} <= set(arm["secrets_by_surface"])
        assert arm["secrets_total"] == suite["secrets"]
        for key in ("false_injections", "cross_project_injections", "stale_injected",
                    "secrets_stored", "secrets_injected", "hook_failures"):
            assert isinstance(arm[key], int) and arm[key] >= 0, key
        for event in ("session-start", "user-prompt", "stop"):
            assert arm["latency_ms"][event]["n"] > 0
            assert 0 < arm["latency_ms"][event]["p50"] <= arm["latency_ms"][event]["p95"]
        assert set(arm["tokens"]) == {"session-start", "user-prompt"}
    assert report["arms"]["deltamem"]["hook_failures"] == 0
