"""The memory-quality probe: what a memory recalls, played by a deterministic executor, no model.

The agent runs measure a 135M actor as much as the memory. The probe takes the actor out: each
memory learns the gold trajectories of train games (the warm start's, :func:`gold_episode`),
then for each dev game it recalls what it would show the agent, and a deterministic executor
plays the recalled procedure in the real engine. What it reports per memory:

* **kind** - whether the recalled procedure is of the game's task type (``right``), of another
  (``wrong``), or nothing was recalled (``none``);
* **procedure** - whether the recalled procedure, adapted to the game by role (below), names
  the right appliance (heat/cool/clean/use-lamp step and its receptacle type), the right
  destination (the last ``put``'s receptacle type) and the right order of manipulations
  (take, transform, put), each against the game's own gold plan;
* **exec** - the share of the adapted procedure's manipulation steps that were valid when the
  executor reached them (after its own navigation, below);
* **success** - whether the executor alone won the game;
* **scene** - whether the memory pointed to a receptacle type that holds the task's object
  (its first search hint), and for DeltaMem whether the environment tree matched at all.

Adapting by role. The recalled task text and the game's task text are aligned word by word
(:func:`role_map`: ``difflib`` over the content words; a replaced run of equal length maps
word to word), so "heat some mug and put it in countertop" against "heat some egg and put it
in shelf" maps mug -> egg and countertop -> shelf. The procedure's steps are read as
manipulations on types (:func:`manipulations`: instance numbers dropped, "take mug 1 from
cabinet 2" is ``take mug``), mapped through the role map. Where the recalled object was
found is a search hint, not a step. DeltaMem hands over its skill already adapted by the
memory's own slot roles (``TreeRecall.adapted``, ``core.slots.roles``: the words its episode
acted on, mapped onto the game's by their order in the template, so "put a hot egg in
countertop" adapts a skill learned on "heat some mug and put it in shelf"); the
``deltamem-align`` row uses the probe's alignment instead.

The executor (ALFWorld, :func:`play_alfworld`). For each manipulation it navigates as needed:
``take X`` searches the receptacles (search hints first, opening what is closed) until a
``take X n`` is valid; ``heat/cool/clean X with A`` goes to an ``A``; ``put X in R`` goes to
each ``R`` (opening it) until the put is valid; ``use L`` searches for ``L``. It is the same
for every memory, and it never reads the game file. With no memory it plays the default
procedure "take the task's object, put it where the task says" (the *scripted explorer*): it
knows ALFWorld's action grammar, no task type.

ScienceWorld (:func:`play_scienceworld`): its procedures are long and its actions free-form,
so there the executor plays the recalled steps adapted by the role map, each only when it is a
valid action (an exact one, or the valid action of the same verb that shares the most non-digit
content words, at least one); kind, exec and success are reported, the ALFWorld-only columns
are empty.

Memories. ``deltamem``: the DeltaMem facade with the trace extractor (recall's skill steps and
scene facts). ``synapse``: its exemplar store (top-1 by the specifier), the exemplar's actions
as the procedure and its observations as scene text. ``awm``: AWM selects by the harness's
task family; its workflow is LLM-written in the agent runs, and the probe runs no model, so it
uses the *trace form* of a workflow: the family's first stored gold trajectory (AWM's kind is
right by construction, since the family is given). ``none``: the scripted explorer.
"""

from __future__ import annotations

import difflib
import json
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltamem.config import Settings
from deltamem.core.model import Episode, Knowledge, Lesson, Skill
from deltamem.embed.base import Embedder
from deltamem.scenes.text_games import TextGames
from deltamem_bench.agent import gold_episode
from deltamem_bench.baselines import SynapseMemory
from deltamem_bench.envs.base import Environment, EpisodeSpec
from deltamem_bench.memories import DeltaMemMemory

