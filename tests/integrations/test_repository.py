"""A project's identity: the main checkout of its git repository (worktrees, Claude Code's
``.claude/worktrees/<name>``, subfolders) and its remote (clones), on real git repositories
made in temporary folders, checked against ``git`` itself; and the memory shared across them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from deltamem.integrations.claude_code import learn_turn, read_transcript
from deltamem.integrations.coding_memory import CodingMemory
from deltamem.integrations.repository import checkout, normal_remote

FIXTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "clients" / "claude-code-2.1.197"
           / "fix-pass" / "session-1" / "transcript.jsonl")
REMOTE = ("https://x-access-token:ghp_notarealtoken0000000000000000000000@GitHub.com/acme/"
          "x7Qz9kPp2.git")


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=dev", "-c", "user.email=dev@example.invalid",
                           *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def tmp_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("r")  # a short folder (see the memory test's note)


@pytest.fixture(params=["Users/jane/code/x7Qz9kPp2"])
def repo(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A repository (at a path that looks random unless a test asks for another name), with a
    remote carrying credentials, one commit, a linked worktree and a Claude Code worktree."""
    root = tmp_path / request.param
    root.mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "src").mkdir()
    (root / "src" / "util.py").write_text("X = 1\n")
    git("init", "-q", "-b", "main", cwd=root)
    git("add", ".", cwd=root)
    git("commit", "-q", "-m", "calc", cwd=root)
    git("remote", "add", "origin", REMOTE.replace("x7Qz9kPp2", root.name), cwd=root)
    git("worktree", "add", "-q", str(tmp_path / "wt-feature"), "-b", "feature", cwd=root)
    git("worktree", "add", "-q", str(root / ".claude" / "worktrees" / "feat-x"), "-b", "feat-x",
        cwd=root)
    return root


def common_dir_root(folder: Path) -> str:
    common = Path(git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=folder))
    return str(common.parent)


def test_every_checkout_of_a_repository_keys_its_main_checkout(repo: Path,
                                                               tmp_path: Path) -> None:
    places = [repo, repo / "src", tmp_path / "wt-feature", repo / ".claude" / "worktrees" /
              "feat-x", repo / ".claude" / "worktrees" / "feat-x" / "src"]
    for place in places:
        found = checkout(place)
        assert found is not None, place
        assert found.root == str(repo) == common_dir_root(place), place
        assert found.remote == f"github.com/acme/{repo.name}"
    assert checkout(tmp_path / "wt-feature").here == str(tmp_path / "wt-feature")
    assert checkout(tmp_path) is None


@pytest.mark.parametrize(("url", "normal"), [
    ("https://github.com/acme/shop.git", "github.com/acme/shop"),
    ("git@github.com:acme/shop.git", "github.com/acme/shop"),
    ("ssh://git@GitHub.com:22/acme/shop/", "github.com/acme/shop"),
    ("https://user:p%40ss@gitlab.example.com/group/sub/shop.git",
     "gitlab.example.com/group/sub/shop"),
    ("/srv/git/shop.git", "/srv/git/shop"),
    ("", ""),
])
def test_remote_urls_lose_scheme_credentials_and_suffix(url: str, normal: str) -> None:
    assert normal_remote(url) == normal


def _learn(mem, cwd: Path) -> None:
    transcript = read_transcript(FIXTURE)
    learn_turn(mem, transcript, cwd=str(cwd), meta={"session": "s-1"})


# The memory test runs on an ordinary path here: on this branch the redactor's entropy rule
# still rewrites paths like /tmp/.../Users/jane/code/calc in what is stored (the redaction
# rework removes that rule; then this test can take the random-looking path too).
@pytest.mark.parametrize("repo", ["home/dev/calc"], indirect=True)
def test_worktrees_and_clones_share_the_memory_and_others_do_not(mem, repo: Path,
                                                                tmp_path: Path) -> None:
    """A session in Claude Code's worktree of the repository teaches the repository; a later
    session in the main checkout, in another worktree and in a clone of the same remote
    recalls it; a repository with another remote recalls nothing."""
    _learn(mem, repo / ".claude" / "worktrees" / "feat-x")
    [episode] = list(mem.store.episodes(mem.space))
    assert episode.meta["project"] == str(repo)
    assert episode.meta["remote"] == "github.com/acme/calc"
    assert "ghp_" not in str(episode.meta)
    clone = tmp_path / "elsewhere" / "calc-copy"
    git("clone", "-q", str(repo), str(clone), cwd=tmp_path)
    git("remote", "set-url", "origin", "git@github.com:acme/calc.git", cwd=clone)
    other = tmp_path / "other"
    other.mkdir()
    git("init", "-q", cwd=other)
    git("remote", "add", "origin", "https://github.com/acme/other.git", cwd=other)
    request = "The tests fail. Please fix the bug in calc.py."  # (the hashing test embedder)
    for place in (repo, tmp_path / "wt-feature", clone / "src" if (clone / "src").is_dir()
                  else clone):
        coding = CodingMemory.for_directory(mem, place)
        assert coding.session_note(400), place
        assert "calc.py" in coding.task_note(request, 400), place
    stranger = CodingMemory.for_directory(mem, other)
    assert stranger.session_note(400) == ""
    assert stranger.experience_for(request) is None


@pytest.mark.parametrize("repo", ["home/dev/calc"], indirect=True)
def test_a_worktree_session_stores_the_projects_paths(mem, repo: Path, tmp_path: Path) -> None:
    """Files a session edits in a worktree are stored as the project's files (``calc.py``), not
    under the worktree's folder (``.claude/worktrees/feat-x/calc.py``)."""
    worktree = repo / ".claude" / "worktrees" / "feat-x"
    text = FIXTURE.read_text().replace("/home/dev/calc", str(worktree))
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    learn_turn(mem, read_transcript(path), cwd=str(worktree), meta={"session": "s-2"})
    [episode] = list(mem.store.episodes(mem.space))
    actions = " ".join(str(s) for s in episode.steps)
    assert str(worktree) not in actions and ".claude/worktrees" not in actions
    assert str(repo / "calc.py") in actions


@pytest.mark.parametrize("cwd", ["C:/Users/JSmith/source/repos/WebApi",
                                 "C:\\Users\\JSmith\\source\\repos\\WebApi\\"])
def test_a_windows_cwd_is_absolute_on_any_system(mem, repo: Path, cwd: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A session's Windows working directory (``C:/...`` or ``C:\\...``) names that project,
    wherever the hook runs: it is never joined to the hook's own directory, which here is
    another repository whose memory must not be injected."""
    monkeypatch.chdir(repo)
    _learn(mem, repo)
    assert checkout(cwd) is None
    coding = CodingMemory.for_directory(mem, cwd)
    assert coding.root == "C:/Users/JSmith/source/repos/WebApi"
    assert coding.session_note(400) == ""
    assert coding.experience_for("The tests fail. Please fix the bug in calc.py.") is None
