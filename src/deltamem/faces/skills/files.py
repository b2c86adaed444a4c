"""What both skill-file layouts share: slugs, YAML front matter, reading files from a folder
someone else may control, writing into one without following its links, and the one write of
what was read (through :meth:`DeltaMem.add_nodes`, which redacts and embeds).

Reading refuses a symbolic link, anything that is not a regular file (a FIFO, a device, a
socket) and a file over :func:`max_bytes` (``DELTAMEM_SKILL_MAX_BYTES``, default 1 MiB); a
folder walk never enters a linked folder. Writing opens every folder on the way below the
export folder without following a link, refuses a link in place of a folder or file, and
replaces each file by renaming a new one over it (never writing through an existing file).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from deltamem.core.delta import diff
from deltamem.core.model import Experience, Node, NodeKind, Outcome, Tree
from deltamem.engine.consolidate import new_node_id
from deltamem.engine.memory import DeltaMem
from deltamem.errors import ConfigError
from deltamem.faces.env import skill_max_bytes

KNOWLEDGE_DIR = "knowledge"
MAX_BYTES = 1 << 20  # a skill file larger than this is refused (DELTAMEM_SKILL_MAX_BYTES)
_SLUG = re.compile(r"[^a-z0-9]+")
_MAX_SLUG = 60


def slugify(text: str) -> str:
    """A lowercase, hyphenated folder name (``"skill"`` when nothing is left)."""
    slug = _SLUG.sub("-", text.lower()).strip("-")[:_MAX_SLUG].strip("-")
    return slug or "skill"


def unique(slug: str, taken: dict[str, int]) -> str:
    """The first of ``slug``, ``slug-2``, ``slug-3``, ... not in ``taken`` (names given so far,
    each with the next suffix to try for it), recorded: names are never freed, so the search
    for a name asked again starts where the last one stopped (linear in the names, where
    trying every suffix from 2 was quadratic in the names sharing one slug)."""
    n = taken.get(slug)
    if n is None:
        taken[slug] = 2
        return slug
    candidate = f"{slug}-{n}"
    while candidate in taken:
        n += 1
        candidate = f"{slug}-{n}"
    taken[slug] = n + 1
    taken[candidate] = 2
    return candidate


def one_line(text: str, limit: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# -- reading ----------------------------------------------------------------------------------
def max_bytes() -> int:
    """The largest skill file read, in bytes (``DELTAMEM_SKILL_MAX_BYTES``, default 1 MiB)."""
    return skill_max_bytes(default=MAX_BYTES)


def read_text(path: Path) -> str:
    """A skill file's text: a regular file (not a link, FIFO or device) of at most
    :func:`max_bytes`, in UTF-8 (a leading BOM dropped).

    Raises:
        ConfigError: what the file is instead, or that it is too large or not UTF-8.
    """
    limit = max_bytes()
    try:  # O_NONBLOCK: opening a FIFO never waits for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(path):
            raise ConfigError(f"{path}: is a symbolic link; skill files are read only from "
                              "regular files (copy the file in)") from None
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{path}: is not a regular file (a FIFO, device, socket or "
                              "folder); refusing to read it")
        if st.st_size > limit:
            raise ConfigError(f"{path}: {st.st_size} bytes is over the {limit}-byte limit for "
                              "a skill file (DELTAMEM_SKILL_MAX_BYTES)")
        data = _read_at_most(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ConfigError(f"{path}: over the {limit}-byte limit for a skill file")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _read_at_most(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def find_files(base: Path, name: str | None = None, suffix: str = "") -> list[Path]:
    """Files under ``base`` called ``name`` (or ending in ``suffix``), sorted; linked folders
    are not entered (a link to a file is found, and refused when read)."""
    found = []
    for folder, dirs, files in os.walk(base, followlinks=False):
        dirs.sort()
        found += [Path(folder) / f for f in files
                  if (f == name if name is not None else f.endswith(suffix))]
        found += [Path(folder) / d for d in dirs if d == name]  # read, so refused clearly
    return sorted(found)


def front_matter(text: str, path: Path) -> tuple[dict[str, Any], str]:
    """The YAML front matter (keys lowercased) and the body after it.

    Raises:
        ConfigError: no front matter, front matter that is not a YAML mapping, or YAML too
            deeply nested to read.
    """
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise ConfigError(f"{path}: missing front matter (a '---' block with name/description)")
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() in ("---", "...")),
               None)
    if end is None:
        raise ConfigError(f"{path}: front matter is not closed with '---'")
    try:
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 2}" if where is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ConfigError(f"{path}: front matter is not valid YAML{at}: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{path}: front matter is nested too deeply to read") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise ConfigError(f"{path}: front matter must be 'key: value' lines (YAML mapping)")
    return {str(k).strip().lower(): v for k, v in meta.items()}, "\n".join(lines[end + 1:])


def with_front_matter(meta: dict[str, Any], body: str) -> str:
    """``body`` under a YAML front matter block (written by PyYAML, so any text reads back)."""
    head = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1 << 30)
    return f"---\n{head}---\n\n{body}"


def text_of(meta: dict[str, Any], key: str) -> str:
    value = meta.get(key)
    if value is None or isinstance(value, dict | list):
        return ""
    return str(value).strip()


# -- writing ----------------------------------------------------------------------------------
class Folder:
    """An export folder, written without following any link planted inside it."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def write(self, rel: str, text: str) -> None:
        """Write ``text`` to ``rel`` (slash-separated, below the root).

        Raises:
            ConfigError: a folder or file on the way is a symbolic link (or not a folder).
        """
        *folders, name = rel.split("/")
        with self._open_dirs(folders, rel) as fd:
            try:
                st = os.lstat(name, dir_fd=fd)
            except FileNotFoundError:
                st = None
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise ConfigError(f"refusing to write {self.root / rel}: it is a symbolic link "
                                  "or not a regular file")
            tmp = f".{name}.{os.getpid()}.{time.time_ns()}.tmp"
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                          | os.O_CLOEXEC, 0o644, dir_fd=fd)
            try:
                with os.fdopen(out, "w", encoding="utf-8") as handle:
                    handle.write(text)
                os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)  # never through a link
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=fd)
                raise

    @contextlib.contextmanager
    def _open_dirs(self, folders: list[str], rel: str) -> Iterator[int]:
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in folders:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                try:
                    child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                                    | os.O_CLOEXEC, dir_fd=fd)
                except OSError:  # ELOOP or ENOTDIR: a link or a file in a folder's place
                    raise ConfigError(f"refusing to write {self.root / rel}: {part!r} on the way "
                                      "is a symbolic link or not a folder") from None
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)


