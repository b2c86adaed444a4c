"""The real clients in the loop: the pinned Claude Code and Codex CLIs
(``scripts/setup_clients.sh``), the deltamem plugin installed through their own plugin
commands, a real temporary git repository, the scripted model server on loopback, each CLI in a
network namespace of its own (``tests/realclients/harness.py``).

Not installed is a failure that says to run setup, never a skip.
"""

from __future__ import annotations

import pytest

from realclients import harness as h

pytestmark = [pytest.mark.realclients, pytest.mark.slow]

PROMPT_1 = "The tests fail. Please fix the bug in calc.py."
PROMPT_2 = "test_add is failing again, please fix calc.py"


def _installed(client: str) -> None:
    try:
        h.binary(client)
        h.namespace_prefix()
    except h.ClientsMissing as exc:
        pytest.fail(str(exc))


def _final_run(episode: dict) -> dict:
    runs = [s for s in episode["steps"] if "pytest" in s["action"]]
    assert runs, episode
    return runs[-1]


@pytest.mark.parametrize("client", sorted(h.VERSIONS))
def test_two_sessions_failed_fix_then_notes(client: str) -> None:
    """Session 1's last test run still fails (under Codex: unified exec's ``Process exited with
    code 1``) and its reply does not say so: stored whole, as a failure. Session 2, in the same
    repository, receives the memory's notes."""
    _installed(client)
    run = h.run_sessions(client, [
        h.Session(PROMPT_1, h.fix_the_test(final_passes=False)),
        h.Session(PROMPT_2, h.fix_the_test(final_passes=True), before="git checkout -q calc.py"),
    ])
    assert [s.rc for s in run.sessions] == [0, 0], [s.stderr[-500:] for s in run.sessions]
    first = [e for e in run.episodes if e["task"] == PROMPT_1]
    assert len(first) == 1, run.episodes
    episode = first[0]
    assert episode["success"] is False, episode["meta"]
    assert "1 failed" in _final_run(episode)["observation"]
    assert episode["steps"][-1]["action"].startswith("reply: I changed add()")
    notes = h.notes_received(client, run.sessions[1].requests)
    assert any("deltamem" in n and "calc" in n for n in notes), notes
    assert not h.notes_received(client, run.sessions[0].requests)


@pytest.mark.parametrize("client", sorted(h.VERSIONS))
def test_fixed_session_is_a_success_with_its_final_output(client: str) -> None:
    _installed(client)
    run = h.run_sessions(client, [h.Session(PROMPT_1, h.fix_the_test(final_passes=True))])
    [episode] = run.episodes
    assert episode["success"] is True, episode["meta"]
    assert "2 passed" in _final_run(episode)["observation"]
    assert episode["steps"][-1]["action"].startswith("reply: ")


def test_codex_code_mode_is_read_as_the_commands_it_ran() -> None:
    """A model in code mode (``gpt-5.6-sol``) runs JavaScript through Codex's ``exec`` tool,
    which calls ``tools.exec_command`` / ``tools.apply_patch``: the episode's steps are the
    commands it ran and the file it changed, and the failing last run fails the task."""
    _installed("codex")
    run = h.run_sessions("codex", [h.Session(PROMPT_1, h.fix_the_test(final_passes=False),
                                             code_mode=True)])
    [episode] = run.episodes
    actions = [s["action"] for s in episode["steps"]]
    assert '"exec"' in run.sessions[0].transcript and "tools.exec_command" in \
        run.sessions[0].transcript  # what the rollout holds
    assert not any("tools." in a for a in actions), actions
    assert actions[0].startswith("exec_command: python -m pytest"), actions
    assert any(a.startswith("apply_patch") and "calc.py" in a for a in actions), actions
    assert episode["success"] is False
    assert "1 failed" in _final_run(episode)["observation"]


def test_claude_code_plugin_options_move_the_database() -> None:
    """The database path is a plugin option (userConfig ``db_path``, set at install with
    ``--config``): hooks and learning use it."""
    _installed("claude-code")
    run = h.run_sessions("claude-code", [h.Session(PROMPT_1, h.fix_the_test(True))],
                         options={"db_path": "{home}/memories/work.db"}, record_hooks=True)
    assert run.episodes, run.sessions[0].stderr[-500:]  # read from {home}/memories/work.db
    options = {k: v for x in run.sessions[0].hooks for k, v in x["options"].items()}
    assert options.get("CLAUDE_PLUGIN_OPTION_DB_PATH", "").endswith("/memories/work.db")