PROBE_KINDS = ("none", "deltamem", "synapse", "awm")
# ``deltamem-cosine``: DeltaMem recalling by the cosine alone (``core.ranking.kind_first`` off),
# the "before" of the template rule, measured in the same run. ``deltamem-align``: DeltaMem's
# recall, its skill adapted by the probe's word alignment (:func:`role_map`) instead of the
# memory's own adaptation by slot roles (``TreeRecall.adapted``). ``deltamem-layout``: DeltaMem
# whose scene knowledge is instance facts matched by the exact layout
# (``TextGames(tendencies=False)``), the "before" of tendencies.
PROBE_ABLATIONS = ("deltamem-cosine", "deltamem-align", "deltamem-layout")
_WORD = re.compile(r"[a-z]+|\d+")
_GLUE = frozenset({"a", "an", "the", "in", "on", "into", "onto", "to", "from", "of", "with",
                   "at", "for", "and", "or", "is", "it", "its", "them", "some", "your", "task",
                   "you"})
# ALFWorld's action grammar (alfred.twl2): verb, object, receptacle.
_ALF = re.compile(r"^(take|put|move|heat|cool|clean|use|examine|slice)\s+(.+?)"
                  r"(?:\s+(?:from|in/on|in|on|with|to)\s+(.+))?$")
_GO = re.compile(r"^go to\s+(.+)$")
_OPEN = re.compile(r"^open\s+(.+)$")
TRANSFORMS = ("heat", "cool", "clean", "use")
MANIPULATIONS = ("take", "put", *TRANSFORMS)


def words(text: str) -> list[str]:
    """Lower-case words and numbers of ``text``."""
    return _WORD.findall(text.lower())


def kind_of(name: str) -> str:
    """An ALFWorld instance's type: "cabinet 2" -> "cabinet" (digits dropped)."""
    return " ".join(w for w in words(name) if not w.isdigit())


def role_map(old_task: str, new_task: str) -> dict[str, str]:
    """Word-for-word substitutions that turn ``old_task`` into ``new_task``: the replaced runs
    of equal length of a ``difflib`` alignment of their content words."""
    a = [w for w in words(old_task) if w not in _GLUE]
    b = [w for w in words(new_task) if w not in _GLUE]
    out: dict[str, str] = {}
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "replace" and i2 - i1 == j2 - j1:
            out.update(zip(a[i1:i2], b[j1:j2], strict=True))
    return out


@dataclass(frozen=True)
class Manipulation:
    """One typed manipulation: ``take mug``, ``heat mug microwave``, ``put mug countertop``."""

    verb: str
    obj: str
    target: str = ""

    def mapped(self, roles: dict[str, str]) -> Manipulation:
        def sub(name: str) -> str:
            return " ".join(roles.get(w, w) for w in name.split())
        return Manipulation(self.verb, sub(self.obj), sub(self.target))

    def text(self) -> str:
        return " ".join(x for x in (self.verb, self.obj, self.target) if x)


def _verb(match: re.Match[str] | None) -> str:
    """The manipulation an action grammar match names ("move X to R" is a put)."""
    if match is None:
        return ""
    return "put" if match.group(1) == "move" else match.group(1)


def manipulations(actions: Sequence[str]) -> tuple[list[Manipulation], list[tuple[str, str]]]:
    """The typed manipulations of an ALFWorld action list, and where each taken object was
    taken from (``(object type, receptacle type)``: the list's search hints)."""
    out: list[Manipulation] = []
    found: list[tuple[str, str]] = []
    for action in actions:
        match = _ALF.match(" ".join(words(action.replace("in/on", "in"))))
        verb = _verb(match)
        if match is None or verb not in MANIPULATIONS:
            continue
        obj, target = kind_of(match.group(2)), kind_of(match.group(3) or "")
        if verb == "take":
            found.append((obj, target))
            target = ""
        out.append(Manipulation(verb, obj, target))
    return out, found


# -- what a memory hands the executor --------------------------------------------------------

@dataclass
class Recalled:
    """What one memory recalled for one game."""

    kind: str | None = None  # task family of the recalled procedure (None: nothing recalled)
    task: str = ""  # the task text the procedure was learned on
    steps: tuple[str, ...] = ()
    scene_text: tuple[str, ...] = ()  # lines of scene knowledge (facts, observations)
    env_matched: bool | None = None  # DeltaMem's environment tree (None: no such tree)


