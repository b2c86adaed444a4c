"""Generated ALFWorld games: ALFWorld-style PDDL problems made from the ``alfworld`` assets.

The official ALFWorld game files (``json_2.1.1/**/game.tw-pddl``) are downloaded from GitHub and
cannot be had offline, so these are **generated ALFWorld games**, not the official splits; their
numbers are not comparable with the paper's. They do use the real engine and data: the PDDL
domain and text grammar (``alfworld/data/alfred.pddl``, ``alfred.twl2``), the AI2-THOR floor
plans (``alfworld/gen/layouts/FloorPlan*-objects.json`` / ``-openable.json``), the object and
receptacle compatibility tables (``alfworld/gen/constants.py``) and the goal library's PDDL goals
and sentence templates (``alfworld/gen/goal_library.py``). Fast Downward (through TextWorld's
``PddlEnv``) plans every game at generation time; a game is only written if that plan wins
within :data:`MAX_PLAN_LENGTH` actions, and the plan is stored as the game's walkthrough.

"seen" games use ALFRED's training floor plans, "unseen" games its held-out ones (the two sets
are disjoint), mirroring ALFWorld's in-distribution / out-of-distribution evaluation. "dev"
games are for choosing rules, thresholds and defaults: they use the training floor plans (never
an unseen one, so nothing tuned on dev has seen a test room) under their own generator stream
(the split is part of the generator's seed, so no dev game is a seen game), as ALFWorld's
``valid_seen`` does. Held-out results are on "unseen" only. Scenes are
kept small (4-6 receptacles, 3-5 objects) so that planning takes a fraction of a second.

Generation is deterministic: the same (seed, task type, split) always yields the same file.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from deltamem import config
from deltamem.errors import ConfigError

GENERATOR_VERSION = 1
MAX_PLAN_LENGTH = 30  # ALFWorld's step budget; a longer gold plan would be unwinnable

# Short task-type names (ALFWorld's game-folder prefixes) -> goal_library keys.
TASK_TYPES: dict[str, str] = {
    "pick_and_place": "pick_and_place_simple",
    "pick_clean_then_place": "pick_clean_then_place_in_recep",
    "pick_heat_then_place": "pick_heat_then_place_in_recep",
    "pick_cool_then_place": "pick_cool_then_place_in_recep",
    "look_at_obj": "look_at_obj_in_light",
    "pick_two_obj": "pick_two_obj_and_place",
}
SPLITS = ("seen", "dev", "unseen")

# The receptacle type each state-changing action needs (alfred.pddl's preconditions) and the
# VAL_ACTION_OBJECTS property the object must have.
_APPLIANCE = {"pick_clean_then_place": "SinkBasin", "pick_heat_then_place": "Microwave",
              "pick_cool_then_place": "Fridge"}
_PROPERTY = {"pick_clean_then_place": "Cleanable", "pick_heat_then_place": "Heatable",
             "pick_cool_then_place": "Coolable"}
_LAMP = "DeskLamp"
# VAL_RECEPTACLE_OBJECTS lists no holder for lamps (they are not pickupable), so where a desk
# lamp may stand is stated here: the furniture ALFWorld scenes put desk lamps on.
_LAMP_HOLDERS = ("Desk", "Dresser", "SideTable", "Shelf", "CoffeeTable", "DiningTable", "TVStand")
_OPENABLE = {"Fridge", "Cabinet", "Microwave", "Drawer", "Safe", "Box"}


def _alfworld() -> tuple[Any, Any, Path]:
    """Import the alfworld asset modules, or explain how to get them."""
    try:
        import alfworld
        import alfworld.gen.constants as constants
        import alfworld.gen.goal_library as goal_library
    except ImportError as exc:
        raise ConfigError("generated ALFWorld games need the 'alfworld' package "
                          "(text-only; compiles fast-downward): pip install 'deltamem[alfworld]'"
                          ) from exc
    return constants, goal_library, Path(alfworld.__file__).parent


def mangle(name: str) -> str:
    """ALFRED's PDDL-safe spelling of an id ("Apple|-01.65|..." -> "Apple_bar__minus_01_dot_65...").

    ``AlfredDemangler`` reverses it into "apple 1"; the scheme must match its expectations.
    """
    table = {"-": "_minus_", "|": "_bar_", "+": "_plus_", ".": "_dot_", ",": "_comma_"}
    return "".join(table.get(ch, ch) for ch in name)


@dataclass(frozen=True)
class FloorPlan:
    """One AI2-THOR floor plan as the wheel ships it."""

    number: int
    object_types: frozenset[str]
    receptacles: dict[str, tuple[float, float, int, int]]  # id -> agent pose (x, z, rot, horizon)


@cache
def _floor_plan(number: int) -> FloorPlan:
    _, _, root = _alfworld()
    layouts = root / "gen" / "layouts"
    objects = json.loads((layouts / f"FloorPlan{number}-objects.json").read_text())
    poses = json.loads((layouts / f"FloorPlan{number}-openable.json").read_text())
    return FloorPlan(number=number, object_types=frozenset(objects),
                     receptacles={k: (float(v[0]), float(v[1]), int(v[2]), int(v[3]))
                                  for k, v in poses.items()})


def floor_plans(split: str, task_type: str) -> list[int]:
    """Floor plans a ``task_type`` game of ``split`` may use (ALFRED train vs held-out scenes)."""
    constants, _, root = _alfworld()
    if split not in SPLITS:
        raise ConfigError(f"unknown ALFWorld split {split!r}; use one of {SPLITS}")
    _check_task_type(task_type)
    numbers = (constants.TEST_SCENE_NUMBERS if split == "unseen"
               else constants.TRAIN_SCENE_NUMBERS)
    rooms = constants.GOALS_VALID[TASK_TYPES[task_type]]
    allowed = [n for n in numbers
               if any(n in constants.SCENE_TYPE[room] for room in rooms)
               and (root / "gen" / "layouts" / f"FloorPlan{n}-openable.json").exists()]
    return sorted(allowed)


def _check_task_type(task_type: str) -> None:
    if task_type not in TASK_TYPES:
        raise ConfigError(f"unknown ALFWorld task type {task_type!r}; known: {list(TASK_TYPES)}")


def _receptacle_type(rid: str) -> str:
    """"Sink|x|y|z|SinkBasin" -> "SinkBasin"; "Fridge|x|y|z" -> "Fridge"."""
    parts = rid.split("|")
    return parts[4] if len(parts) > 4 else parts[0]


@dataclass
class _Scene:
    """A sampled game before it is written as PDDL."""

    plan: int
    goal_text: str
    goal_pddl: str
    receptacles: list[tuple[str, str, str]] = field(default_factory=list)  # id, type, location
    objects: list[tuple[str, str, str]] = field(default_factory=list)  # id, type, receptacle id
    agent_location: str = ""


class _Sampler:
    """Samples one small scene for a task type in a floor plan (None when it does not fit)."""

    def __init__(self, rng: random.Random, task_type: str) -> None:
        self.rng = rng
        self.task_type = task_type
        self.constants, self.goals, _ = _alfworld()
        self.contains: dict[str, set[str]] = self.constants.VAL_RECEPTACLE_OBJECTS
        movable = set(self.constants.MOVABLE_RECEPTACLES)
        placeable = set().union(*self.contains.values())
        self.pickupable = {t for t in placeable if not t.endswith("Sliced")}
        self.static_receptacles = set(self.contains) - movable

    def sample(self, plan: FloorPlan) -> _Scene | None:
        """Pick receptacles, objects and the goal for ``plan``."""
        by_type: dict[str, list[str]] = {}
        for rid in sorted(plan.receptacles):
            rtype = _receptacle_type(rid)
            if rtype in self.static_receptacles:
                by_type.setdefault(rtype, []).append(rid)
        present = sorted(plan.object_types & self.pickupable & set(self.constants.OBJECTS))
        choice = self._choose_goal(by_type, present, plan)
        if choice is None:
            return None
        target, goal_rtype, special = choice
        chosen = self._choose_receptacles(by_type, target, goal_rtype, special)
        if chosen is None:
            return None
        return self._build(plan, chosen, target, goal_rtype, present)

    def _choose_goal(self, by_type: dict[str, list[str]], present: list[str],
                     plan: FloorPlan) -> tuple[str, str | None, str | None] | None:
        """Target object type, goal receptacle type and the special receptacle type needed."""
        special: str | None = _APPLIANCE.get(self.task_type)
        if self.task_type == "look_at_obj":
            holders = [t for t in _LAMP_HOLDERS if t in by_type]
            if _LAMP not in plan.object_types or not holders:
                return None
            special = self.rng.choice(holders)
            candidates = [t for t in present if self._sources(by_type, t, None)]
            if not candidates:
                return None
            return self.rng.choice(candidates), None, special
        if special is not None and special not in by_type:
            return None
        prop = _PROPERTY.get(self.task_type)
        options: list[tuple[str, str]] = []
        for otype in present:
            if prop is not None and otype not in self.constants.VAL_ACTION_OBJECTS[prop]:
                continue
            for rtype in sorted(by_type):
                if rtype != special and otype in self.contains[rtype] \
                        and self._sources(by_type, otype, rtype):
                    options.append((otype, rtype))
        if not options:
            return None
        target, goal_rtype = self.rng.choice(options)
        return target, goal_rtype, special

    def _sources(self, by_type: dict[str, list[str]], otype: str,
                 goal_rtype: str | None) -> list[str]:
        """Receptacle types where ``otype`` may start (never the goal's own type)."""
        return [r for r in sorted(by_type) if otype in self.contains[r] and r != goal_rtype]

    def _choose_receptacles(self, by_type: dict[str, list[str]], target: str,
                            goal_rtype: str | None, special: str | None) -> list[str] | None:
        """Receptacle ids: the goal's, the appliance or lamp holder, a source, then fillers."""
        chosen: list[str] = []
        for rtype in (goal_rtype, special):
            if rtype is not None:
                chosen.append(self.rng.choice(by_type[rtype]))
        sources = [rid for r in self._sources(by_type, target, goal_rtype) for rid in by_type[r]
                   if rid not in chosen and r != special]
        if not sources:
            return None
        chosen.append(self.rng.choice(sources))
        size = self.rng.randint(4, 6)
        fillers = [rid for r in sorted(by_type) for rid in by_type[r] if rid not in chosen]
        self.rng.shuffle(fillers)
        chosen += fillers[:max(0, size - len(chosen))]
        return chosen

    def _build(self, plan: FloorPlan, chosen: list[str], target: str, goal_rtype: str | None,
               present: list[str]) -> _Scene | None:
        rtypes = {rid: _receptacle_type(rid) for rid in chosen}
        scene = _Scene(plan=plan.number, goal_text="", goal_pddl="")
        locations: dict[str, str] = {}
        for rid in chosen:
            x, z, rot, horizon = plan.receptacles[rid]
            loc = mangle(f"loc|{round(x / 0.25)}|{round(z / 0.25)}|{rot // 90}|{horizon}")
            locations[rid] = loc
            scene.receptacles.append((mangle(rid), rtypes[rid], loc))
        scene.agent_location = self._free_location(set(locations.values()))

        def place(otype: str, exclude: str | None) -> bool:
            homes = [rid for rid in chosen
                     if otype in self.contains[rtypes[rid]] and rtypes[rid] != exclude
                     and rtypes[rid] != _APPLIANCE.get(self.task_type)]
            if not homes:
                return False
            scene.objects.append((self._object_id(otype), otype, mangle(self.rng.choice(homes))))
            return True

        for _ in range(2 if self.task_type == "pick_two_obj" else 1):
            if not place(target, goal_rtype):
                return None
        if self.task_type == "look_at_obj":
            holder = next(rid for rid in chosen if rtypes[rid] in _LAMP_HOLDERS)
            scene.objects.append((self._object_id(_LAMP), _LAMP, mangle(holder)))
        distractors = [t for t in present if t != target]
        self.rng.shuffle(distractors)
        wanted = self.rng.randint(2, 3)
        for otype in distractors:
            if wanted == 0:
                break
            if place(otype, None):
                wanted -= 1
        self._write_goal(scene, target, goal_rtype)
        return scene

    def _write_goal(self, scene: _Scene, target: str, goal_rtype: str | None) -> None:
        entry = self.goals.gdict[TASK_TYPES[self.task_type]]
        names = {"obj": target, "recep": goal_rtype or "", "toggle": _LAMP, "mrecep": ""}
        # The library writes "#" for PDDL's "-" so its text survives ALFRED's id mangling.
        scene.goal_pddl = entry["pddl"].format(**names).replace("#", "-")
        template = self.rng.choice(sorted(entry["templates"]))
        scene.goal_text = template.format(**{k: v.lower() for k, v in names.items()})

    def _object_id(self, otype: str) -> str:
        coords = "|".join(f"{self.rng.uniform(-3, 3):+06.2f}" for _ in range(3))
        return mangle(f"{otype}|{coords}")

    def _free_location(self, taken: set[str]) -> str:
        while True:
            loc = mangle(f"loc|{self.rng.randint(-8, 8)}|{self.rng.randint(-8, 8)}|"
                         f"{self.rng.randint(0, 3)}|30")
            if loc not in taken:
                return loc


def problem_pddl(scene: _Scene, name: str) -> str:
    """The PDDL problem text of ``scene`` in ALFRED's style."""
    constants, _, _ = _alfworld()
    otypes = sorted({t for _, t, _ in scene.objects})
    rtypes = sorted({t for _, t, _ in scene.receptacles})
    locations = sorted({loc for _, _, loc in scene.receptacles} | {scene.agent_location})
    decl = ["agent1 - agent"]
    decl += [f"{oid} - object" for oid, _, _ in scene.objects]
    decl += [f"{rid} - receptacle" for rid, _, _ in scene.receptacles]
    decl += [f"{loc} - location" for loc in locations]
    decl += [f"{t}Type - otype" for t in otypes] + [f"{t}Type - rtype" for t in rtypes]
    init = [f"(atLocation agent1 {scene.agent_location})"]
    where = {}
    for rid, rtype, loc in scene.receptacles:
        where[rid] = loc
        init += [f"(receptacleType {rid} {rtype}Type)", f"(receptacleAtLocation {rid} {loc})"]
        if rtype in _OPENABLE:
            init.append(f"(openable {rid})")
    actions = constants.VAL_ACTION_OBJECTS
    for oid, otype, rid in scene.objects:
        init += [f"(objectType {oid} {otype}Type)", f"(inReceptacle {oid} {rid})",
                 f"(objectAtLocation {oid} {where[rid]})"]
        if otype == _LAMP:
            init.append(f"(toggleable {oid})")
        else:
            init.append(f"(pickupable {oid})")
        for prop, pred in (("Cleanable", "cleanable"), ("Heatable", "heatable"),
                           ("Coolable", "coolable")):
            if otype in actions[prop]:
                init.append(f"({pred} {oid})")
        if otype in constants.MOVABLE_RECEPTACLES:
            init.append(f"(isReceptacleObject {oid})")
    for rtype in rtypes:
        for otype in otypes:
            if otype in constants.VAL_RECEPTACLE_OBJECTS[rtype]:
                init.append(f"(canContain {rtype}Type {otype}Type)")
    return ("(define (problem " + name + ")\n(:domain alfred)\n(:objects\n"
            + "\n".join(decl) + "\n)\n(:init\n" + "\n".join(init) + "\n)\n"
            + scene.goal_pddl.strip() + "\n")


def default_cache_dir() -> Path:
    """Where generated games are written unless told otherwise."""
    return config.cache_dir() / "alfworld-generated"


def generate_game(seed: int, task_type: str, split: str = "seen",
                  cache_dir: Path | str | None = None) -> Path:
    """Write (or reuse) the generated ALFWorld game for ``(seed, task_type, split)``.

    Args:
        seed: Any integer; the same arguments always give the same game.
        task_type: One of :data:`TASK_TYPES` (e.g. "pick_cool_then_place").
        split: "seen" (ALFRED training floor plans), "dev" (the same floor plans, another
            generator stream) or "unseen" (held-out floor plans).
        cache_dir: Folder for the ``.tw-pddl`` files (default :func:`default_cache_dir`).

    Returns:
        Path of a ``.tw-pddl`` JSON file loadable by TextWorld's ``PddlEnv``; its
        ``walkthrough`` is Fast Downward's winning plan.

    Raises:
        ConfigError: Unknown task type or split, or alfworld missing.
        RuntimeError: No floor plan of the split fits the task (not expected for the six types).
    """
    plans = floor_plans(split, task_type)
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = folder / f"v{GENERATOR_VERSION}-{split}-{task_type}-{seed}.tw-pddl"
    if path.exists():
        return path
    rng = random.Random(f"alfworld-generated:{GENERATOR_VERSION}:{split}:{task_type}:{seed}")
    sampler = _Sampler(rng, task_type)
    order = list(plans)
    rng.shuffle(order)
    for number in order:
        scene = sampler.sample(_floor_plan(number))
        if scene is None:
            continue
        data = _game_data(scene, f"{split}_{task_type}_{seed}")
        plan = solve(data)
        if plan is None:
            continue
        data["walkthrough"] = plan
        data["deltamem"] = {"generator": "alfworld-generated", "version": GENERATOR_VERSION,
                            "seed": seed, "task_type": task_type, "split": split,
                            "floor_plan": scene.plan, "goal": scene.goal_text}
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(path)  # atomic, so a concurrent reader never sees half a file
        return path
    raise RuntimeError(f"no {split} floor plan could host a {task_type} game (seed {seed})")


def _game_data(scene: _Scene, name: str) -> dict[str, Any]:
    _, _, root = _alfworld()
    grammar = (root / "data" / "alfred.twl2").read_text()
    return {"pddl_domain": (root / "data" / "alfred.pddl").read_text(),
            "grammar": grammar.replace("UNKNOWN GOAL", scene.goal_text),
            "pddl_problem": problem_pddl(scene, name), "solvable": True}


def solve(data: dict[str, Any]) -> list[str] | None:
    """Fast Downward's plan for a game, if it exists, wins when played and fits the budget."""
    from deltamem_bench.envs.alfworld_engine import open_engine

    engine = open_engine(with_plan=True)
    engine.load(data)
    state = engine.reset()
    plan = [str(c) for c in (state.get("policy_commands") or [])]
    if not plan or len(plan) > MAX_PLAN_LENGTH:
        return None
    won = False
    for command in plan:
        state, _, _ = engine.step(command)
        won = bool(state["won"])
    return plan if won else None
