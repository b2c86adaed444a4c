"""The layer rule, read off the code's own imports (an AST scan of every module of deltamem).

Layers, top to bottom (docs/architecture.md draws them); the folders of ``src/deltamem`` are
the layers::

    faces      the package root (the curated public surface), __main__, faces/ (cli/, server/,
               skills, worker), integrations/, client; deltamem_hook, the hook client; and
               deltamem_launch, the ``deltamem`` command's entry point
    engine     engine/ (memory: the DeltaMem facade; read, write, consolidate, aio, results,
               reports, calibrate, corrections)
    extraction extract/ (what an episode teaches), testing/ (the conformance suite, doubles)
    io         store/ (with transfer and scrub), embed/, llm/, formats/ (episodes,
               transcripts, api, operations)
    settings   config
    domain     scenes/ (what a domain knows of its scenes), privacy/ (redact)
    core       core/ (pure rules)
    ground     errors, _util/ (usage, jsonsafe, telemetry, threads, extras)

A module may import its own layer and the layers below it, never one above; and no set of
modules may import each other in a circle. Every import counts, also one inside a function or
under ``TYPE_CHECKING``, and a module stand-in (``_util.lazymod.module("deltamem.x")``): a lazy
import is still a dependency, only a late one. The package root
holds only the modules users import by path (``ROOT``); everything else sits in a folder.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import deltamem

SRC = Path(deltamem.__file__).parent

LAYERS = ("ground", "core", "domain", "settings", "io", "extraction", "engine", "faces")
HOOK = SRC.parent / "deltamem_hook"  # the hook client, scanned with the package
LAUNCH = SRC.parent / "deltamem_launch"  # the command's entry point, scanned likewise
BESIDE = ("deltamem_hook", "deltamem_launch")  # the top-level packages beside deltamem

# Module-name prefix -> layer; the longest matching prefix wins. A new top-level module or
# package must be placed here (the test names the ones that are not).
PLACES: dict[str, str] = {
    "deltamem": "faces",
    "deltamem.__main__": "faces",
    "deltamem.faces": "faces",
    "deltamem.integrations": "faces",
    "deltamem.client": "faces",
    "deltamem.engine": "engine",
    "deltamem.extract": "extraction",
    "deltamem.testing": "extraction",
    "deltamem.store": "io",
    "deltamem.embed": "io",
    "deltamem.llm": "io",
    "deltamem.formats": "io",
    "deltamem.config": "settings",
    "deltamem.scenes": "domain",
    "deltamem.privacy": "domain",
    "deltamem.core": "core",
    "deltamem.errors": "ground",
    "deltamem._util": "ground",
}
# Top-level names that must be placed explicitly (everything but the package root itself).
EXPLICIT = {p for p in PLACES if p.count(".") == 1}

# The modules at the package root: only what users import by path (``import deltamem``,
# ``python -m deltamem``, ``deltamem.errors``, ``deltamem.config``, ``deltamem.client``).
# Everything else lives in the folder of its layer.
ROOT = {"__init__.py", "__main__.py", "errors.py", "config.py", "client.py"}
# The folders at the package root, each on one floor.
FOLDERS = {"faces", "integrations", "engine", "store", "embed", "llm", "extract", "scenes",
           "formats", "privacy", "testing", "core", "_util"}


def modules(src: Path = SRC) -> dict[str, Path]:
    """Every module of the package under ``src`` (and of the hook client, beside the real
    package): dotted name -> file."""
    found = {}
    extra = [*sorted(HOOK.rglob("*.py")), *sorted(LAUNCH.rglob("*.py"))] if src == SRC else []
    for path in [*sorted(src.rglob("*.py")), *extra]:
        parts = list(path.relative_to(src.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def _stand_in(call: ast.Call) -> bool:
    """A ``module("deltamem.x")`` call of ``_util.lazymod``: an import made on first use."""
    func = call.func
    named = func.id if isinstance(func, ast.Name) else \
        func.attr if isinstance(func, ast.Attribute) else ""
    return named == "module" and len(call.args) == 1 and \
        isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """The deltamem modules ``name`` imports (anywhere in the file), with the line."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.Call) and _stand_in(node):
            targets = [node.args[0].value]  # type: ignore[attr-defined]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, module] if module else base)
            # ``from pkg import mod`` depends on the module, ``from pkg import name`` on pkg.
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module
                       for a in node.names]
        else:
            continue
        for target in targets:
            if target == "deltamem" or target.startswith(("deltamem.", *BESIDE)):
                resolved = _resolve(target, known)
                if resolved and resolved != name:
                    yield resolved, node.lineno


