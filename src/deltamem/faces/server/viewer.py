"""The tree viewer: both residual trees of a space as one self-contained HTML page.

The page (``viewer.html``, inline CSS and JS, no network) receives the nodes as JSON inside a
``<script type="application/json">`` element. Every ``<``, ``>`` and ``&`` in that JSON is
written as a ``\\uXXXX`` escape, so no node text can close the element or open a comment.
"""

from __future__ import annotations

import html
import json
import time
from importlib import resources
from typing import Any

from deltamem.core.delta import apply
from deltamem.core.model import Experience, Node, experience_to_dict
from deltamem.core.render import render_experience, render_patch
from deltamem.core.tree import compose_chain
from deltamem.engine.memory import DeltaMem
from deltamem.engine.results import node_summary, patch_json
from deltamem.errors import PatchError, StoreError

_PLACEHOLDER = "/*__DELTAMEM_DATA__*/"


def viewer_data(mem: DeltaMem) -> dict[str, Any]:
    """The JSON the page renders: the space, its stats, and every node with its composition."""
    nodes = list(mem.nodes())
    by_id = {n.id: n for n in nodes}
    composed: dict[str, Experience] = {}
    rows = []
    for node in nodes:  # insertion order: parents come before their children
        experience = _compose(node, by_id, composed)
        base = composed.get(node.parent_id) if node.parent_id else None
        rows.append(_node_row(node, experience, base))
    return {"space": mem.space, "generated_at": time.time(), "stats": mem.stats().wire(),
            "nodes": rows}


def _compose(node: Node, by_id: dict[str, Node], cache: dict[str, Experience]) -> Experience:
    parent = cache.get(node.parent_id) if node.parent_id else None
    if node.content is not None:
        experience = node.content
    elif parent is not None:
        # One patch on top of the parent's cached composition, not the whole chain again.
        experience = apply(parent, node.patch or ())
    else:
        try:
            experience = compose_chain(_chain(node, by_id))
        except PatchError as exc:
            raise StoreError(f"node {node.id!r} does not compose ({exc}); run `deltamem "
                             "check`") from exc
    cache[node.id] = experience
    return experience


def _chain(node: Node, by_id: dict[str, Node]) -> list[Node]:
    """``node``'s chain, root first; a parent cycle (damage already stored) is a StoreError."""
    chain = [node]
    seen = {node.id}
    while chain[-1].parent_id and chain[-1].parent_id in by_id:
        parent = by_id[chain[-1].parent_id]
        if parent.id in seen:
            raise StoreError(f"node {node.id!r} is in a parent cycle (through {parent.id!r}); "
                             "run `deltamem check`")
        seen.add(parent.id)
        chain.append(parent)
    return chain[::-1]


def _node_row(node: Node, experience: Experience, base: Experience | None) -> dict[str, Any]:
    patch_text = None
    if node.patch is not None and base is not None:
        patch_text = render_patch(node.patch, base)
    return {
        "id": node.id, "tree": node.tree.value, "kind": node.kind.value,
        "outcome": node.outcome.value, "parent": node.parent_id, "key": node.key,
        "experience": experience_to_dict(experience),
        "experience_text": render_experience(experience),
        "patch": patch_json(node),
        "patch_text": patch_text,
        "stats": node_summary(node).wire(),
    }


def embed_json(data: Any) -> str:
    """JSON safe to place inside an HTML ``<script>`` element (no ``<``, ``>`` or ``&``)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_viewer(mem: DeltaMem) -> str:
    """One self-contained HTML page showing both trees of ``mem``'s space."""
    template = resources.files("deltamem.faces.server").joinpath("viewer.html").read_text("utf-8")
    page = template.replace("__DELTAMEM_TITLE__", html.escape(f"deltamem - {mem.space}"))
    return page.replace(_PLACEHOLDER, embed_json(viewer_data(mem)))
