"""The labelled sets of issue 44 (benchmarks/coding_sets): their size and variety, a dev/test
split fixed in the files, and that they regenerate from their generators byte for byte."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

SETS = Path(__file__).resolve().parents[2] / "benchmarks" / "coding_sets"


def rows(name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (SETS / name).read_text(encoding="utf-8").splitlines()]


def test_identity_set_has_a_thousand_varied_identities_split_in_two() -> None:
    data = rows("identities.jsonl")
    assert len(data) >= 1000 and len({r["text"] for r in data}) == len(data)
    assert set(Counter(r["kind"] for r in data)) >= {"root", "path", "branch", "test", "digest"}
    texts = " ".join(str(r["text"]) for r in data)
    assert "/Users/" in texts and "C:" in texts and "/home/" in texts
    splits = Counter(r["split"] for r in data)
    assert set(splits) == {"dev", "test"} and min(splits.values()) >= 400


def test_secret_set_has_fifty_shapes_each_present_in_its_text() -> None:
    data = rows("secrets.jsonl")
    assert len(data) >= 50
    assert {r["where"] for r in data} == {"shell", "config", "output"}
    for r in data:
        assert r["secrets"] and all(s in str(r["text"]) for s in r["secrets"]), r["id"]  # type: ignore[union-attr]
        assert all(k in str(r["text"]) for k in r["keep"]), r["id"]  # type: ignore[union-attr]
    assert {r["split"] for r in data} == {"dev", "test"}


def test_prompt_set_has_two_hundred_labelled_prompts_over_ten_stacks() -> None:
    data = rows("prompts.jsonl")
    assert len(data) >= 200
    labels = Counter(r["label"] for r in data)
    assert set(labels) == {"new-task", "continuation", "negative-feedback", "convention",
                           "question-or-request"}
    assert len({r["stack"] for r in data} - {"any"}) >= 10
    for split in ("dev", "test"):
        assert set(Counter(r["label"] for r in data if r["split"] == split)) == set(labels)


def test_grammar_sets_cover_the_credential_grammars_and_a_thousand_identities() -> None:
    """The second set (make_grammar_sets.py): credential-taking tools' documented options,
    config and credentials file formats and encodings, with the same tools' other options and a
    project's identity tokens that must pass."""
    secrets = rows("grammar_secrets.jsonl")
    identities = rows("grammar_identities.jsonl")
    assert len(secrets) >= 100 and len(identities) >= 1000
    assert {r["where"] for r in secrets} == {"shell", "config", "encoded"}
    assert len({r["family"] for r in secrets}) >= 20
    for r in secrets:
        assert r["secrets"] and all(s in str(r["text"]) for s in r["secrets"]), r["id"]  # type: ignore[union-attr]
        assert all(k in str(r["text"]) for k in r["keep"]), r["id"]  # type: ignore[union-attr]
    assert set(Counter(r["kind"] for r in identities)) >= {
        "path", "branch", "test", "hash", "digest", "uuid", "version", "near-miss"}
    assert len({r["text"] for r in identities}) == len(identities)
    for data in (secrets, identities):
        splits = Counter(r["split"] for r in data)
        assert set(splits) == {"dev", "test"} and min(splits.values()) >= len(data) // 3


def test_source_sets_cover_transcript_formats_split_within_each_family() -> None:
    """The third set (make_source_sets.py): config, connection-string, HTTP, cloud, tool-output,
    PEM, JWT and vendor-token formats, and the identities a transcript holds; every family has
    rows in both splits."""
    secrets = rows("source_secrets.jsonl")
    identities = rows("source_identities.jsonl")
    assert len(secrets) >= 150 and len(identities) >= 400
    assert {r["where"] for r in secrets} >= {"config", "dsn", "http", "shell", "output", "pem",
                                             "jwt", "vendor", "code"}
    for r in secrets:
        assert r["secrets"] and all(s in str(r["text"]) for s in r["secrets"]), r["id"]  # type: ignore[union-attr]
        assert all(k in str(r["text"]) for k in r["keep"]), r["id"]  # type: ignore[union-attr]
    assert len({r["text"] for r in identities}) == len(identities)
    for data in (secrets, identities):
        by_family: dict[str, Counter[str]] = {}
        for r in data:
            by_family.setdefault(str(r["family"]), Counter())[str(r["split"])] += 1
        assert len(by_family) >= 15
        for family, splits in by_family.items():
            assert set(splits) == {"dev", "test"}, family
            assert abs(splits["dev"] - splits["test"]) <= 1, family


