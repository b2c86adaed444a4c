"""Dockerfile and compose.yaml, checked without a Docker daemon (none runs in CI here).

What can go wrong without building: a COPY of a path that is not in the repository, an extra
that pyproject does not define, a command the CLI does not have, a port that does not match,
an environment variable the code never reads, a database URL that does not point at the
compose file's PostgreSQL. docs/deployment.md says how to build and smoke-test for real.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

ROOT = Path(__file__).resolve().parents[1]
SOURCE = "\n".join(p.read_text() for p in (ROOT / "src" / "deltamem").rglob("*.py"))


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def interpolated(text: str) -> str:
    """Compose's interpolation: ``${X:-default}`` gives the default, a required ``${X:?msg}``
    a placeholder (as if X were set)."""
    text = re.sub(r"\$\{(\w+):-([^}]*)\}", r"\2", text)
    return re.sub(r"\$\{(\w+):\?[^}]*\}", r"<\1>", text)


def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "compose.yaml").read_text())
    assert isinstance(data, dict)
    return data


def test_every_copy_source_exists() -> None:
    copies = [args for word, args in instructions() if word in ("COPY", "ADD")]
    assert copies
    for args in copies:
        if args.startswith("--from="):
            continue
        *sources, _ = shlex.split(args)
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"


def test_the_image_installs_defined_extras_and_runs_a_real_command() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    runs = " ".join(args for word, args in instructions() if word == "RUN")
    for group in re.findall(r"\[([a-z,-]+)\]", runs):
        for extra in group.split(","):
            assert extra in extras, f"extra {extra!r} is not in pyproject.toml"
    (entry,) = [args for word, args in instructions() if word == "ENTRYPOINT"]
    (cmd,) = [args for word, args in instructions() if word == "CMD"]
    argv = [*yaml.safe_load(entry), *yaml.safe_load(cmd)]
    assert argv[0] == "deltamem" and argv[1] == "serve" and "0.0.0.0" in argv
    help_ = subprocess.run([sys.executable, "-m", "deltamem", *argv[1:], "--help"],
                           capture_output=True, text=True, timeout=120)
    assert help_.returncode == 0, help_.stderr  # every option of CMD exists
    (port,) = [args for word, args in instructions() if word == "EXPOSE"]
    assert argv[argv.index("--port") + 1] == port


def test_compose_runs_the_server_on_the_pgvector_database() -> None:
    services = compose()["services"]
    db, server = services["db"], services["server"]
    assert interpolated(db["image"]).startswith("pgvector/pgvector:")
    assert (ROOT / server["build"] / "Dockerfile").is_file()
    env = server["environment"]
    url = urlsplit(interpolated(env["DELTAMEM_DB"]))
    db_env = {k: interpolated(str(v)) for k, v in db["environment"].items()}
    assert url.scheme == "postgresql" and url.hostname == "db"
    assert (url.username, url.password, url.path.lstrip("/")) == (
        db_env["POSTGRES_USER"], db_env["POSTGRES_PASSWORD"], db_env["POSTGRES_DB"])
    assert server["depends_on"]["db"]["condition"] == "service_healthy"
    expose = [args for word, args in instructions() if word == "EXPOSE"]
    assert any(p.split(":")[-1] == expose[0] for p in server["ports"])


def test_every_deltamem_variable_is_one_the_code_reads() -> None:
    names = set(compose()["services"]["server"]["environment"])
    names |= set(re.findall(r"\b(DELTAMEM_[A-Z_]+)=", (ROOT / "Dockerfile").read_text()))
    assert "DELTAMEM_DB" in names
    for name in names:
        assert f'"{name}"' in SOURCE, f"{name} is read nowhere in src/deltamem"


def test_the_copied_files_build_the_wheel(tmp_path: Path) -> None:
    """The build stage's context: only what the Dockerfile copies builds the package (the pip
    wheel step without fetching dependencies)."""
    import shutil
    import zipfile

    context = tmp_path / "context"
    context.mkdir()
    for word, args in instructions():
        if word != "COPY" or args.startswith("--from="):
            continue
        *sources, _ = shlex.split(args)
        for source in sources:
            if (ROOT / source).is_dir():
                shutil.copytree(ROOT / source, context / source,
                                ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(ROOT / source, context / source)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--no-build-isolation", "-w", str(tmp_path / "wheels"), "."],
                          cwd=context, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = (tmp_path / "wheels").glob("deltamem-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "deltamem/faces/cli/app.py" in names and "deltamem/faces/server/rest.py" in names


def test_compose_requires_a_password_and_publishes_on_loopback() -> None:
    """No silent default password, and the server on 127.0.0.1 unless DELTAMEM_BIND says
    otherwise (compose's ``${X:?}`` stops ``docker compose up`` when X is unset)."""
    text = (ROOT / "compose.yaml").read_text()
    assert "POSTGRES_PASSWORD:-" not in text
    services = compose()["services"]
    for value in (services["db"]["environment"]["POSTGRES_PASSWORD"],
                  services["server"]["environment"]["DELTAMEM_DB"]):
        assert re.search(r"\$\{POSTGRES_PASSWORD:\?[^}]+\}", value), value
    (published,) = services["server"]["ports"]
    host = interpolated(published).rsplit(":", 2)[0]
    assert host == "127.0.0.1", published


def test_the_image_is_built_from_the_wheel_without_a_dependency_fetch_in_the_build_stage():
    """Stage one builds deltamem's wheel alone (``--no-deps``); the runtime stage installs it
    from a bind mount (no layer keeps the wheels), with an optional offline wheelhouse; the
    base image is an argument, so a digest can pin it."""
    steps = instructions()
    froms = [args for word, args in steps if word == "FROM"]
    assert froms[0] == "${PYTHON_IMAGE} AS build" and froms[1] == "${PYTHON_IMAGE}"
    assert any(word == "ARG" and args.startswith("PYTHON_IMAGE=") for word, args in steps)
    first, second = [i for i, (word, _) in enumerate(steps) if word == "FROM"]
    build = steps[first:second]
    (wheel,) = [args for word, args in build if word == "RUN"]
    assert "pip wheel" in wheel and "--no-deps" in wheel
    runtime = steps[second:]
    assert not any(word == "COPY" and args.startswith("--from=") for word, args in runtime)
    (install,) = [args for word, args in runtime if word == "RUN" and "pip install" in args]
    assert "--mount=type=bind,from=build,source=/wheels" in install
    assert "--mount=type=bind,source=wheelhouse" in install
    assert (ROOT / "wheelhouse").is_dir()