@dataclass
class ProbeMemory:
    """One memory under the probe: learned from gold train episodes, recalled per game."""

    name: str
    deltamem: DeltaMemMemory | None = None
    synapse: SynapseMemory | None = None
    families: list[str] = field(default_factory=list)  # per stored entry (synapse)
    workflows: dict[str, Episode] = field(default_factory=dict)  # awm: family -> trace form
    adapted: bool = True  # deltamem: hand over the skill as the memory adapted it by role

    def learn(self, episode: Episode) -> None:
        family = str(episode.meta.get("task_name", ""))
        if self.deltamem is not None:
            self.deltamem.mem.learn(episode)
        elif self.synapse is not None:
            if self.synapse.update(episode, {}).written.get("stored"):
                self.families.append(family)
        elif self.name == "awm" and episode.success:
            self.workflows.setdefault(family, episode)

    def recall(self, task: str, scene: str, family: str) -> Recalled:
        if self.deltamem is not None:
            return _deltamem_recall(self.deltamem, task, scene, adapted=self.adapted)
        if self.synapse is not None:
            _, info = self.synapse.context(task, scene)
            if not info.get("matched"):
                return Recalled()
            index = int(info["entry"])
            entry = self.synapse.entries[index]
            lines = str(entry["trajectory"]).splitlines()
            steps = tuple(x[len("Action: "):] for x in lines if x.startswith("Action: "))
            seen = tuple(x for x in lines if x.startswith("Observation: "))
            return Recalled(self.families[index], str(entry["task"]), steps, seen)
        if self.name == "awm":
            flow = self.workflows.get(family)
            if flow is None:
                return Recalled()
            return Recalled(family, flow.task, tuple(s.action for s in flow.steps))
        return Recalled()

    def close(self) -> None:
        if self.deltamem is not None:
            self.deltamem.close()


def _deltamem_recall(memory: DeltaMemMemory, task: str, scene: str, *,
                     adapted: bool = True) -> Recalled:
    """DeltaMem's recall for the probe. ``adapted``: a skill comes as the memory adapted it to
    ``task`` by slot roles (``TreeRecall.adapted``), handed over as learned on ``task`` itself,
    so the probe's alignment (:func:`role_map`) maps nothing more; else as learned."""
    recall = memory.mem.recall(task, scene)
    out = Recalled(env_matched=recall.env.matched)
    knowledge = recall.env.experience
    if isinstance(knowledge, Knowledge):
        out.scene_text = knowledge.facts
    skill = recall.task.experience
    node = recall.task.matched_node
    if isinstance(skill, Skill) and node is not None:
        meta = node.meta.get("episode_meta")
        out.kind = str(meta.get("task_name", "")) if isinstance(meta, dict) else ""
        out.task, out.steps = skill.activation, skill.steps
        mine = recall.task.adapted
        if adapted and mine is not None and mine != skill:
            out.task, out.steps = task, mine.steps
    elif isinstance(skill, Lesson) and node is not None:
        meta = node.meta.get("episode_meta")
        out.kind = str(meta.get("task_name", "")) if isinstance(meta, dict) else ""
        out.task, out.steps = skill.situation, skill.worked
    return out


def make_probe_memory(name: str, directory: Path, embedder: Embedder,
                      settings: Settings | None = None) -> ProbeMemory:
    """The probe's memory ``name`` (:data:`PROBE_KINDS`), empty, persisting under
    ``directory`` (``settings``: DeltaMem's)."""
    directory.mkdir(parents=True, exist_ok=True)
    if name in ("deltamem", *PROBE_ABLATIONS):
        scene = TextGames(tendencies=name != "deltamem-layout")
        memory = DeltaMemMemory(directory / "memory.db", embedder, extractor="trace",
                                settings=settings, scene=scene)
        if name == "deltamem-cosine":
            memory.mem.reader.kind_weight = 0.0
        return ProbeMemory(name, deltamem=memory, adapted=name != "deltamem-align")
    if name == "synapse":
        return ProbeMemory(name, synapse=SynapseMemory(embedder))
    if name in ("awm", "none"):
        return ProbeMemory(name)
    raise ValueError(f"unknown probe memory {name!r}; choose from "
                     f"{PROBE_KINDS + PROBE_ABLATIONS}")


# -- the ALFWorld executor ----------------------------------------------------------------------

@dataclass
class Play:
    """What the executor did in one game."""

    won: bool = False
    steps: int = 0
    planned: int = 0  # manipulations of the adapted procedure
    executed: int = 0  # of them valid when reached (after the executor's navigation)
    first_hint: str = ""  # the receptacle type searched first for the task's object


class _Out(Exception):
    """The game ended (won or out of steps)."""


