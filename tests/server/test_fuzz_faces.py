"""A small sample of ``benchmarks/fuzz_faces.py`` on every face: hostile inputs through each
face's own protocol get an answer or a clear refusal, never a server error, a crash or a hang.
(The full run, 5,000 inputs per face, is in docs/security.md.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pg_fixture import pg_server  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from fuzz_faces import run_face  # noqa: E402

SAMPLE = 50


def check(face: str, tmp_path: Path, pg_url: str | None = None) -> None:
    tally = run_face(face, SAMPLE, 45, tmp_path, timeout=30, pg_url=pg_url)
    assert tally.tried == SAMPLE
    assert tally.errors == 0 and tally.hangs == 0, tally.row()
    assert tally.ok + tally.refused == SAMPLE


@pytest.mark.parametrize("face", ["hook", "skills", "mcp-http"])
def test_the_sample_gets_no_server_error_and_no_hang(face: str, tmp_path: Path) -> None:
    check(face, tmp_path)


@pytest.mark.parametrize("face", ["rest-sqlite", "mcp-stdio"])
def test_the_rest_and_stdio_sample_gets_no_server_error(face: str, tmp_path: Path) -> None:
    check(face, tmp_path)


@pytest.mark.postgres
def test_the_rest_sample_on_postgres_gets_no_server_error(tmp_path: Path,
                                                          pg_server: str) -> None:  # noqa: F811
    check("rest-pg", tmp_path, pg_server)
