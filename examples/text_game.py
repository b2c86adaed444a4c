"""A text-game agent loop with the library: the agent gets better at a game by remembering.

    python examples/text_game.py [--episodes 6] [--embedder static]

The game is a tiny text adventure written here (a locked chest, a key somewhere in the house).
The "agent" is a scripted policy standing in for an LLM: without memory it explores in a random
order; with a recalled skill it tries the skill's steps first. Each episode: recall -> play ->
learn (with the recall, so the outcome is counted on the recalled skill). The embedder is
``static`` (shipped, fast); drop ``--embedder`` to use MiniLM.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

from deltamem import DeltaMem, Episode, Step

ROOMS = {"hall": "a hall with a coat rack", "kitchen": "a kitchen with a drawer",
         "study": "a study with a locked chest"}
ACTIONS = ["go to hall", "go to kitchen", "go to study", "open drawer", "take key",
           "unlock chest", "open chest"]
GOAL = "open the locked chest in the study"
SCENE = "a small house: a hall with a coat rack, a kitchen with a drawer, a study with a chest"


class Game:
    """The world: where the player is, what is open, what they carry."""

    def __init__(self) -> None:
        self.room, self.drawer_open, self.key, self.unlocked, self.won = "hall", False, False, \
            False, False

    def step(self, action: str) -> str:
        verb, _, what = action.partition(" ")
        if verb == "go" and what.startswith("to "):
            self.room = what[3:]
            return f"You are in {ROOMS[self.room]}."
        if action == "open drawer" and self.room == "kitchen":
            self.drawer_open = True
            return "The drawer is open. There is a small key inside."
        if action == "take key" and self.room == "kitchen" and self.drawer_open:
            self.key = True
            return "You take the small key."
        if action == "unlock chest" and self.room == "study" and self.key:
            self.unlocked = True
            return "The chest is unlocked."
        if action == "open chest" and self.room == "study" and self.unlocked:
            self.won = True
            return "You open the chest. You win!"
        return "Nothing happens."


def play(plan: list[str], rng: random.Random, max_steps: int = 60) -> Episode:
    """Try ``plan`` first, then explore at random, until the game is won or steps run out."""
    game, steps = Game(), []
    todo = list(plan)
    while not game.won and len(steps) < max_steps:
        action = todo.pop(0) if todo else rng.choice(ACTIONS)
        steps.append(Step(action, game.step(action)))
    return Episode(task=GOAL, env=SCENE, success=game.won, score=1.0 if game.won else 0.0,
                   steps=tuple(steps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--embedder", default="static")
    parser.add_argument("--seed", type=int, default=2)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp, \
            DeltaMem.open(Path(tmp) / "game.db", embedder=args.embedder) as mem:
        for n in range(1, args.episodes + 1):
            recall = mem.recall(task=GOAL, env=SCENE)
            skill = recall.task.experience
            plan = list(getattr(skill, "steps", ())) if recall.task.matched else []
            episode = play(plan, rng)
            learned = mem.learn(episode, recall)
            print(f"episode {n}: {'won ' if episode.success else 'lost'} in "
                  f"{len(episode.steps):2d} steps; memory: {'skill' if plan else 'none '}; "
                  f"learned {learned.task.action}")


if __name__ == "__main__":
    main()