class _Executor:
    def __init__(self, env: Environment, admissible: list[str], task: str) -> None:
        self.env = env
        self.task_words = {w for w in words(task) if w not in _GLUE and not w.isdigit()}
        self.held = ""
        self.admissible = admissible
        self.play = Play()
        self.visited: set[str] = set()
        self.placed: set[str] = set()  # instances already put away (pick two)
        self.receptacles = [m.group(1) for a in admissible if (m := _GO.match(a))]

    def act(self, action: str) -> None:
        transition = self.env.step(action)
        self.play.steps += 1
        self.admissible = self.env.admissible() or []
        if transition.won:
            self.play.won = True
        if transition.done:
            raise _Out

    def valid(self, step: Manipulation) -> str | None:
        for action in self.admissible:
            match = _ALF.match(" ".join(words(action.replace("in/on", "in"))))
            if _verb(match) != step.verb:
                continue
            assert match is not None
            obj, target = match.group(2), match.group(3) or ""
            if obj in self.placed and step.verb == "take":
                continue
            wanted = step.obj or (self.held if step.verb != "take" else "")
            if wanted and kind_of(obj) != wanted:
                continue
            if not wanted and kind_of(obj) not in self.task_words:
                continue
            if step.target and step.verb != "take" and kind_of(target) != step.target:
                continue
            return action
        return None

    def go(self, receptacle: str) -> None:
        self.visited.add(receptacle)
        self.act(f"go to {receptacle}")
        opener = f"open {receptacle}"
        if opener in self.admissible:
            self.act(opener)

    def search(self, step: Manipulation, hints: Sequence[str]) -> str | None:
        order = sorted(self.receptacles, key=lambda r: (
            hints.index(kind_of(r)) if kind_of(r) in hints else len(hints)))
        if not self.play.first_hint and step.verb == "take" and order:
            self.play.first_hint = kind_of(order[0])
        for receptacle in order:
            if receptacle in self.visited:
                continue
            self.go(receptacle)
            found = self.valid(step)
            if found:
                return found
        return None

    def achieve(self, step: Manipulation, hints: Sequence[str]) -> bool:
        found = self.valid(step)
        if found is None and step.verb in ("take", "use"):
            self.visited.clear()
            found = self.search(step, hints)
        elif found is None and step.target:
            for receptacle in self.receptacles:
                if kind_of(receptacle) == step.target:
                    self.go(receptacle)
                    found = self.valid(step)
                    if found:
                        break
        if found is None:
            return False
        self.act(found)
        match = _ALF.match(" ".join(words(found.replace("in/on", "in"))))
        if match is not None and step.verb == "take":
            self.held = kind_of(match.group(2))
        if match is not None and step.verb == "put":
            self.placed.add(match.group(2))
        return True


def play_alfworld(env: Environment, spec: EpisodeSpec, procedure: list[Manipulation],
                  hints: Sequence[str]) -> Play:
    """Play ``procedure`` (typed manipulations) in the game ``spec`` names, navigating as the
    module docstring says; ``hints`` are receptacle types to search first."""
    env.load(spec)
    reset = env.reset()
    runner = _Executor(env, list(reset.admissible or []), reset.task)
    runner.play.planned = len(procedure)
    try:
        for step in procedure:
            if runner.achieve(step, hints):
                runner.play.executed += 1
    except _Out:
        pass
    return runner.play


def default_procedure(task: str, receptacles: Sequence[str]) -> list[Manipulation]:
    """The scripted explorer's procedure: take the task's object, put it where the task says.
    The destination is the task's last word that names a receptacle type of the game; the
    object is left open (``""``): the executor takes the first object whose type the task
    names (it learns the game's object names only from the valid actions as it searches)."""
    kinds = {kind_of(r) for r in receptacles}
    content = [w for w in words(task) if w not in _GLUE and not w.isdigit()]
    dest = next((w for w in reversed(content) if w in kinds), "")
    return [Manipulation("take", ""), Manipulation("put", "", dest)]


