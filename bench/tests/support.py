"""Helpers for the harness tests (import as ``from support import ...``)."""

from __future__ import annotations

from pathlib import Path

from deltamem.config import Settings
from deltamem.core.model import Episode, Step

# The hashing test double only sees shared words, so its cosines are lower than a real model's.
TEST_SETTINGS = Settings(tau_task=0.6, tau_env=0.6, embedder="hashing")
# Recorded ScienceWorld gold episodes, shared with the library's tests.
FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"


def make_episode(task: str = "heat the apple",
                 actions: tuple[str, ...] = ("go to kitchen", "take apple", "heat apple"),
                 success: bool = True, **meta: object) -> Episode:
    """A small episode whose observations echo its actions; ``meta`` is kept on it."""
    return Episode(task=task, env="a kitchen with a fridge, a microwave and a table",
                   success=success, score=1.0 if success else 0.0,
                   steps=tuple(Step(a, f"You {a}.") for a in actions), meta=dict(meta))
