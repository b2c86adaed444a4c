"""Episode validation: every bad input names its field."""

from __future__ import annotations

import gzip
import json

import pytest

from deltamem.errors import EpisodeError
from deltamem.formats.episodes import episode_from_dict, episode_to_dict, read_episodes
from helpers import make_episode

GOOD = {"task": "t", "env": "e", "success": True, "score": 1,
        "steps": [{"action": "a", "observation": "o", "thought": "why", "reward": 0.5}],
        "meta": {"k": 1}}


def test_good_episode_round_trips():
    """A valid episode survives to_dict/from_dict."""
    episode = episode_from_dict(GOOD)
    assert episode.steps[0].thought == "why" and episode.score == 1.0
    assert episode.steps[0].reward == 0.5
    assert episode_from_dict(episode_to_dict(episode)) == episode


@pytest.mark.parametrize(("patch", "field"), [
    ({"task": None}, "task"),
    ({"task": ""}, "task"),
    ({"task": 3}, "task"),
    ({"success": "true"}, "success"),
    ({"score": "high"}, "score"),
    ({"score": float("nan")}, "score"),
    ({"steps": {}}, "steps"),
    ({"steps": [1]}, "steps[0]"),
    ({"steps": [{"observation": "o"}]}, "steps[0].action"),
    ({"steps": [{"action": "a", "extra": 1}]}, "steps[0].extra"),
    ({"steps": [{"action": "a", "reward": "1"}]}, "steps[0].reward"),
    ({"steps": [{"action": "a", "reward": float("inf")}]}, "steps[0].reward"),
    ({"steps": [{"action": "a", "reward": True}]}, "steps[0].reward"),
    ({"meta": []}, "meta"),
    ({"bogus": 1}, "bogus"),
])
def test_bad_fields_are_named(patch, field):
    """Each malformed field raises EpisodeError with .field set."""
    with pytest.raises(EpisodeError) as info:
        episode_from_dict({**GOOD, **patch}, where="f:1")
    assert info.value.field == field
    assert str(info.value).startswith("f:1: ")


def test_read_episodes_yields_errors_per_line(tmp_path):
    """Blank lines are skipped; bad lines become errors with their line number."""
    path = tmp_path / "e.jsonl"
    path.write_bytes(b'{"task": "t", "success": false}\n\n\xff\xfe\n[1]\n')
    got = list(read_episodes(path))
    assert [line for line, _ in got] == [1, 3, 4]
    assert not isinstance(got[0][1], EpisodeError)
    assert "UTF-8" in str(got[1][1]) and "JSON object" in str(got[2][1])


def test_gzip_episode_files_are_read_and_a_cut_one_is_one_clear_error(tmp_path):
    """A .jsonl.gz file reads like the plain file; a truncated one raises EpisodeError."""
    data = (json.dumps(episode_to_dict(make_episode())) + "\n").encode() * 3
    good = tmp_path / "e.jsonl.gz"
    good.write_bytes(gzip.compress(data))
    assert [e.task for _, e in read_episodes(good)] == ["heat the apple"] * 3
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(data)[:-12])
    with pytest.raises(EpisodeError, match="cannot read episodes"):
        list(read_episodes(cut))