def scene_hints(obj: str, texts: Sequence[str], receptacles: Sequence[str]) -> list[str]:
    """Receptacle types of the game that share a line of ``texts`` with ``obj``, in the order
    of the lines and, within a line, of the text ("On the cabinet 1, you see a mug 1" ->
    cabinet for mug; a tendency "mug: found in cabinet (3 of 4 episodes); found in countertop
    (1 of 4 episodes)" -> cabinet, then countertop: best supported first)."""
    kinds = set(kind_of(r) for r in receptacles)
    out: list[str] = []
    for text in texts:
        found = words(text)
        if obj and obj in found:
            out += [w for w in dict.fromkeys(found) if w in kinds and w not in out and w != obj]
    return out


# -- one game, one memory -------------------------------------------------------------------

@dataclass(frozen=True)
class Gold:
    """The facts a game's gold plan gives the scorer (never the executor)."""

    manipulations: tuple[Manipulation, ...]
    holds: frozenset[str]  # receptacle types the task's object was taken from

    @property
    def appliances(self) -> set[tuple[str, str]]:
        return {(m.verb, m.target or m.obj) for m in self.manipulations
                if m.verb in TRANSFORMS}

    @property
    def destination(self) -> str:
        puts = [m.target for m in self.manipulations if m.verb == "put"]
        return puts[-1] if puts else ""

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(m.verb for m in self.manipulations)


def gold_of(actions: Sequence[str]) -> Gold:
    steps, found = manipulations(actions)
    main = steps[0].obj if steps else ""
    return Gold(tuple(steps), frozenset(r for o, r in found if o == main))


def _as_gold(steps: Sequence[Manipulation]) -> Gold:
    return Gold(tuple(steps), frozenset())


def probe_alfworld_game(env: Environment, spec: EpisodeSpec, memory: ProbeMemory,
                        ) -> dict[str, Any]:
    """Recall for one ALFWorld game and play it; the row of the probe's per-game log."""
    env.load(spec)
    reset = env.reset()
    gold = gold_of(env.gold_actions() or [])
    receptacles = [m.group(1) for a in (reset.admissible or []) if (m := _GO.match(a))]
    recalled = memory.recall(reset.task, reset.scene, spec.task_name)
    fallback = default_procedure(reset.task, receptacles)
    obj = ""
    if recalled.steps:
        roles = role_map(recalled.task, reset.task)
        steps, found = manipulations(recalled.steps)
        procedure = [s.mapped(roles) for s in steps]
        obj = procedure[0].obj if procedure else ""
        hints = scene_hints(obj, recalled.scene_text, receptacles)
        hints += [r for o, r in found if roles.get(o, o) == obj or o == obj
                  if r not in hints]
        hints += [r for _, r in found if r not in hints]
    else:
        procedure = [] if memory.name != "none" else fallback
        hints = scene_hints(obj, recalled.scene_text, receptacles)
    if not procedure:
        procedure = fallback  # nothing usable recalled: the memory falls back on the script
    play = play_alfworld(env, spec, procedure, hints)
    mine = _as_gold(procedure)
    kind = None if memory.name == "none" else (
        "none" if recalled.kind is None else "right" if recalled.kind == spec.task_name
        else "wrong")
    return {
        "spec": {"task_name": spec.task_name, "variation": spec.variation, "split": spec.split},
        "kind": kind,
        "task": reset.task, "recalled_task": recalled.task,
        "recalled_kind": recalled.kind,
        "procedure": [m.text() for m in procedure],
        "appliance": mine.appliances == gold.appliances,
        "destination": mine.destination == gold.destination,
        "order": mine.order == gold.order,
        "object": bool(procedure) and procedure[0].obj == (gold.manipulations[0].obj
                                                           if gold.manipulations else ""),
        "planned": play.planned, "executed": play.executed,
        "won": play.won, "steps": play.steps,
        "hint": bool(hints),
        "scene_right": play.first_hint in gold.holds,
        "env_matched": recalled.env_matched,
    }


