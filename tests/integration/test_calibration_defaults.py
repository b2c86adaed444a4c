"""The default thresholds are what the documented calibration recommends, on training episodes
only (docs/calibration.md, docs/evaluation-protocol.md): a default that drifts from its command,
or a fixture whose test episodes reach the calibration, fails here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from deltamem.config import DEFAULT_TAU_ENV, DEFAULT_TAU_TASK

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "scienceworld_gold.jsonl"
pytestmark = pytest.mark.slow


def test_defaults_are_the_train_split_calibration() -> None:
    """`deltamem calibrate tests/fixtures/scienceworld_gold.jsonl --split train --embedder
    minilm` recommends the defaults, from the 24 training episodes alone."""
    proc = subprocess.run(
        [sys.executable, "-m", "deltamem", "calibrate", str(FIXTURE), "--split", "train",
         "--embedder", "minilm", "--json"], capture_output=True, text=True, check=True,
        timeout=600)
    out = json.loads(proc.stdout)
    assert out["splits"] == ["train"] and out["episodes"] == 24  # the 12 test ones left out
    assert out["embedder"] == "minilm"
    assert (out["task"]["tau"], out["env"]["tau"]) == (DEFAULT_TAU_TASK, DEFAULT_TAU_ENV)
