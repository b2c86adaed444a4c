"""The short text each MCP tool answers with, for the model to read beside the full JSON
(``structuredContent``): the recalled context block first, one line per write, a listing cut at
:data:`MAX_LISTED` rows. A tool without an entry in :data:`TEXTS` answers with its JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from deltamem.core.model import experience_from_dict
from deltamem.core.render import render_experience

MAX_LISTED = 50  # rows of a listing in the text for the model (structuredContent has all)


def recall_text(data: dict[str, Any]) -> str:
    """The context block, then one line per tree saying what matched."""
    lines = []
    for tree, label in (("task", "skill"), ("env", "knowledge")):
        t = data[tree]
        lines.append(f"{label}: {t['node']} (score {t['score']:.2f}, chain of "
                     f"{len(t['chain'])})" if t["matched"] else f"{label}: no match")
    head = data["context"] or "(no memory matched: proceed on your own, then call learn)"
    return head + "\n\n[" + "; ".join(lines) + "]"


def _write_text(tree: str, write: dict[str, Any]) -> str:
    if write["action"] == "dedup":
        return f"{tree}: already known ({write['node']}, counted)"
    where = f" under {write['parent']}" if write["parent"] else ""
    return f"{tree}: new {write['action']} {write['node']}{where}"


def _compiled(data: dict[str, Any]) -> str:
    return "".join(f"; compiled {c['source']} into root {c['root']}"
                   for c in data["consolidated"] if c["root"] is not None)


def json_text(data: dict[str, Any]) -> str:
    """The JSON itself, cut at 4,000 characters."""
    return json.dumps(data, ensure_ascii=False)[:4000]


def _show_text(data: dict[str, Any]) -> str:
    body = render_experience(experience_from_dict(data["experience"]))
    return (f"{data['id']}: {data['tree']} {data['kind']} ({data['outcome']}), chain "
            f"{' > '.join(data['chain'])}\n{body}")


def _list_text(data: dict[str, Any]) -> str:
    rows = data["nodes"][:MAX_LISTED]
    lines = [f"{r['id']}  {r['tree']} {r['kind']} {r['outcome']}  {r['key'][:80]}" for r in rows]
    left = data["total"] - len(rows)
    return ("\n".join(lines) or "no nodes") + (f"\n... {left} more" if left else "")


def _consolidate_text(data: dict[str, Any]) -> str:
    done = data["consolidated"]
    verb = "due" if data["dry_run"] else "compiled"
    return f"{len(done)} chain(s) {verb}" + "".join(
        f"\n{c['source']} ({c['tree']}, chain of {len(c['chain'])})"
        + (f" -> {c['root']}" if c["root"] else "") for c in done)


def _stats_text(data: dict[str, Any]) -> str:
    return (f"{data['episodes']} episode(s); task tree {data['task']['nodes']} node(s) "
            f"({data['task']['roots']} roots, {data['task']['failures']} failure lessons); "
            f"env tree {data['env']['nodes']} node(s); stored {data['stored_chars']} chars "
            f"vs flat {data['flat_chars']}")


TEXTS: dict[str, Callable[[dict[str, Any]], str]] = {
    "recall": recall_text,
    "learn": lambda data: (f"learned episode {data['episode']}: "
                           f"{_write_text('task', data['task'])}; "
                           f"{_write_text('env', data['env'])}{_compiled(data)}"),
    "record_outcome": lambda data: (
        f"counted a {'success' if data['success'] else 'failure'} on "
        f"{', '.join(data['nodes']) or 'no node (nothing matched)'}{_compiled(data)}"),
    "show": _show_text,
    "list_nodes": _list_text,
    "consolidate": _consolidate_text,
    "stats": _stats_text,
    "correct": lambda data: (f"corrected {data['of']} ({data['kind']}): {data['node']} now "
                             "supersedes it"),
    "delete": lambda data: f"deleted {len(data['deleted'])} node(s)",
    "export_skills": lambda data: (f"wrote {len(data['skills'])} skill file(s) and "
                                   f"{len(data['knowledge'])} knowledge file(s) to "
                                   f"{data['dir']}"),
}