def probe_scienceworld_game(env: Environment, spec: EpisodeSpec, memory: ProbeMemory,
                            ) -> dict[str, Any]:
    """Recall for one ScienceWorld variation and play the adapted steps (module docstring)."""
    env.load(spec)
    reset = env.reset()
    recalled = memory.recall(reset.task, reset.scene, spec.task_name)
    roles = role_map(recalled.task, reset.task) if recalled.steps else {}
    planned = executed = steps = 0
    won = False
    admissible = list(reset.admissible or env.admissible() or [])
    for step in recalled.steps:
        planned += 1
        adapted = " ".join(roles.get(w, w) for w in step.lower().split())
        action = adapt_free(adapted, admissible)
        if action is None:
            continue
        executed += 1
        transition = env.step(action)
        steps += 1
        won = won or transition.won
        if transition.done:
            break
        admissible = list(env.admissible() or [])
    kind = None if memory.name == "none" else (
        "none" if recalled.kind is None else "right" if recalled.kind == spec.task_name
        else "wrong")
    return {"spec": {"task_name": spec.task_name, "variation": spec.variation,
                     "split": spec.split},
            "kind": kind, "task": reset.task, "recalled_task": recalled.task,
            "recalled_kind": recalled.kind, "procedure": list(recalled.steps),
            "appliance": None, "destination": None, "order": None, "object": None,
            "planned": planned, "executed": executed, "won": won, "steps": steps,
            "hint": bool(recalled.scene_text), "scene_right": None,
            "env_matched": recalled.env_matched}


def adapt_free(step: str, admissible: Sequence[str]) -> str | None:
    """The valid action that carries out a free-form ``step``: itself, else the valid action
    of the same first word that shares the most non-digit content words with it (at least
    one; ties to the earlier)."""
    if step in admissible:
        return step
    mine = words(step)
    if not mine:
        return None
    want = {w for w in mine[1:] if w not in _GLUE and not w.isdigit()}
    best: tuple[int, str] | None = None
    for action in admissible:
        theirs = words(action)
        if not theirs or theirs[0] != mine[0]:
            continue
        shared = len(want & {w for w in theirs[1:] if w not in _GLUE and not w.isdigit()})
        if shared and (best is None or shared > best[0]):
            best = (shared, action)
    return best[1] if best else None


# -- the whole probe ------------------------------------------------------------------------

def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One memory's columns over its per-game rows (shares in 0..1)."""
    n = len(rows)
    kinds = Counter(r["kind"] for r in rows if r["kind"] is not None)

    def share(key: str) -> float | None:
        vals = [bool(r[key]) for r in rows if r[key] is not None]
        return round(sum(vals) / len(vals), 4) if vals else None

    planned = sum(r["planned"] for r in rows)
    env = [r["env_matched"] for r in rows if r["env_matched"] is not None]
    by_type: dict[str, dict[str, int]] = {}
    for r in rows:
        if r["kind"] is not None:
            slot = by_type.setdefault(r["spec"]["task_name"], {"right": 0, "wrong": 0,
                                                               "none": 0})
            slot[r["kind"]] += 1
    return {
        "games": n,
        "kind": {k: round(kinds.get(k, 0) / n, 4) for k in ("right", "wrong", "none")}
        if kinds and n else None,
        "kind_by_type": by_type or None,
        "appliance": share("appliance"), "destination": share("destination"),
        "order": share("order"), "object": share("object"),
        "exec": round(sum(r["executed"] for r in rows) / planned, 4) if planned else None,
        "success": share("won"),
        "scene_hint": share("hint"), "scene_right": share("scene_right"),
        "env_matched": round(sum(env) / len(env), 4) if env else None,
    }


def train_episodes(env: Environment, specs: Sequence[EpisodeSpec]) -> list[Episode]:
    """The gold episodes of ``specs`` (the warm start's, replayed in the engine); a spec whose
    gold path did not win is left out."""
    out = []
    for spec in specs:
        episode = gold_episode(env, spec)
        if episode.success:
            out.append(episode)
    return out