def check_set_written_apart(name: str, min_secrets: int, min_identities: int) -> set[str]:
    """The checks every set written apart shares: sizes, each secret and kept string in its
    text, unique ids and texts, 20+ families each split half and half; the secrets' places."""
    secrets = rows(f"{name}_secrets.jsonl")
    identities = rows(f"{name}_identities.jsonl")
    assert len(secrets) >= min_secrets and len(identities) >= min_identities
    for r in secrets:
        assert r["secrets"] and all(s in str(r["text"]) for s in r["secrets"]), r["id"]  # type: ignore[union-attr]
        assert all(k in str(r["text"]) for k in r["keep"]), r["id"]  # type: ignore[union-attr]
    for data in (secrets, identities):
        assert len({r["id"] for r in data}) == len(data)
        assert len({r["text"] for r in data}) == len(data)
        by_family: dict[str, Counter[str]] = {}
        for r in data:
            by_family.setdefault(str(r["family"]), Counter())[str(r["split"])] += 1
        assert len(by_family) >= 20
        for family, splits in by_family.items():
            assert set(splits) == {"dev", "test"}, family
            assert abs(splits["dev"] - splits["test"]) <= 1, family
    return {str(r["where"]) for r in secrets}


def test_field_sets_cover_the_places_outside_an_apps_config_split_within_each_family() -> None:
    """The fourth set (make_field_sets.py): CI/CD, mobile signing, IDE and API-client files,
    platforms, webhooks and signed URLs, secret stores, OAuth and sessions, shell sessions,
    framework output and a vendor catalogue, with the identities the same places hold; every
    family has rows in both splits."""
    assert check_set_written_apart("field", 150, 280) >= {
        "ci", "mobile", "ide", "platform", "webhook", "secret-store", "oauth", "shell",
        "framework", "vendor"}


def test_system_sets_cover_code_git_logs_processes_infra_network_split_within_each_family() -> None:
    """The fifth set (make_system_sets.py): secrets in source code, git output, logs, process and
    OS output, infrastructure state, network/VPN config and protocol transcripts, with the
    identities the same places hold; every family has rows in both splits."""
    assert check_set_written_apart("system", 200, 300) == {
        "code", "git", "log", "process", "infra", "network", "protocol"}


def test_data_sets_cover_data_ml_package_and_agent_places_split_within_each_family() -> None:
    """The sixth set (make_data_sets.py): databases and data pipelines, ML and AI tooling, agent
    and editor configs, package registries, SaaS tokens and the encodings a transcript adds, with
    the identities the same places hold (lockfiles, artifacts, run and job ids, public ids)."""
    assert check_set_written_apart("data", 200, 300) == {
        "database", "data-pipeline", "ml-ai", "agent-tooling", "package-registry", "saas",
        "encoding"}


def test_prompt_set_written_apart_has_three_hundred_prompts_every_label_in_both_splits() -> None:
    data = rows("prompts_apart.jsonl")
    assert len(data) >= 300 and len({r["prompt"] for r in data}) == len(data)
    labels = Counter(r["label"] for r in data)
    assert set(labels) == {"new-task", "continuation", "negative-feedback", "convention",
                           "question-or-request"} and min(labels.values()) >= 50
    for split in ("dev", "test"):
        assert set(Counter(r["label"] for r in data if r["split"] == split)) == set(labels)


@pytest.mark.parametrize("script,output", [("make_identities.py", "identities.jsonl"),
                                           ("make_secrets.py", "secrets.jsonl"),
                                           ("make_prompts.py", "prompts.jsonl"),
                                           ("make_grammar_sets.py", "grammar_secrets.jsonl"),
                                           ("make_grammar_sets.py", "grammar_identities.jsonl"),
                                           ("make_source_sets.py", "source_secrets.jsonl"),
                                           ("make_source_sets.py", "source_identities.jsonl"),
                                           ("make_field_sets.py", "field_secrets.jsonl"),
                                           ("make_field_sets.py", "field_identities.jsonl"),
                                           ("make_system_sets.py", "system_secrets.jsonl"),
                                           ("make_system_sets.py", "system_identities.jsonl"),
                                           ("make_data_sets.py", "data_secrets.jsonl"),
                                           ("make_data_sets.py", "data_identities.jsonl"),
                                           ("make_prompts_apart.py", "prompts_apart.jsonl")])
def test_sets_regenerate_byte_for_byte(script: str, output: str, tmp_path: Path) -> None:
    for name in ("make_identities.py", "make_secrets.py", "make_prompts.py", "prompts.txt",
                 "make_grammar_sets.py", "make_source_sets.py", "make_field_sets.py",
                 "make_system_sets.py", "make_data_sets.py", "make_prompts_apart.py",
                 "prompts_apart.txt"):
        shutil.copy(SETS / name, tmp_path / name)
    subprocess.run([sys.executable, str(tmp_path / script)], check=True, capture_output=True,
                   timeout=120, cwd=tmp_path)
    assert (tmp_path / output).read_bytes() == (SETS / output).read_bytes()
