"""Choosing a scene plug-in: by name, by Settings/DELTAMEM_SCENE, per memory, on the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from deltamem import Scene
from deltamem.config import Settings
from deltamem.core.model import Episode, Knowledge, Step, Tree
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.errors import ConfigError
from deltamem.extract.base import ExtractRequest
from deltamem.extract.trace import TraceExtractor
from deltamem.formats.episodes import episode_to_dict
from deltamem.scenes import SCENE_NAMES, make_scene
from deltamem.scenes.plain import Plain
from deltamem.scenes.text_games import TextGames
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS

ROOM = "You are in the kitchen. You see a fridge. To the North you see the hallway."
# The same room with another exit: a different text-game layout, nearly the same words.
OTHER = "You are in the kitchen. You see a fridge. To the South you see the hallway."
EPISODE = Episode(task="chill the juice", env=ROOM, success=True,
                  steps=(Step("open fridge", "The fridge is open. It is cold inside."),
                         Step("look", ROOM), Step("dance", "I don't understand that.")))


def test_names_resolve_and_unknown_ones_are_config_errors():
    assert SCENE_NAMES == ("text-games", "coding", "plain")
    assert isinstance(make_scene("text-games"), TextGames)
    assert isinstance(make_scene("Text_Games"), TextGames)
    assert isinstance(make_scene("plain"), Plain)
    own = Plain()
    assert make_scene(own) is own
    with pytest.raises(ConfigError, match="unknown scene 'rooms'"):
        make_scene("rooms")
    with pytest.raises(ConfigError, match="must be a name"):
        make_scene(42)  # type: ignore[arg-type]


def test_a_missing_plug_in_is_a_clear_config_error(monkeypatch):
    import deltamem.scenes as scenes

    monkeypatch.setitem(scenes._SCENES, "coding", ("deltamem.scenes._not_installed", "Coding"))
    with pytest.raises(ConfigError, match="'coding' scene is not available"):
        make_scene("coding")


def test_settings_name_the_scene():
    assert Settings().scene == "text-games"
    assert Settings.from_env({"DELTAMEM_SCENE": "plain"}).scene == "plain"
    with pytest.raises(ConfigError, match="scene must be one of"):
        Settings(scene="rooms")


def test_plain_scene_has_no_grammar():
    scene = Plain()
    assert isinstance(scene, Scene)
    assert scene.signature(ROOM) == scene.signature("anything") == ""
    assert scene.place(ROOM) == ""
    assert scene.trigger(ROOM, 300) == "You are in the kitchen."
    assert scene.facts(EPISODE, 300) == ("open fridge: The fridge is open. It is cold inside.",
                                         f"look: {ROOM}")
    lost = Episode(task="t", env="e", success=False,
                   steps=(Step("open fridge", "It is empty.", reward=0.0),
                          Step("open fridge", "Now it is open.")))
    assert scene.facts(lost, 300) == ("open fridge: Now it is open.",)


def test_the_trace_extractor_reads_facts_with_its_scene():
    request = ExtractRequest(EPISODE, Tree.ENV)
    games = TraceExtractor().extract(request).experience
    plain = TraceExtractor(scene=Plain()).extract(request).experience
    assert isinstance(games, Knowledge) and isinstance(plain, Knowledge)
    assert "In the kitchen: a fridge" in games.facts
    assert "North of the kitchen: the hallway" in games.facts
    assert plain.facts == Plain().facts(EPISODE, 300)
    # Without a scene of its own, the extractor follows the memory's (the request's).
    followed = TraceExtractor().extract(ExtractRequest(EPISODE, Tree.ENV, scene=Plain()))
    assert followed.experience == plain


def _memory(tmp_path, **kwargs):
    return DeltaMem(SQLiteStore(tmp_path / "m.db"), HashingEmbedder(), kwargs.pop("extractor",
                    TraceExtractor()), settings=TEST_SETTINGS, **kwargs)


def test_the_scene_decides_which_layouts_share_knowledge(tmp_path):
    """Text games keep two layouts of one room apart; the plain scene has no layouts, so the
    embedding alone decides."""
    with _memory(tmp_path / "g") as games:
        assert isinstance(games.scene, TextGames)
        games.learn(EPISODE)
        assert games.recall("chill the juice", ROOM).env.matched
        assert not games.recall("chill the juice", OTHER).env.matched
    with _memory(tmp_path / "p", scene="plain") as plain:
        assert isinstance(plain.scene, Plain)
        plain.learn(EPISODE)
        recall = plain.recall("chill the juice", OTHER)
        assert recall.env.matched
        assert recall.env.experience == Knowledge("You are in the kitchen.",
                                                  Plain().facts(EPISODE, 300))


def test_a_memory_adopts_its_extractors_scene_unless_told(tmp_path):
    with _memory(tmp_path / "a", extractor=TraceExtractor(scene=Plain())) as mem:
        assert isinstance(mem.scene, Plain)
    with _memory(tmp_path / "b", extractor=TraceExtractor(scene=Plain()),
                 scene="text-games") as mem:
        assert isinstance(mem.scene, TextGames)
    with DeltaMem.open(tmp_path / "c.db", embedder=HashingEmbedder(), scene="plain",
                       settings=TEST_SETTINGS) as mem:
        assert isinstance(mem.scene, Plain)
        assert isinstance(mem.extractor, TraceExtractor)
        assert isinstance(mem.extractor.scene, Plain)


def test_cli_scene_option(tmp_path):
    env = {**os.environ, "DELTAMEM_EMBEDDER": "hashing", "DELTAMEM_TAU_TASK": "0.6",
           "DELTAMEM_TAU_ENV": "0.6"}
    episodes = tmp_path / "e.jsonl"
    episodes.write_text(json.dumps(episode_to_dict(EPISODE)) + "\n")

    def run(*args):
        return subprocess.run([sys.executable, "-m", "deltamem", *map(str, args)],
                              capture_output=True, text=True, env=env, timeout=120)

    db = tmp_path / "m.db"
    assert run("learn", episodes, "--db", db, "--scene", "plain", "--json").returncode == 0
    recall = run("recall", "--task", "chill the juice", "--env", OTHER, "--db", db, "--scene",
                 "plain", "--json")
    assert json.loads(recall.stdout)["env"]["matched"] is True
    games = run("recall", "--task", "chill the juice", "--env", OTHER, "--db", db, "--json")
    assert json.loads(games.stdout)["env"]["matched"] is False
    bad = run("recall", "--task", "x", "--db", db, "--scene", "rooms")
    assert bad.returncode != 0
    assert "scene must be one of" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_the_registry_loads_a_plug_in_by_its_class_name_only(monkeypatch):
    """The registry names the class; a module whose class goes by another name (an alias or a
    search by the plug-in's ``name``) is a clear configuration error, not a guess."""
    import deltamem.scenes as scenes
    from deltamem.scenes.project import CodingScene

    assert type(make_scene("coding")) is CodingScene
    monkeypatch.setitem(scenes._SCENES, "plain", ("deltamem.scenes.plain", "Renamed"))
    with pytest.raises(ConfigError, match="no Scene plug-in Renamed"):
        make_scene("plain")
    monkeypatch.setitem(scenes._SCENES, "plain", ("deltamem.scenes.text", "Plain"))
    with pytest.raises(ConfigError, match="no Scene plug-in Plain"):
        make_scene("plain")
    monkeypatch.setitem(scenes._SCENES, "coding", ("deltamem.scenes.project", "Coding"))
    with pytest.raises(ConfigError, match="no Scene plug-in Coding"):
        make_scene("coding")