def graph(src: Path = SRC) -> dict[str, dict[str, int]]:
    """module -> {imported module: first line}."""
    known = modules(src)
    out: dict[str, dict[str, int]] = {}
    for name, path in known.items():
        edges: dict[str, int] = {}
        for target, line in imports(name, path, known):
            edges.setdefault(target, line)
        out[name] = edges
    return out


def layer_of(module: str) -> str | None:
    """The layer of ``module`` by its longest placed prefix (None: a top-level module that is
    on no floor of the map)."""
    if module.split(".")[0] in BESIDE:
        return "faces"
    top = ".".join(module.split(".")[:2])
    if module != "deltamem" and top not in EXPLICIT:
        return None
    best = max((p for p in PLACES if module == p or module.startswith(p + ".")), key=len)
    return PLACES[best]


def upward(edges: dict[str, dict[str, int]]) -> list[str]:
    """Every import from a lower layer into a higher one, as ``a:line -> b (low -> high)``."""
    found = []
    for module, targets in sorted(edges.items()):
        here = layer_of(module)
        for target, line in sorted(targets.items()):
            there = layer_of(target)
            if here is None or there is None:
                continue
            if LAYERS.index(there) > LAYERS.index(here):
                found.append(f"{module}:{line} -> {target} ({here} -> {there})")
    return found


def circles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The import circles: strongly connected sets of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_every_module_is_on_the_map():
    """A new top-level module or package has to be given a layer here (and in the docs)."""
    unplaced = sorted(m for m in graph() if layer_of(m) is None)
    assert unplaced == [], f"modules on no layer: {unplaced}"


def test_the_root_holds_only_the_public_paths_and_the_layer_folders():
    """The tree shows the layers: a module at the package root is one users import by path, and
    every folder is on one floor (the flat root of 27 modules from four layers fails here)."""
    files = {p.name for p in SRC.glob("*.py")}
    folders = {p.name for p in SRC.iterdir() if (p / "__init__.py").exists()}
    assert files == ROOT
    assert folders == FOLDERS
    assert {f"deltamem.{name.removesuffix('.py')}" for name in files - {"__init__.py"}} \
        | {f"deltamem.{name}" for name in folders} == EXPLICIT


def test_nothing_imports_upward():
    """faces -> engine -> adapters -> core -> ground: an import only ever points down."""
    assert upward(graph()) == []


def test_the_floors_are_real():
    """Each floor of the adapters that once shared one layer imports only below itself: the
    store no longer reaches formats (transfer moved in), the reference store no longer reaches
    the SQL base (chains_from is core), and the hook client and the launcher are scanned too."""
    edges = graph()
    assert "deltamem_hook" in edges
    assert "deltamem.faces.server.mcp_serve" in edges["deltamem_launch"]
    assert "deltamem.store.sql" not in edges["deltamem.store.memory"]
    assert not [t for t in edges["deltamem.store.copy"] if t.startswith("deltamem.formats")]


