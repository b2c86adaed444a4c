"""The paper's baselines, re-implemented from their descriptions in the paper and its code.

* :class:`SynapseMemory` - whole successful trajectories as exemplars; top-1 by the paper's
  *specifier*, the task plus the first observation (:func:`key_score`).
* :class:`AWMMemory` - one workflow per task family, induced by the LLM from successes and merged
  on later successes; injected cut to 2000 characters.
* :class:`LongContextMemory` - no retrieval at all: every past trajectory (success or failure),
  newest first, until the context budget is full.
* :class:`ReasoningBankMemory` - up to 3 strategy items (title/description/content) extracted by
  the LLM from every episode, success or failure; top-1 entry by the same two-part key as
  Synapse (:func:`key_score`); cut to 3000 characters.

Each keeps its entries in memory and, given a ``path``, in a JSON file rewritten after every
update (so a resumed run continues from the same memory). Vectors are stored with the entries.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from deltamem import Usage
from deltamem.core.model import Episode
from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError, ExtractionError
from deltamem.extract.schemas import answer_schema
from deltamem.extract.structured import ask_structured
from deltamem.llm.base import LLM, Message
from deltamem_bench.agent import cut_text
from deltamem_bench.memories import Update

SYNAPSE_HEADER = ("Here is a past successful trajectory of a similar task. Use it as an example; "
                  "adapt names and locations to your task.")
AWM_HEADER = ("Here is a workflow induced from past successful episodes of this kind of task. "
              "Follow its steps, filling in the names of your task.")
RB_HEADER = ("Here are strategy notes distilled from a past episode of a similar task. Notes "
             "marked SUCCESS worked; notes marked FAILURE are warnings about what went wrong.")
AWM_MAX_CHARS = 2000
RB_MAX_CHARS = 3000
SYNAPSE_MAX_CHARS = 3000
_OBS_CHARS = 160  # observations in a flattened trajectory are cut to this many characters


def flatten_trajectory(episode: Episode, max_chars: int = SYNAPSE_MAX_CHARS) -> str:
    """An episode as ICL-style text: the task, then ``> action`` / observation lines."""
    lines = [f"Task: {episode.task.strip()}"]
    for step in episode.steps:
        obs = " ".join(step.observation.split())
        if len(obs) > _OBS_CHARS:
            obs = obs[: _OBS_CHARS - 3] + "..."
        lines.append(f"Action: {step.action}\nObservation: {obs}")
    return _cap("\n".join(lines), max_chars)


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _load(path: Path | None) -> list[dict[str, Any]]:
    if path is None or not path.exists():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    entries: list[dict[str, Any]] = data["entries"]
    return entries


def _save(path: Path | None, kind: str, entries: list[dict[str, Any]]) -> None:
    if path is None:
        return
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({"kind": kind, "entries": entries}, ensure_ascii=False),
                   encoding="utf-8")
    tmp.replace(path)  # atomic: a crash never leaves half a memory file


def _trajectory_size(entries: list[dict[str, Any]]) -> dict[str, int]:
    return {"entries": len(entries), "chars": sum(len(e["trajectory"]) for e in entries)}


SCENE_CHARS = 1000  # the first observation keys an entry up to here (MiniLM reads ~256 pieces)
# The weight of the first observation's cosine beside the task's (:func:`key_score`). Chosen by
# leave-one-out retrieval among the warm entries' training-stream gold episodes (never an
# evaluation episode; benchmarks/baseline_keys.py): 0.1 keeps the task-only key's same-family
# rate (ALFWorld 0.625, ScienceWorld 0.925 against 0.90) while Coin Collector's 10 exemplars are
# no longer one (8 distinct nearest, task-only 2) nor Commonsense's 40 (27, task-only 2); an
# equal weight (1.0) let the room outvote the task on ScienceWorld (0.675).
SCENE_WEIGHT = 0.1


def scene_key(scene: str) -> str:
    """The first observation as it keys an entry: whitespace folded, cut to SCENE_CHARS."""
    return " ".join(scene.split())[:SCENE_CHARS]


def key_score(task_cos: np.ndarray, scene_cos: np.ndarray) -> np.ndarray:
    """The two-part retrieval key of Synapse and ReasoningBank: the task's cosine plus
    :data:`SCENE_WEIGHT` times the first observation's.

    Why: the paper keys Synapse by a *specifier*, the task with its state. A key on the task
    alone returns one entry for every episode where the task sentence is constant (TextWorld
    Commonsense and Coin Collector: heldout-1 showed ReasoningBank's one entry for all 40
    episodes); the start of the observation alone (200 characters, heldout-1's Synapse) is
    constant on Coin Collector too. Summed, the observation decides where the tasks tie and
    the task decides elsewhere.
    """
    return task_cos + SCENE_WEIGHT * scene_cos


def _key_vectors(embedder: Embedder, task: str, scene: str,
                 usage: Usage | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The embeddings of a task text and of its first observation (:func:`scene_key`)."""
    vectors = embedder.embed([task.strip(), scene_key(scene) or task.strip()])
    if usage is not None:
        usage.embed_calls += 1
        usage.embed_texts += 2
    return np.asarray(vectors[0], dtype=np.float32), np.asarray(vectors[1], dtype=np.float32)


def _top1(embedder: Embedder, task: str, scene: str, entries: list[dict[str, Any]],
          usage: Usage | None = None) -> tuple[int, float] | None:
    """Index and :func:`key_score` of the entry closest to ``(task, scene)``.

    Raises:
        ConfigError: an entry was written by a version without the scene key (a memory file
            of an older run; start the arm afresh).
    """
    if not entries or not task.strip():
        return None
    if any("scene_vector" not in e for e in entries):
        raise ConfigError("a baseline memory file holds entries without a scene key (written "
                          "before 2026-12-06); start this arm afresh")
    q_task, q_scene = _key_vectors(embedder, task, scene, usage)
    tasks = np.asarray([e["vector"] for e in entries], dtype=np.float32)
    scenes = np.asarray([e["scene_vector"] for e in entries], dtype=np.float32)
    scores = key_score(tasks @ q_task, scenes @ q_scene)
    best = int(np.argmax(scores))  # argmax keeps the earliest entry on ties
    return best, float(scores[best])


def _round(vector: np.ndarray) -> list[float]:
    return [round(float(x), 6) for x in vector]


def _entry_vectors(embedder: Embedder, task_text: str, scene: str,
                   usage: Usage) -> dict[str, list[float]]:
    """The stored key of an entry: ``vector`` (its task text) and ``scene_vector``."""
    task_vector, scene_vector = _key_vectors(embedder, task_text, scene, usage)
    return {"vector": _round(task_vector), "scene_vector": _round(scene_vector)}


def _account(usage: Usage, prompt_tokens: int, completion_tokens: int) -> None:
    usage.llm_calls += 1
    usage.prompt_tokens += prompt_tokens
    usage.completion_tokens += completion_tokens


class SynapseMemory:
    """Trajectory exemplars: only successes are stored, retrieved top-1 by the specifier, the
    task plus the first observation (:func:`key_score`)."""

    name = "synapse"

    def __init__(self, embedder: Embedder, path: Path | None = None) -> None:
        self.embedder = embedder
        self.path = path
        self.entries = _load(path)

    def context(self, task: str, scene: str, *, family: str = "") -> tuple[str, dict[str, Any]]:
        """The stored trajectory whose specifier is closest, flattened like an ICL example."""
        hit = _top1(self.embedder, task, scene, self.entries)
        if hit is None:
            return "", {"matched": False}
        index, score = hit
        text = f"{SYNAPSE_HEADER}\n{self.entries[index]['trajectory']}"
        return text, {"matched": True, "entry": index, "score": round(score, 4)}

    def update(self, episode: Episode, info: dict[str, Any]) -> Update:
        """Store the episode's trajectory if it succeeded."""
        usage = Usage()
        if not episode.success:
            return Update(usage, {"stored": False, "reason": "failure"})
        self.entries.append({"task": episode.task, "key": scene_key(episode.env),
                             "trajectory": flatten_trajectory(episode),
                             **_entry_vectors(self.embedder, episode.task, episode.env, usage)})
        _save(self.path, self.name, self.entries)
        return Update(usage, {"stored": True, "entry": len(self.entries) - 1})

    def size(self) -> dict[str, int]:
        """Stored trajectories and their characters."""
        return _trajectory_size(self.entries)

    def close(self) -> None:
        """Nothing open (the file is written on every update)."""


LONG_HEADER = ("Here are your past episodes, newest first, with their outcome. Learn from what "
               "worked and avoid what failed.")


class LongContextMemory:
    """The long-context baseline: all past trajectories in the prompt, newest first.

    Every episode is kept (flattened like Synapse's exemplars, with its outcome); ``context``
    takes them newest first while they fit ``budget_chars``, the same budget every memory gets.
    Nothing is retrieved, so this measures what a long prompt alone buys.
    """

    name = "long-context"

    def __init__(self, path: Path | None = None, *, budget_chars: int = 2400) -> None:
        self.path = path
        self.budget_chars = budget_chars
        self.entries = _load(path)

    def context(self, task: str, scene: str, *, family: str = "") -> tuple[str, dict[str, Any]]:
        """Past trajectories, newest first, as many as fit the budget (the newest cut to the
        budget when it alone is longer)."""
        parts: list[str] = []
        used = len(LONG_HEADER)
        for entry in reversed(self.entries):
            block = f"[{entry['outcome']}] {entry['trajectory']}"
            if used + len(block) + 2 > self.budget_chars:
                # Why: a trajectory longer than the whole budget (ScienceWorld's gold ones) must
                # not leave the prompt empty; the newest is shown cut, never none at all.
                if not parts and self.budget_chars - used - 2 > 3:
                    parts.append(cut_text(block, self.budget_chars - used - 2))
                break
            parts.append(block)
            used += len(block) + 2
        if not parts:
            return "", {"matched": False, "shown": 0}
        return LONG_HEADER + "\n\n" + "\n\n".join(parts), {"matched": True,
                                                          "shown": len(parts)}

    def update(self, episode: Episode, info: dict[str, Any]) -> Update:
        """Keep the episode, whatever its outcome."""
        self.entries.append({"task": episode.task,
                             "outcome": "SUCCESS" if episode.success else "FAILURE",
                             "trajectory": flatten_trajectory(episode)})
        _save(self.path, self.name, self.entries)
        return Update(Usage(), {"stored": True, "entry": len(self.entries) - 1})

    def size(self) -> dict[str, int]:
        """Stored trajectories and their characters."""
        return _trajectory_size(self.entries)

    def close(self) -> None:
        """Nothing open (the file is written on every update)."""


AWM_INDUCE = """You summarise how a task was solved into a reusable workflow.

Task: {task}
Successful trajectory:
{trajectory}

{existing}Write a workflow of 2 to 8 numbered steps that solves this kind of task. Replace \
specific object and place names by variables in angle brackets, e.g. <object>, <room>. \
Answer with the numbered steps only."""
AWM_EXISTING = ("Current workflow for this kind of task:\n{workflow}\n\nMerge what the new "
                "trajectory teaches into it without making it longer.\n\n")


class AWMMemory:
    """Agent Workflow Memory: one LLM-induced workflow per task family, from successes only."""

    name = "awm"

    def __init__(self, llm: LLM, path: Path | None = None, *, max_tokens: int = 256) -> None:
        self.llm = llm
        self.path = path
        self.max_tokens = max_tokens
        self.entries = _load(path)

    def _find(self, family: str) -> dict[str, Any] | None:
        return next((e for e in self.entries if e["family"] == family), None)

    def context(self, task: str, scene: str, *, family: str = "") -> tuple[str, dict[str, Any]]:
        """The workflow of ``family``, cut to 2000 characters."""
        entry = self._find(family)
        if entry is None:
            return "", {"matched": False, "family": family}
        text = f"{AWM_HEADER}\n{_cap(entry['workflow'], AWM_MAX_CHARS)}"
        return text, {"matched": True, "family": family}

    def update(self, episode: Episode, info: dict[str, Any]) -> Update:
        """On success, induce a workflow (or merge into the family's existing one)."""
        usage = Usage()
        family = str(episode.meta.get("task_name", ""))
        if not episode.success:
            return Update(usage, {"stored": False, "reason": "failure"})
        entry = self._find(family)
        existing = AWM_EXISTING.format(workflow=entry["workflow"]) if entry else ""
        prompt = AWM_INDUCE.format(task=episode.task.strip(),
                                   trajectory=flatten_trajectory(episode, 1500),
                                   existing=existing)
        messages: list[Message] = [{"role": "user", "content": prompt}]
        completion = self.llm.complete(messages, max_tokens=self.max_tokens)
        _account(usage, completion.prompt_tokens, completion.completion_tokens)
        workflow = completion.text.strip()
        if not workflow:
            # An empty induction is reported, and the old workflow kept, never replaced by junk.
            return Update(usage, {"stored": False, "reason": "empty model answer"})
        workflow = _cap(workflow, AWM_MAX_CHARS)
        if entry is None:
            self.entries.append({"family": family, "workflow": workflow, "merges": 0})
        else:
            entry["workflow"] = workflow
            entry["merges"] = int(entry["merges"]) + 1
        _save(self.path, self.name, self.entries)
        return Update(usage, {"stored": True, "family": family, "merged": entry is not None})

    def size(self) -> dict[str, int]:
        """Workflows and their characters."""
        return {"entries": len(self.entries),
                "chars": sum(len(e["workflow"]) for e in self.entries)}

    def close(self) -> None:
        """Nothing open (the file is written on every update)."""


class MemoryItem(BaseModel):
    """One ReasoningBank strategy item."""

    title: str = Field(min_length=1, max_length=120)
    description: str = Field(min_length=1, max_length=300)
    content: str = Field(min_length=1, max_length=600)


class MemoryItems(BaseModel):
    """What the extractor answers: at most three items."""

    items: list[MemoryItem] = Field(min_length=1, max_length=3)


def items_schema() -> dict[str, Any]:
    """The structured-output schema of :class:`MemoryItems`: one to three objects, each with
    the library's schema of a :class:`MemoryItem` (the library's own answers hold only text, so
    the list of objects is built here)."""
    return {"type": "object",
            "properties": {"items": {"type": "array", "items": answer_schema(MemoryItem),
                                     "maxItems": 3, "minItems": 1}},
            "required": ["items"], "additionalProperties": False}


RB_EXTRACT = """Study this {outcome} attempt at a task and write at most 3 short, reusable \
strategy notes for similar tasks{why}.

Task: {task}
Trajectory:
{trajectory}

Answer with a JSON object: {{"items": [{{"title": "...", "description": "one sentence", \
"content": "the strategy"}}]}}"""


class ReasoningBankMemory:
    """ReasoningBank: LLM-distilled strategy items from successes and failures.

    Each episode becomes one entry (its items), keyed by the task plus the items' titles and
    descriptions and by the episode's first observation; retrieval returns the single closest
    entry by the two-part key (:func:`key_score`; before 2026-12-06 by the task text alone, one
    entry for all 40 Commonsense warm episodes of heldout-1).
    """

    name = "reasoningbank"

    def __init__(self, llm: LLM, embedder: Embedder, path: Path | None = None, *,
                 max_tokens: int = 384, retries: int = 1) -> None:
        self.llm = llm
        self.embedder = embedder
        self.path = path
        self.max_tokens = max_tokens
        self.retries = retries
        self.entries = _load(path)

    def context(self, task: str, scene: str, *, family: str = "") -> tuple[str, dict[str, Any]]:
        """The closest entry's items, tagged SUCCESS/FAILURE, cut to 3000 characters."""
        hit = _top1(self.embedder, task, scene, self.entries)
        if hit is None:
            return "", {"matched": False}
        index, score = hit
        entry = self.entries[index]
        tag = "[SUCCESS]" if entry["success"] else "[FAILURE]"
        body = "\n".join(f"{tag} {item['title']}: {item['description']}\n  {item['content']}"
                         for item in entry["items"])
        text = _cap(f"{RB_HEADER}\n{body}", RB_MAX_CHARS)
        return text, {"matched": True, "entry": index, "score": round(score, 4)}

    def update(self, episode: Episode, info: dict[str, Any]) -> Update:
        """Extract up to 3 items from the episode and store them as one entry."""
        usage = Usage()
        outcome = "successful" if episode.success else "failed"
        why = "" if episode.success else ", including what went wrong and what to try instead"
        prompt = RB_EXTRACT.format(outcome=outcome, why=why, task=episode.task.strip(),
                                   trajectory=flatten_trajectory(episode, 1500))
        try:
            answer, spent, _raw = ask_structured(
                self.llm, [{"role": "user", "content": prompt}], MemoryItems,
                schema=items_schema(), retries=self.retries, max_tokens=self.max_tokens,
                label=str(episode.meta.get("task_name", "")))
        except ExtractionError as exc:
            # The episode teaches nothing we can store; say so instead of storing a guess.
            if isinstance(exc.usage, Usage):
                usage.add(exc.usage)
            return Update(usage, {"stored": False, "reason": f"extraction failed: {exc}"[:300]})
        usage.add(spent)
        items = [item.model_dump() for item in answer.items[:3]]
        anchor = episode.task + "\n" + "\n".join(f"{i['title']}: {i['description']}"
                                                 for i in items)
        self.entries.append({"task": episode.task, "success": episode.success, "items": items,
                             **_entry_vectors(self.embedder, anchor, episode.env, usage)})
        _save(self.path, self.name, self.entries)
        return Update(usage, {"stored": True, "entry": len(self.entries) - 1,
                              "items": len(items)})

    def size(self) -> dict[str, int]:
        """Entries and the characters of their items."""
        chars = sum(len(i["title"]) + len(i["description"]) + len(i["content"])
                    for e in self.entries for i in e["items"])
        return {"entries": len(self.entries), "chars": chars}

    def close(self) -> None:
        """Nothing open (the file is written on every update)."""
