"""Redaction of stored and imported records (see :mod:`deltamem.privacy.redact` for the rules).

A delta node stores a patch against its parent's composed experience, with positions counted in
the parent's words; redacting a patch's text alone could shift those positions. So a chain is
rewritten whole: each node's composed experience is redacted, and its patch is recomputed as the
diff from its (redacted) parent's experience. Chains compose exactly as before, minus secrets.

* :func:`redact_records` -- export records (``DeltaMem.import_records``) before they are loaded;
* :func:`scrub_space` -- every node and episode of a space rewritten in one write transaction;
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from deltamem.core.delta import PatchError, apply, diff, patch_from_json, patch_to_json
from deltamem.core.model import Experience, Node, experience_from_dict, experience_to_dict
from deltamem.privacy.redact import redact, redact_experience, redact_value
from deltamem.store.base import EpisodeRecord, Store

ParentLookup = Callable[[str], Experience | None]


def redact_records(records: Iterable[dict[str, Any]],
                   stored: ParentLookup) -> list[dict[str, Any]]:
    """Export records (header first) with every text redacted; ``stored`` gives the composed
    experience of a parent the space already holds. A record that cannot be read is passed on
    as it is, for the import's verifier to refuse with its own message."""
    out: list[dict[str, Any]] = []
    original: dict[str, Experience] = {}
    cleaned: dict[str, Experience] = {}
    for i, record in enumerate(records):
        if i == 0 or not isinstance(record, dict):
            out.append(record)
            continue
        if record.get("record") == "episode":
            record = {k: (redact_value(v) if k in ("task", "env", "steps", "meta", "result")
                          else v) for k, v in record.items()}
        elif record.get("record") == "node":
            record = _node_record(record, original, cleaned, stored)
        out.append(record)
    return out


def _node_record(record: dict[str, Any], original: dict[str, Experience],
                 cleaned: dict[str, Experience], stored: ParentLookup) -> dict[str, Any]:
    record = dict(record)
    try:
        node_id = str(record["id"])
        if isinstance(record.get("content"), dict):
            before = experience_from_dict(record["content"])
            after = redact_experience(before)
            record["content"] = experience_to_dict(after)
        else:
            parent = str(record["parent_id"])
            if parent not in original:
                found = stored(parent)
                if found is None:
                    raise KeyError(parent)
                original[parent] = cleaned[parent] = found
            before = apply(original[parent], patch_from_json(record["patch"]))
            after = redact_experience(before)
            record["patch"] = patch_to_json(diff(cleaned[parent], after))
        original[node_id], cleaned[node_id] = before, after
    except (KeyError, TypeError, ValueError, PatchError):
        return record  # malformed: the verifier names it
    if isinstance(record.get("key"), str):  # a missing or bad key: the verifier names it
        record["key"] = redact(record["key"])
    if isinstance(record.get("meta"), dict):
        record["meta"] = redact_value(record["meta"])
    return record


def redacted_nodes(nodes: Iterable[Node]) -> list[Node]:
    """Nodes in insertion order (parents first) with keys, meta and experiences redacted and
    each delta's patch recomputed against its redacted parent."""
    return [node for node, _ in composed_nodes(nodes)]


def composed_nodes(nodes: Iterable[Node], stored: ParentLookup | None = None, *,
                   redacting: bool = True) -> list[tuple[Node, Experience]]:
    """Nodes (parents first) with their composed experiences; with ``redacting``, keys, meta
    and experiences redacted and each delta's patch recomputed against its redacted parent.
    A delta's parent is an earlier node or, through ``stored``, one the space holds (its
    stored experience, already redacted).

    Raises:
        KeyError: a delta whose parent is neither an earlier node nor stored (its id).
    """
    original: dict[str, Experience] = {}
    cleaned: dict[str, Experience] = {}
    out = []
    for node in nodes:
        if node.content is not None:
            before = node.content
            after = redact_experience(before) if redacting else before
            new = replace(node, content=after)
        else:
            parent = node.parent_id
            assert parent is not None
            if parent not in original:
                found = stored(parent) if stored is not None else None
                if found is None:
                    raise KeyError(parent)
                original[parent] = cleaned[parent] = found
            before = apply(original[parent], node.patch)
            after = redact_experience(before) if redacting else before
            new = replace(node, patch=diff(cleaned[parent], after)) if redacting else node
        original[node.id], cleaned[node.id] = before, after
        if redacting:
            new = replace(new, key=redact(node.key), meta=redact_value(dict(node.meta)))
        out.append((new, after))
    return out


def redacted_episode(record: EpisodeRecord) -> EpisodeRecord:
    return replace(record, task=redact(record.task), env=redact(record.env),
                   steps=redact_value(record.steps), meta=redact_value(record.meta),
                   result=redact_value(record.result))


def scrub_space(store: Store, space: str,
                embed: Callable[[list[str]], list[Any]] | None) -> dict[str, int]:
    """Rewrite every node and episode of ``space`` redacted, in one write transaction (ids,
    counters and tree shape kept; a node whose key changed gets the new key's vector from
    ``embed``, or keeps its vector when ``embed`` is None). Returns how many nodes and
    episodes changed."""
    with store.write(space):
        nodes = list(store.nodes(space))
        episodes = list(store.episodes(space))
        vectors = store.vectors(space, [n.id for n in nodes])
        new_nodes = redacted_nodes(nodes)
        new_episodes = [redacted_episode(e) for e in episodes]
        changed_nodes = [b for a, b in zip(nodes, new_nodes, strict=True) if _node_changed(a, b)]
        changed_episodes = sum(1 for a, b in zip(episodes, new_episodes, strict=True) if a != b)
        if not changed_nodes and not changed_episodes:
            return {"nodes": 0, "episodes": 0}
        rekeyed = [b for a, b in zip(nodes, new_nodes, strict=True) if a.key != b.key]
        if rekeyed and embed is not None:
            for node, vector in zip(rekeyed, embed([n.key for n in rekeyed]), strict=True):
                vectors[node.id] = vector
        store.forget_space(space)
        for node in new_nodes:
            store.add_node(space, node, vectors[node.id])
        for episode in new_episodes:
            store.add_episode(space, episode)
    return {"nodes": len(changed_nodes), "episodes": changed_episodes}


def _node_changed(a: Node, b: Node) -> bool:
    return (a.key, a.content, a.meta) != (b.key, b.content, b.meta) or \
        (a.patch is not None and patch_to_json(a.patch) != patch_to_json(b.patch))