def test_no_import_circles():
    """No set of modules imports each other round in a circle (lazy imports included). The hook
    client's slow path runs the daemon module in a child process (``hookd --cold``), so the
    client never imports it."""
    found = circles(graph())
    edges = graph()
    described = [" <-> ".join(f"{a} ({', '.join(f'{b}:{edges[a][b]}' for b in c if b in edges[a])})"
                              for a in c) for c in found]
    assert found == [], f"import circles: {described}"


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A ``deltamem`` package under ``tmp_path`` holding ``files`` (path in the package ->
    text), each folder a package."""
    pkg = tmp_path / "deltamem"
    (pkg).mkdir()
    (pkg / "__init__.py").write_text("")
    for name, text in files.items():
        path = pkg / name
        for folder in reversed(path.relative_to(pkg).parents[:-1]):
            (pkg / folder).mkdir(exist_ok=True)
            (pkg / folder / "__init__.py").write_text("")
        path.write_text(text)
    return pkg


def test_the_scan_sees_upward_imports_and_circles(tmp_path):
    """The checks above would fail on a tree with the defect (the one the core had: a lazy
    import of deltamem.formats.transcripts inside core/model.py, which imports the core)."""
    edges = graph(_package(tmp_path, {
        "core/model.py": "def from_messages():\n    from deltamem.formats.transcripts import "
                         "read\n    return read()\n",
        "formats/transcripts.py": "from deltamem.core.model import from_messages\n"
                                  "def read():\n    return 1\n"}))
    assert upward(edges) == [
        "deltamem.core.model:2 -> deltamem.formats.transcripts (core -> io)"]
    assert circles(edges) == [["deltamem.core.model", "deltamem.formats.transcripts"]]


def test_the_scan_sees_a_module_stand_in(tmp_path):
    """A ``_util.lazymod`` stand-in is an import the AST holds only as a string: it counts."""
    edges = graph(_package(tmp_path, {
        "_util/lazymod.py": "def module(name): ...\n",
        "engine/results.py": "from deltamem.engine.working import Match\n",
        "engine/working.py": "from deltamem._util.lazymod import module\n"
                             "results = module('deltamem.engine.results')\nclass Match: ...\n",
        "core/model.py": "from deltamem._util import lazymod\n"
                         "engine = lazymod.module('deltamem.engine.working')\n"}))
    assert edges["deltamem.engine.working"] == {"deltamem._util.lazymod": 1,
                                                "deltamem.engine.results": 2}
    assert upward(edges) == [
        "deltamem.core.model:2 -> deltamem.engine.working (core -> engine)"]
    assert circles(edges) == [["deltamem.engine.results", "deltamem.engine.working"]]


def test_the_scan_reads_relative_and_from_package_imports(tmp_path):
    pkg = tmp_path / "deltamem"
    (pkg / "store").mkdir(parents=True)
    (pkg / "engine").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("")
    (pkg / "store" / "__init__.py").write_text("from . import base\n")
    (pkg / "store" / "base.py").write_text(
        "from deltamem import errors\nfrom ..engine import memory\n")
    (pkg / "engine" / "__init__.py").write_text("")
    (pkg / "engine" / "memory.py").write_text("import deltamem.store.base\n")
    edges = graph(pkg)
    assert edges["deltamem.store"] == {"deltamem.store.base": 1}
    assert edges["deltamem.store.base"] == {"deltamem.errors": 1, "deltamem.engine.memory": 2}
    assert upward(edges) == [
        "deltamem.store.base:2 -> deltamem.engine.memory (io -> engine)"]
    assert circles(edges) == [["deltamem.engine.memory", "deltamem.store.base"]]


def test_the_architecture_map_names_every_module():
    """docs/architecture.md names every top-level module and package of the library, every
    folder by its path (``faces/cli/``), and every module in them by its file name."""
    doc = (SRC.parents[1] / "docs" / "architecture.md").read_text()
    missing = []
    for name, path in modules().items():
        parts = name.split(".")
        if len(parts) == 1:
            continue
        if path.name == "__init__.py":  # a package: its path, ``faces/server/``
            token = "/".join(parts[1:]) + "/"
        else:
            token = path.name if len(parts) > 2 else parts[1]
        if not re.search(rf"(?<![\w.]){re.escape(token)}(?![\w])", doc):
            missing.append(name)
    assert missing == []
