"""Property tests are derandomised in CI (``CI`` set) and random elsewhere (tests/conftest.py)."""

from __future__ import annotations

import os

from hypothesis import settings


def test_ci_runs_derandomised_examples():
    in_ci = bool(os.environ.get("CI"))
    assert settings.default.derandomize is in_ci
    assert settings.default.deadline is None
    if in_ci:
        assert settings.default.database is None  # nothing saved, nothing replayed
