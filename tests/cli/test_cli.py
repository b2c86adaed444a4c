"""The CLI's contract: JSON shapes, exit codes and error lines (run as a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from deltamem.formats.episodes import episode_to_dict
from helpers import make_episode

ENV = {**os.environ, "DELTAMEM_EMBEDDER": "hashing", "DELTAMEM_TAU_TASK": "0.6",
       "DELTAMEM_TAU_ENV": "0.6"}


def run(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "deltamem", *map(str, args)],
                          capture_output=True, text=True, env=ENV, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


def write_jsonl(path, episodes):
    path.write_text("".join(json.dumps(episode_to_dict(e)) + "\n" for e in episodes))
    return path


@pytest.fixture
def learned(tmp_path):
    db = tmp_path / "m.db"
    eps = write_jsonl(tmp_path / "e.jsonl", [
        make_episode(),
        make_episode(),
        make_episode(actions=("go to kitchen", "open microwave", "take apple", "heat apple")),
    ])
    out = json.loads(run("learn", eps, "--db", db, "--extractor", "trace", "--json").stdout)
    return db, out


def test_learn_contract(learned):
    """learn --json reports root, dedup and delta per tree with node and parent ids."""
    _, out = learned
    assert out["episodes"] == 3
    actions = [(r["index"], r["task"]["action"]) for r in out["results"]]
    assert actions == [(0, "root"), (1, "dedup"), (2, "delta")]
    root = out["results"][0]["task"]["node"]
    assert out["results"][1]["task"] == {"action": "dedup", "node": root, "parent": None}
    assert out["results"][2]["task"]["parent"] == root
    assert set(out["results"][0]["env"]) >= {"action", "node", "parent"}
    # The three episodes share one task and one scene: embedded once, then served from the cache.
    assert (out["usage"]["embed_calls"], out["usage"]["embed_texts"]) == (1, 2)


def test_recall_contract(learned):
    """recall --json returns both trees' match, chain, experience and the context."""
    db, _ = learned
    out = json.loads(run("recall", "--db", db, "--task", "heat the apple", "--env",
                         "a kitchen with a fridge, a microwave and a table", "--json").stdout)
    task = out["task"]
    assert task["matched"] is True and isinstance(task["score"], float)
    assert set(task["chain"][0]) == {"id", "kind", "outcome", "similarity", "score"}
    assert task["skill"]["steps"] == ["go to kitchen", "take apple", "heat apple"]
    assert set(task["skill"]) == {"activation", "steps", "termination"}
    assert out["env"]["matched"] and set(out["env"]["knowledge"]) == {"trigger", "facts"}
    assert "go to kitchen" in out["context"]
    miss = json.loads(run("recall", "--db", db, "--task", "unrelated zebra quest",
                          "--json").stdout)
    assert miss["task"] == {"matched": False, "node": None, "score": None, "chain": [],
                            "skill": None}


def test_recall_budget_tokens(learned):
    """--budget-tokens caps the context; a negative budget is a one-line usage error."""
    db, _ = learned
    args = ("recall", "--db", db, "--task", "heat the apple", "--env",
            "a kitchen with a fridge, a microwave and a table", "--json")
    full = json.loads(run(*args).stdout)
    capped = json.loads(run(*args, "--budget-tokens", full["context_tokens"] - 10).stdout)
    assert 0 < capped["context_tokens"] <= full["context_tokens"] - 10
    assert capped["context"] and capped["context"] != full["context"]
    bad = run(*args, "--budget-tokens", "-1", check=False)
    assert bad.returncode == 3 and bad.stderr.startswith("error: budget_tokens")