# -- the one write ----------------------------------------------------------------------------
@dataclass(slots=True)
class Entry:
    """One node read from a skill file."""

    path: Path
    tree: Tree
    key: str
    experience: Experience
    meta: dict[str, Any]
    node_id: str | None = None
    chain: tuple[str, ...] = ()
    outcome: Outcome = Outcome.SUCCESS
    counts: tuple[int, int, int] = (0, 0, 0)  # hits, successes, failures
    consolidated: bool = False
    lineage: tuple[str, ...] = ()
    created: float = 0.0


def source(path: Path) -> str:
    return path.name if path.name != "SKILL.md" else f"{path.parent.name}/SKILL.md"


def add_entries(mem: DeltaMem, entries: list[Entry]) -> dict[str, Any]:
    """Write the entries in one transaction through :meth:`DeltaMem.add_nodes` (redacted and
    embedded there), parents before children; what the space already holds is skipped.

    Raises:
        ConfigError: a delta whose parent is neither in the folder nor in the space, or a
            chain deeper than ``max_depth``; nothing is written.
    """
    held = {n.id for n in mem.nodes()}
    composed: dict[str, Experience] = {}
    depths: dict[str, int] = {}
    nodes: list[Node] = []
    paths: list[Path] = []
    for entry in sorted(entries, key=lambda e: (len(e.chain) > 1, e.created)):
        nodes.append(_entry_node(mem, entry, held, composed, depths))
        paths.append(entry.path)
    ids = mem.add_nodes(nodes)
    return {"imported": [i for i in ids if i is not None],
            "skipped": [str(p) for p, i in zip(paths, ids, strict=True) if i is None]}


def _entry_node(mem: DeltaMem, entry: Entry, held: set[str], composed: dict[str, Experience],
                depths: dict[str, int]) -> Node:
    """The node to store for ``entry`` (the facade skips it when the space holds it)."""
    meta = {"imported_from": source(entry.path), **entry.meta}
    counters: dict[str, Any] = {"hits": entry.counts[0], "successes": entry.counts[1],
                                "failures": entry.counts[2]}
    if entry.node_id is None:  # a hand-written root
        return Node(id=new_node_id(entry.tree), tree=entry.tree, kind=NodeKind.ROOT,
                    outcome=Outcome.SUCCESS, key=entry.key, content=entry.experience,
                    created_at=time.time(), meta=meta, **counters)
    node_id = entry.node_id
    if len(entry.chain) > mem.settings.max_depth:
        raise ConfigError(f"{entry.path}: a chain of {len(entry.chain)} nodes is deeper than "
                          f"max_depth {mem.settings.max_depth}")
    composed[node_id] = entry.experience
    common: dict[str, Any] = {"id": node_id, "tree": entry.tree, "outcome": entry.outcome,
                              "key": entry.key, "consolidated": entry.consolidated,
                              "lineage": entry.lineage,
                              "created_at": entry.created or time.time(), "meta": meta,
                              **counters}
    if len(entry.chain) == 1:
        depths[node_id] = 1
        return Node(kind=NodeKind.ROOT, content=entry.experience, **common)
    parent_id = entry.chain[-2]
    if parent_id not in composed and parent_id in held:
        parent = mem.get(parent_id)
        if parent.tree is entry.tree:
            composed[parent_id] = mem.experience(parent_id)
            depths[parent_id] = parent.depth
    if parent_id not in composed:
        raise ConfigError(f"{entry.path}: its parent {parent_id} is neither in the folder nor "
                          f"in space {mem.space!r} (export the whole memory again)")
    depths[node_id] = depths[parent_id] + 1
    return Node(kind=NodeKind.DELTA, parent_id=parent_id, depth=depths[node_id],
                patch=diff(composed[parent_id], entry.experience), **common)