def run_probe(env: Environment, env_name: str, train: Sequence[Episode],
              games: Sequence[EpisodeSpec], kinds: Sequence[str], directory: Path,
              embedder: Embedder, settings: Settings | None = None,
              templated: dict[str, Sequence[dict[str, str]]] | None = None) -> dict[str, Any]:
    """Learn ``train`` into each memory of ``kinds``, probe it on ``games``; the summary per
    memory, the per-game rows, and the time taken (``settings``: DeltaMem's). ``templated``:
    templated tasks by split, whose recalled kinds (:func:`templated_kinds`) are reported
    for every memory that recalls by the task text (DeltaMem, Synapse; AWM is given the
    family)."""
    probe_game = probe_alfworld_game if env_name == "alfworld-generated" \
        else probe_scienceworld_game
    out: dict[str, Any] = {"env": env_name, "train": len(train), "games": len(games),
                           "train_families": dict(Counter(str(e.meta.get("task_name", ""))
                                                          for e in train)),
                           "memories": {}, "rows": {}, "seconds": {}}
    for kind in kinds:
        started = time.perf_counter()
        memory = make_probe_memory(kind, directory / kind, embedder, settings)
        try:
            for episode in train:
                memory.learn(episode)
            rows = [probe_game(env, spec, memory) for spec in games]
            if templated and kind not in ("none", "awm", "deltamem-layout"):
                out.setdefault("templated", {})[kind] = {
                    split: templated_kinds(memory, tasks) for split, tasks in templated.items()}
        finally:
            memory.close()
        out["memories"][kind] = summarise(rows)
        out["rows"][kind] = rows
        out["seconds"][kind] = round(time.perf_counter() - started, 1)
    return out


COLUMNS = ("right", "wrong", "none", "appliance", "destination", "order", "exec", "success",
           "scene_right", "env_matched")


def table(result: dict[str, Any]) -> str:
    """The probe's summary as a markdown table (one row per memory; shares in %)."""
    head = "| memory | games | " + " | ".join(COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 2)]
    for kind, s in result["memories"].items():
        kinds = s["kind"] or {}
        cells = [kinds.get(c) if c in ("right", "wrong", "none") else s.get(c)
                 for c in COLUMNS]
        shown = ["–" if v is None else f"{100 * v:.1f}" for v in cells]
        lines.append(f"| {kind} | {s['games']} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


# The splits the probe learns from and probes on: never a test split.
PROBE_SPLITS = {"alfworld-generated": ("seen", "dev"), "scienceworld": ("train", "dev")}


def probe_env(name: str) -> Environment:
    """The environment ``name`` for the probe. ALFWorld's engine is opened without the planner
    (the probe needs the engine's ``won``, not plan progress, and Fast Downward after every
    step would take most of the probe's time)."""
    from deltamem_bench.envs import make_env

    return make_env(name, plan_progress=False) if name == "alfworld-generated" else make_env(name)


def probe_streams(env: Environment, name: str, train: int, games: int, seed: int,
                  families: Sequence[str] | None = None
                  ) -> tuple[list[Episode], list[EpisodeSpec]]:
    """The gold train episodes (``train`` specs of the train split) and the dev games
    (``games`` specs of the dev split), families dealt in turn (``runner.episode_stream``)."""
    from deltamem_bench.runner import episode_stream

    train_split, dev_split = PROBE_SPLITS[name]
    train_specs = episode_stream(env, train_split, train, seed, families) if train else []
    dev_specs = episode_stream(env, dev_split, games, seed, families)
    return train_episodes(env, train_specs), dev_specs


def templated_kinds(memory: ProbeMemory, tasks: Sequence[dict[str, str]]) -> dict[str, Any]:
    """Recall for each templated task (``{"kind", "task"}``; no scene) and count the recalled
    procedure's kind: ``right`` / ``wrong`` / ``none`` shares, and the wrong ones by pair."""
    counts: Counter[str] = Counter()
    confused: Counter[str] = Counter()
    for item in tasks:
        recalled = memory.recall(item["task"], "", item["kind"])
        verdict = "none" if recalled.kind is None else (
            "right" if recalled.kind == item["kind"] else "wrong")
        counts[verdict] += 1
        if verdict == "wrong":
            confused[f"{item['kind']} -> {recalled.kind}"] += 1
    n = max(len(tasks), 1)
    return {"tasks": len(tasks),
            **{k: round(counts[k] / n, 4) for k in ("right", "wrong", "none")},
            "confused": dict(confused.most_common(8))}


def load_gold(path: Path) -> list[Episode]:
    """Gold episodes written by :func:`save_gold`."""
    from deltamem.formats.episodes import episode_from_dict

    return [episode_from_dict(json.loads(line)) for line in
            path.read_text(encoding="utf-8").splitlines() if line.strip()]


def save_gold(path: Path, episodes: Sequence[Episode]) -> None:
    """Keep gold episodes (JSON lines) so that a later probe learns the same ones at once."""
    from deltamem.formats.episodes import episode_to_dict

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(episode_to_dict(e)) + "\n" for e in episodes),
                    encoding="utf-8")