def test_show_and_stats_contract(learned):
    """show and stats print the documented fields."""
    db, out = learned
    delta = out["results"][2]["task"]["node"]
    shown = json.loads(run("show", delta, "--db", db, "--json").stdout)
    assert shown["kind"] == "delta" and shown["chain"][-1] == delta
    assert shown["experience"]["steps"][1] == "open microwave"
    assert shown["patch"][0][0] == "splice"
    assert set(shown["stats"]) >= {"hits", "successes", "failures"}
    stats = json.loads(run("stats", "--db", db, "--json").stdout)
    for tree in ("task", "env"):
        assert set(stats[tree]) >= {"nodes", "roots", "deltas", "failures", "max_depth"}
    assert stats["episodes"] == 3
    assert 0 < stats["stored_chars"] < stats["flat_chars"]


def test_export_import_consolidate_check(learned, tmp_path):
    """export/import round-trip through the CLI; consolidate and check succeed."""
    db, _ = learned
    run("export", tmp_path / "x.jsonl", "--db", db)
    copy = tmp_path / "copy.db"
    counts = json.loads(run("import", tmp_path / "x.jsonl", "--db", copy, "--json").stdout)
    records = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    nodes = sum(r.get("record") == "node" for r in records)
    assert nodes == 4  # per tree a root and one delta (the repeated episode deduplicated)
    assert counts == {"nodes": nodes, "episodes": 3}
    assert json.loads(run("consolidate", "--db", db, "--json").stdout) == {"dry_run": False,
                                                                           "consolidated": []}
    assert json.loads(run("check", "--db", copy, "--json").stdout) == {"ok": True,
                                                                        "problems": []}


