"""A run's artifacts: its directory stored compressed, so anyone can re-derive its tables.

:func:`pack` writes ``<entry>.tar.gz`` holding what the numbers come from and nothing a rerun
would need to recompute: ``config.json`` (every option and the pins), ``stream.json``,
``gold.jsonl`` (the warm start's gold episodes), each arm's ``episodes.jsonl`` and
``summary.json``. The memories' own files (``memory.db``, ``memory.json``) are left out: every
number is a function of the episode logs. :func:`unpack` restores such a directory, refusing
members that would land outside it.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from deltamem.errors import ConfigError

KEPT = ("config.json", "stream.json", "gold.jsonl", "summary.json")


def members(run_dir: Path) -> list[Path]:
    """The files of ``run_dir`` an archive keeps, relative to it, in a fixed order."""
    found = [Path(name) for name in KEPT if (run_dir / name).is_file()]
    found += sorted(p.relative_to(run_dir) for p in run_dir.glob("*/episodes.jsonl"))
    return found


def pack(run_dir: Path, archive: Path) -> Path:
    """Write ``run_dir``'s artifacts to ``archive`` (a ``.tar.gz``); return its path.

    Raises:
        ConfigError: ``run_dir`` holds no episode log.
    """
    files = members(run_dir)
    if not any(p.name == "episodes.jsonl" for p in files):
        raise ConfigError(f"{run_dir} holds no episode log to archive")
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(archive.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for rel in files:
            info = tar.gettarinfo(str(run_dir / rel), arcname=rel.as_posix())
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with (run_dir / rel).open("rb") as handle:
                tar.addfile(info, handle)
    tmp.replace(archive)
    return archive


def unpack(archive: Path, dest: Path) -> Path:
    """Extract ``archive`` into ``dest`` (created); return ``dest``.

    Raises:
        ConfigError: the file is not a run archive, or a member would land outside ``dest``.
    """
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar.getmembers():
                target = (dest / member.name).resolve()
                if not member.isfile() or dest.resolve() not in target.parents:
                    raise ConfigError(f"{archive}: member {member.name!r} is not a run file")
            tar.extractall(dest, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise ConfigError(f"{archive} is not a run archive ({exc})") from exc
    return dest
