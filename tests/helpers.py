"""Test helpers shared across test modules (import as ``from helpers import ...``)."""

from __future__ import annotations

from deltamem.config import Settings
from deltamem.core.model import Episode, Step

# The hashing test double only sees shared words, so its cosines are lower than a real model's.
TEST_SETTINGS = Settings(tau_task=0.6, tau_env=0.6, embedder="hashing")


def make_episode(task="heat the apple", actions=("go to kitchen", "take apple", "heat apple"),
                 success=True, env="a kitchen with a fridge, a microwave and a table",
                 observations=None, **meta):
    obs = observations or [f"You {a}." for a in actions]
    return Episode(task=task, env=env, success=success, score=1.0 if success else 0.0,
                   steps=tuple(Step(a, o) for a, o in zip(actions, obs, strict=True)), meta=meta)
