"""Every file a page of the docs or the README names exists: a relative link, a path from the
repository root (``benchmarks/e2e.py``) or a module path inside the package
(``engine/memory.py``). mkdocs checks links between pages; this checks the rest."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "deltamem"
PAGES = (*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md")
# Paths of an example project in the prose, not of this repository.
EXAMPLES = {"src/cart.py"}
_CODE = re.compile(r"`([^`\s]+)`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_PLACEHOLDER = re.compile(r"[<>*{}]|(^|/)[A-Z_]+(/|$)")  # results/NAME/..., <space>, *.md


def named_paths(text: str, tops: set[str], folders: set[str]) -> set[str]:
    """The repository paths ``text`` names in code spans: those starting with a top-level
    entry of the repository, and ``<package folder>/...`` as ``src/deltamem/<folder>/...``."""
    out = set()
    for raw in _CODE.findall(text):
        path = re.sub(r":\d+(-\d+)?$", "", raw.split("::")[0].split("#")[0].rstrip(".,;:"))
        first = path.split("/")[0]
        if "/" not in path or path in EXAMPLES or _PLACEHOLDER.search(path):
            continue
        if first in tops:
            out.add(path)
        elif first in folders:
            out.add(f"src/deltamem/{path}")
    return out


def missing(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    tops = {p.name for p in ROOT.iterdir() if not p.name.startswith(".")}
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    gone = [path for path in sorted(named_paths(text, tops, folders))
            if not (ROOT / path).exists() and not (ROOT / f"{path}.py").exists()]
    for link in _LINK.findall(text):
        target = link.split("#")[0]
        if target and not re.match(r"[a-z][a-z0-9+.-]*:", target) \
                and not (page.parent / target).exists():
            gone.append(link)
    return gone


def test_every_path_the_docs_name_exists():
    found = {page.name: gone for page in PAGES if (gone := missing(page))}
    assert found == {}


def test_the_check_sees_a_path_that_is_gone(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("See `benchmarks/no_such.py`, `engine/no_such.py`, `engine/memory.py`, "
                    "`results/NAME/registration.json` and [x](no-such.md).\n")
    assert missing(page) == ["benchmarks/no_such.py", "src/deltamem/engine/no_such.py",
                             "no-such.md"]


NUMBERS = {w: n for n, w in enumerate(("zero", "one", "two", "three", "four", "five", "six",
                                        "seven", "eight", "nine", "ten", "eleven", "twelve"))}
NUMBERS |= {f"twenty-{w}" if n else "twenty": 20 + n for w, n in list(NUMBERS.items())[:10]}


def test_the_architecture_page_counts_right():
    """The core's size (``about N lines in K modules``, within a tenth) and the number of the
    store contract's operations are the code's."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    stated = re.search(r"about ([\d,]+) lines in (\w+)\s+modules", text)
    assert stated is not None
    modules = [p for p in (PACKAGE / "core").glob("*.py") if p.name != "__init__.py"]
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in modules)
    assert NUMBERS[stated[2]] == len(modules)
    assert abs(int(stated[1].replace(",", "")) - lines) <= lines / 10, lines
    contract = re.search(r"abstract base class of ([\w-]+) operations", text)
    assert contract is not None
    base = (PACKAGE / "store" / "base.py").read_text(encoding="utf-8")
    assert NUMBERS[contract[1]] == base.count("@abstractmethod")


# Markdown files the product reads or writes in an agent's folders, and one a benchmark writes
# (benchmarks/fuzz_faces.py), not files of this repository.
NOT_PAGES = {"SKILL.md", "MEMORY.md", "AGENTS.md", "CLAUDE.md", "outside.md"}
# Generators of labelled coding sessions: the files their transcripts name (a repository's
# README.md, a fixture) are data of those sessions, not pages of this repository.
TRANSCRIPT_DATA = "coding_sessions"


def test_every_page_the_code_cites_exists():
    """A docstring or comment that sends the reader to a page (``docs/serving.md``,
    ``DESIGN.md §5``) names a page this repository has."""
    pages = {p.name for p in ROOT.rglob("*.md")
             if not {".git", ".venv", "node_modules"} & set(p.parts)}
    cited = {(str(path.relative_to(ROOT)), name)
             for folder in ("src", "bench/src", "benchmarks", "scripts")
             for path in sorted((ROOT / folder).rglob("*.py"))
             if not path.parent.name.startswith(TRANSCRIPT_DATA)
             for name in re.findall(r"[\w./-]+\.md\b", path.read_text(encoding="utf-8"))}
    assert sorted((where, name) for where, name in cited
                  if Path(name).name not in pages | NOT_PAGES) == []
