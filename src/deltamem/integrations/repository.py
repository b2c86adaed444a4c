"""A coding project's identity: the main checkout of its git repository, and its remote.

A session may run in the repository's main checkout, in one of its linked worktrees (``git
worktree add``, Claude Code's ``<repo>/.claude/worktrees/<name>``) or in a subfolder of either;
all of them are one project, keyed by the main checkout -- the folder of the repository's common
git directory (what ``git rev-parse --git-common-dir`` names). Clones of one repository share
its normalised remote URL (``origin``, else the first remote; scheme, credentials, port and
``.git`` dropped: ``https://tok@github.com/acme/shop.git`` and ``git@github.com:acme/shop``
are both ``github.com/acme/shop``).

Both are read from the repository's own files (``.git``, ``gitdir:``, ``commondir``,
``config``), so a hook pays no ``git`` process; the tests check them against ``git`` itself.
They come from the working directory, never from a transcript's text, and are taken before
anything is redacted.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from deltamem.scenes.project import foreign_path

_REMOTE = re.compile(r'^\s*\[remote\s+"([^"]+)"\]\s*$')
_SECTION = re.compile(r"^\s*\[")
_URL = re.compile(r"^\s*url\s*=\s*(.+?)\s*$")
_SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")


@dataclass(frozen=True)
class Checkout:
    """Where a working directory's repository lives: ``root`` is the main checkout (the project's
    key), ``here`` the checkout the directory is in (a worktree's own folder), ``remote`` the
    normalised remote URL ("" when there is none)."""

    root: str
    here: str
    remote: str = ""


def checkout(cwd: str | Path) -> Checkout | None:
    """The repository ``cwd`` is in (see the module docstring), None outside any (and for a
    Windows path read on another system, ``scenes.project.foreign_path``: not on this disk)."""
    if foreign_path(cwd) is not None:
        return None
    start = Path(os.path.normpath(Path(cwd).expanduser().absolute()))
    for folder in (start, *start.parents):
        dot = folder / ".git"
        try:
            if dot.is_dir():
                return Checkout(str(folder), str(folder), _remote(dot))
            if dot.is_file():
                common = _common_dir(folder, dot)
                root = common.parent if common is not None and common.name == ".git" \
                    else folder
                return Checkout(str(root), str(folder),
                                _remote(common) if common is not None else "")
        except OSError:  # an unreadable folder: stop looking
            return None
    return None


def _common_dir(folder: Path, dot: Path) -> Path | None:
    """The common git directory of a checkout whose ``.git`` is a ``gitdir:`` file (a linked
    worktree, or a submodule, whose git directory has no ``commondir``)."""
    text = dot.read_text(encoding="utf-8", errors="replace").strip()
    if not text.startswith("gitdir:"):
        return None
    gitdir = Path(text[len("gitdir:"):].strip())
    gitdir = gitdir if gitdir.is_absolute() else folder / gitdir
    pointer = gitdir / "commondir"
    if not pointer.is_file():
        return Path(os.path.normpath(gitdir))
    common = Path(pointer.read_text(encoding="utf-8", errors="replace").strip())
    return Path(os.path.normpath(common if common.is_absolute() else gitdir / common))


def _remote(git_dir: Path) -> str:
    """The normalised URL of ``origin`` (else of the first remote) in a git directory's config."""
    try:
        lines = (git_dir / "config").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    urls: dict[str, str] = {}
    section = None
    for line in lines:
        remote = _REMOTE.match(line)
        if remote:
            section = remote.group(1)
        elif _SECTION.match(line):
            section = None
        elif section is not None and (url := _URL.match(line)):
            urls.setdefault(section, url.group(1))
    chosen = urls.get("origin") or next(iter(urls.values()), "")
    return normal_remote(chosen)


def normal_remote(url: str) -> str:
    """A remote URL without scheme, credentials, port, ``.git`` and trailing slash; the host in
    lower case (see the module docstring); "" for none. A local path stays a path."""
    url = url.strip().strip('"')
    if not url:
        return ""
    if "://" in url:
        rest = url.split("://", 1)[1]
        host, _, path = rest.partition("/")
        host = host.rsplit("@", 1)[-1].split(":", 1)[0].lower()
    elif (scp := _SCP.match(url)) and not url.startswith(("/", ".", "~")):
        host, path = scp.group(1).lower(), scp.group(2)
    else:
        return os.path.normpath(url).removesuffix(".git")
    path = path.strip("/").removesuffix(".git").strip("/")
    return f"{host}/{path}" if path else host
