"""Scene knowledge across TextWorldExpress coin maps (real recorded gold episodes, MiniLM).

The fixture (tests/fixtures/twx_coin_gold.jsonl.gz, made by scripts/record_textworld_express.py
with the real `textworld_express` package) holds 30 train and 10 test seeds of the coin game.
Every seed is another map, yet all of them start "You are in the kitchen": the scene texts are
near-identical to an embedder, and only the exits tell the maps apart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deltamem.core.knowledge import contradictions, fact_subject
from deltamem.core.model import Knowledge
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.formats.episodes import read_episodes
from deltamem.scenes.text_games import layout_signature

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "twx_coin_gold.jsonl.gz"


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    episodes = [e for _, e in read_episodes(FIXTURE)]
    assert all(not isinstance(e, Exception) for e in episodes)
    train = [e for e in episodes if e.meta["split"] == "train"]
    test = [e for e in episodes if e.meta["split"] == "test"]
    mem = DeltaMem.open(tmp_path_factory.mktemp("twx") / "mem.db", embedder="minilm")
    for episode in train:
        mem.learn(episode)
    yield mem, train, test
    mem.close()


def test_the_maps_are_alike_to_the_embedder_and_apart_by_layout(learned):
    """The premise: the scenes clear the environment threshold for each other, layouts differ."""
    mem, train, _ = learned
    first, second = (mem.embedder.embed([e.env])[0] for e in train[:2])
    assert float(first @ second) >= mem.settings.tau_env
    assert len({layout_signature(e.env) for e in train}) == len(train)


def test_each_map_recalls_only_its_own_facts(learned):
    """Revisiting a map recalls its own knowledge: nothing from another map, no contradiction."""
    mem, train, _ = learned
    assert mem.stats().env.roots == len(train)
    for episode in train:
        knowledge = mem.recall(episode.task, episode.env).env.experience
        assert isinstance(knowledge, Knowledge)
        assert knowledge.facts == TraceExtractor().knowledge(episode).facts
        assert contradictions(knowledge.facts) == []


def test_an_unseen_map_recalls_no_facts_of_other_maps(learned):
    """A held-out seed (a map never learned) gets no scene knowledge rather than wrong facts."""
    mem, _, test = learned
    for episode in test:
        recall = mem.recall(episode.task, episode.env)
        assert not recall.env.matched
        assert recall.task.matched  # the procedure of the coin task is still recalled


def test_knowledge_facts_have_subjects(learned):
    """Facts are statements about the scene, not `action: observation` lines."""
    mem, train, _ = learned
    facts = mem.recall(train[0].task, train[0].env).env.experience.facts
    assert not any(fact_subject(f).startswith(("look around", "move ", "open door")) for f in facts)
    assert any(f.startswith("In the kitchen: ") for f in facts)
