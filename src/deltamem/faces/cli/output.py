"""What the CLI shows besides its results: progress on stderr, and ``show`` in words.

Progress appears only when stderr is a terminal and the command was not asked for ``--json``;
piped or captured, a command prints nothing but its result (and errors).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

from deltamem.core.delta import compose
from deltamem.core.model import Node
from deltamem.core.render import render_experience, render_patch

Advance = Callable[..., None]


def _nothing(*_: Any, **__: Any) -> None:
    return None


@contextmanager
def progress(console: Console, label: str, *, total: float | None = None,
             quiet: bool = False, unit: str = "") -> Iterator[Advance]:
    """A transient progress display on ``console`` (stderr) while the block runs; yields
    ``advance(n=1)``. With ``total`` it is a bar; without, a spinner with the count so far (when
    ``unit`` names what is counted) and the elapsed time. Nothing is shown when ``quiet`` or when
    ``console`` is not a terminal."""
    if quiet or not console.is_terminal:
        yield _nothing
        return
    columns: list[ProgressColumn | str] = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), TaskProgressColumn()]
    elif unit:
        columns.append(TextColumn(f"{{task.completed:.0f}} {unit}"))
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(label, total=total)

        def advance(n: float = 1) -> None:
            bar.advance(task, n)

        yield advance


def counted_lines(lines: Iterable[str], advance: Advance) -> Iterator[str]:
    """``lines``, advancing by each line's size in bytes (for a bar over a file's size)."""
    for line in lines:
        advance(len(line.encode("utf-8")))
        yield line


def show_text(chain: list[Node], data: dict[str, Any]) -> str:
    """A node as ``deltamem show`` prints it: what it is, its counters, its chain, the composed
    experience in words and, for a delta, the change from its parent in words."""
    node = chain[-1]
    stats = data["stats"]
    counters = ", ".join(f"{k} {stats[k]}" for k in ("hits", "successes", "failures")
                         if k in stats)
    lines = [f"{node.id}  {node.tree.value} {node.kind.value} ({node.outcome.value}), "
             f"depth {node.depth}" + (f"; {counters}" if counters else ""),
             f"key: {node.key}",
             f"chain: {' > '.join(n.id for n in chain)}"]
    if data.get("children"):
        lines.append(f"children: {', '.join(data['children'])}")
    root = chain[0].content
    assert root is not None
    composed = compose(root, [n.patch for n in chain[1:]])
    lines += ["", render_experience(composed)]
    if not node.is_root:
        parent = compose(root, [n.patch for n in chain[1:-1]])
        change = render_patch(node.patch, parent)
        lines += ["", "Change from its parent:", change or "(none)"]
    return "\n".join(lines)