def test_bad_lines_are_reported_and_skipped(tmp_path):
    """A malformed line names file, line and field; the good lines are still learned."""
    eps = tmp_path / "bad.jsonl"
    good = json.dumps(episode_to_dict(make_episode()))
    eps.write_text(good + "\n{not json\n" + json.dumps({"task": "x", "success": "yes"}) + "\n"
                   + json.dumps({"task": "x", "success": True, "steps": [{"observation": "o"}]})
                   + "\n")
    proc = run("learn", eps, "--db", tmp_path / "m.db", "--json", check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 3
    assert f"{eps}:2: invalid JSON" in lines[0]
    assert f"{eps}:3:" in lines[1] and "'success'" in lines[1]
    assert f"{eps}:4:" in lines[2] and "steps[0].action" in lines[2]
    out = json.loads(proc.stdout)
    assert out["episodes"] == 1 and [e["line"] for e in out["errors"]] == [2, 3, 4]


def test_strict_learns_nothing_on_bad_input(tmp_path):
    """--strict refuses the whole file when any line is bad."""
    eps = tmp_path / "bad.jsonl"
    eps.write_text(json.dumps(episode_to_dict(make_episode())) + "\n[]\n")
    proc = run("learn", eps, "--db", tmp_path / "m.db", "--strict", check=False)
    assert proc.returncode == 2 and "must be a JSON object" in proc.stderr
    assert not (tmp_path / "m.db").exists()


def test_strict_writes_nothing_when_a_line_fails_while_learning(tmp_path):
    """--strict is all or nothing, also for a line that parses but cannot be stored."""
    eps = tmp_path / "bad.jsonl"
    good = json.dumps(episode_to_dict(make_episode()))
    eps.write_text(good + "\n" + good.replace("heat the apple", "heat \\ud800 apple") + "\n")
    proc = run("learn", eps, "--db", tmp_path / "m.db", "--strict", check=False)
    assert proc.returncode == 2 and "surrogate" in proc.stderr
    assert not (tmp_path / "m.db").exists()


def test_reads_never_create_and_writers_can_refuse_to(tmp_path):
    """A read of a missing database or space is exit 4 and creates nothing (not even a folder);
    `learn --no-create` refuses a space that does not exist."""
    for args in (("stats",), ("recall", "--task", "x"), ("show", "t-1"), ("check",),
                 ("export", tmp_path / "x.jsonl")):
        proc = run(*args, "--db", tmp_path / "nodir" / "m.db", check=False)
        assert proc.returncode == 4 and "no database" in proc.stderr, args
    assert not (tmp_path / "nodir").exists() and not (tmp_path / "x.jsonl").exists()
    eps = write_jsonl(tmp_path / "e.jsonl", [make_episode()])
    run("learn", eps, "--db", tmp_path / "m.db")
    proc = run("stats", "--db", tmp_path / "m.db", "--space", "typo", check=False)
    assert proc.returncode == 4 and "no space 'typo'" in proc.stderr
    proc = run("learn", eps, "--db", tmp_path / "m.db", "--space", "typo", "--no-create",
               check=False)
    assert proc.returncode == 4
    spaces = json.loads(run("stats", "--db", tmp_path / "m.db", "--json").stdout)
    assert spaces["episodes"] == 1
    proc = run("stats", "--db", "mysql://x/y", check=False)
    assert proc.returncode == 3 and "unknown database URL scheme 'mysql'" in proc.stderr
    assert not os.path.exists("mysql:")
    proc = run("stats", "--db", tmp_path / "m.db", "--space", "A\n", check=False)
    assert proc.returncode == 3 and "invalid space name" in proc.stderr


def test_unreadable_file_and_missing_node(tmp_path):
    """Missing files and unknown nodes give one-line errors and distinct exit codes."""
    proc = run("learn", tmp_path / "nope.jsonl", "--db", tmp_path / "m.db", check=False)
    assert proc.returncode == 2 and "nope.jsonl" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    run("learn", write_jsonl(tmp_path / "e.jsonl", [make_episode()]), "--db", tmp_path / "m.db")
    proc = run("show", "t-missing", "--db", tmp_path / "m.db", check=False)
    assert proc.returncode == 4 and "no node 't-missing'" in proc.stderr


def test_embedder_mismatch_is_a_clear_error(learned):
    """Reopening a space with another embedder fails with a fix in the message."""
    db, _ = learned
    proc = run("stats", "--db", db, "--embedder", "hashing:64", check=False)
    assert proc.returncode == 5 and "open it with embedder='hashing-256'" in proc.stderr


def test_calibrate_recommends_thresholds(tmp_path):
    """calibrate prints a threshold per tree from labelled episodes."""
    eps = [make_episode(task=f"{verb} the {obj} now", env=f"room {room}", task_name=verb)
           for verb in ("heat", "cool", "clean") for obj in ("apple", "mug", "egg")
           for room in ("a", "b")]
    path = write_jsonl(tmp_path / "labelled.jsonl", eps)
    out = json.loads(run("calibrate", path, "--env-group", "text", "--json").stdout)
    assert out["embedder"] == "hashing-256"
    task = out["task"]
    assert task["n_groups"] == 3 and task["n_items"] == len(eps)
    # The recommendation sits on the best plateau of its own top-1 curve.
    best = max(point["f1"] for point in task["top1_curve"])
    assert task["f1"] == best
    assert [p["f1"] for p in task["top1_curve"] if p["tau"] == task["tau"]] == [best]
    assert out["env"]["n_groups"] == 2


def test_calibrate_reads_only_the_named_split(tmp_path):
    """--split train calibrates on the train episodes alone; no episode of that split fails."""
    eps = [make_episode(task=f"{verb} the {obj} now", env=f"room {room}", task_name=verb,
                        split="test" if obj == "egg" else "train")
           for verb in ("heat", "cool", "clean") for obj in ("apple", "mug", "egg")
           for room in ("a", "b")]
    path = write_jsonl(tmp_path / "labelled.jsonl", eps)
    out = json.loads(run("calibrate", path, "--split", "train", "--json").stdout)
    assert out["episodes"] == out["task"]["n_items"] == 12 and out["splits"] == ["train"]
    both = json.loads(run("calibrate", path, "--split", "train", "--split", "test",
                          "--json").stdout)
    assert both["episodes"] == len(eps) and both["splits"] == ["train", "test"]
    assert json.loads(run("calibrate", path, "--json").stdout)["splits"] is None
    proc = run("calibrate", path, "--split", "dev", check=False)
    assert proc.returncode != 0 and "no episode has split dev" in proc.stderr


def test_list_finds_node_ids(learned):
    """list --json: one row per node with filters; the table shows whole ids."""
    db, out = learned
    rows = json.loads(run("list", "--db", db, "--json").stdout)
    assert rows["total"] == len(rows["nodes"]) and not rows["truncated"]
    root = out["results"][0]["task"]["node"]
    assert rows["nodes"][0]["id"] == root and rows["nodes"][0]["kind"] == "root"
    deltas = json.loads(run("list", "--db", db, "--tree", "task", "--kind", "delta",
                            "--json").stdout)
    assert [r["id"] for r in deltas["nodes"]] == [out["results"][2]["task"]["node"]]
    assert deltas["nodes"][0]["parent"] == root
    cut = json.loads(run("list", "--db", db, "--limit", "1", "--json").stdout)
    assert len(cut["nodes"]) == 1 and cut["truncated"]
    assert json.loads(run("list", "--db", db, "--contains", "NO SUCH KEY",
                          "--json").stdout)["nodes"] == []
    assert root in run("list", "--db", db).stdout
    bad = run("list", "--db", db, "--kind", "leaf", check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")


def test_recall_and_list_filter_on_episode_meta(tmp_path):
    """--filter key=value (repeatable) on recall and list keeps the nodes of the episodes whose
    meta has every key equal to the value; a malformed filter is one line, exit 3."""
    db = tmp_path / "m.db"
    eps = write_jsonl(tmp_path / "e.jsonl", [
        make_episode(user="alice", project="shop"),
        make_episode(actions=("go to kitchen", "open microwave", "take apple", "heat apple"),
                     user="bob", project="shop"),
    ])
    out = json.loads(run("learn", eps, "--db", db, "--json").stdout)
    alice, bob = (r["task"]["node"] for r in out["results"])
    kitchen = "a kitchen with a fridge, a microwave and a table"
    for who, node in (("alice", alice), ("bob", bob)):
        got = json.loads(run("recall", "--db", db, "--task", "heat the apple", "--env", kitchen,
                             "--filter", f"user={who}", "--filter", "project=shop",
                             "--json").stdout)
        assert got["task"]["node"] == node
    none = json.loads(run("recall", "--db", db, "--task", "heat the apple",
                          "--filter", "user=alice", "--filter", "project=farm", "--json").stdout)
    assert none["task"]["matched"] is False
    rows = json.loads(run("list", "--db", db, "--tree", "task", "--filter", "user=bob",
                          "--json").stdout)
    assert [r["id"] for r in rows["nodes"]] == [bob]
    for flag in ("user", "=alice"):
        bad = run("recall", "--db", db, "--task", "x", "--filter", flag, check=False)
        assert bad.returncode == 3
        assert bad.stderr.strip().splitlines() == [
            f"error: filter {flag!r} must be key=value, e.g. user=alice"]


def test_forget_fact_removes_one_fact(tmp_path):
    from deltamem.core.model import Knowledge, Tree
    from deltamem.engine.memory import DeltaMem

    db = tmp_path / "k.db"
    facts = ("tests (pytest): `pytest -q` works", "deploy (helm upgrade): `helm upgrade` fails")
    with DeltaMem.open(db, embedder="hashing") as mem:
        [node] = mem.add_roots([(Tree.ENV, "software project shop at /src/shop",
                                 Knowledge("software project shop", facts), {})])
    out = json.loads(run("forget-fact", node, "helm upgrade", "--db", db, "--json").stdout)
    assert out["of"] == node and out["kind"] == "fact"
    shown = run("show", out["node"], "--db", db).stdout
    assert "pytest -q" in shown and "helm upgrade" not in shown
    bad = run("forget-fact", node, "nothing like it", "--db", db, check=False)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr and "match" in bad.stderr
