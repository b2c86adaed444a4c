"""The text-game scene: the room, exit and door grammar of TextWorld(Express), ScienceWorld and
ALFWorld (the default scene, and the one the benchmark harness uses).

Identity (:meth:`TextGames.signature`): :func:`layout_signature` reduces a scene description to
its layout -- the room it names and the exits it lists. Knowledge learned in one layout is never
recalled for, or merged into, a scene with another (see ``DeltaMem.recall``): two
TextWorldExpress maps both start "You are in the kitchen" but differ in their exits, and their
facts must not mix. A text that names no room has the empty signature and matches any other such
text (no layout to compare).

Place (:meth:`TextGames.place`): the room an observation describes (:func:`scene_room`).

Facts (:meth:`TextGames.facts`), statements ``"<subject>: <statement>"`` (``core.knowledge``):

- a room description ("You are in the kitchen. …", "This room is called the hallway. …")
  gives ``In the kitchen: <what is there>`` and one fact per exit (``North of the kitchen: the
  corridor``, ``Door from the hallway to the kitchen: open``);
- "You open the wood door, revealing the laundry room." after ``open door to north`` gives
  ``North of the kitchen: the laundry room (through the wood door)``;
- "You move the pot to the sink." gives ``pot: in the sink``;
- a step that lowered the score (``Step.reward < 0``), or in a failed episode one known to
  have earned nothing (``<= 0``), gives no action fact: the agent's own wrong placement is
  not where the X goes, and "open cabinet: You open the cabinet." from a lost game is no
  knowledge worth handing out (a room description or a door it revealed still counts);
- movement replies only update the current room; replies about the agent itself (focus,
  inventory, waiting) give nothing;
- any other informative reply gives ``<action> [in the <room>]: <reply>`` (what an object does);
- rejected and no-op replies (:data:`NOISE`: the generic phrases plus ScienceWorld's "No known
  action matches", Inform's "That's not a verb I recognise" and "You decide to wait"), and
  observations repeated word for word, give nothing.

Trigger (:meth:`TextGames.trigger`): the scene text's first sentence.

**Instances and tendencies.** A listed item ``"<name> <number>"`` ("a cabinet 4", "a mug 2") is
an *instance* of the type ``<name>``. A scene whose first glance lists instances (ALFWorld's
floor plans) has *contents* (:meth:`TextGames.contents`, :func:`scene_contents`): the types it
lists, numbers stripped. Such scenes are random draws of their types -- every floor plan
numbers its receptacles anew and places objects afresh -- so their knowledge is matched by
contents (``core.knowledge.scene_overlap``), and what they teach is type-level tendencies
(``core.knowledge.episode_tendencies``), never instances: every sighting of an instance in an
instance ("On the countertop 1, you see a mug 2, ...", "You open the cabinet 3. ... In it, you
see a mug 1.", "You pick up the mug 2 from the cabinet 4.") gives ``mug: found in cabinet``,
counted once per episode (``1 of 1 episodes``), and the memory tallies them across episodes
(``mug: found in cabinet (3 of 4 episodes); found in countertop (1 of 4 episodes)``). An
instance the agent moved itself is no sighting afterwards. A scene without instances (TextWorld,
ScienceWorld) has no contents and keeps its exact layout and the facts above.
``TextGames(tendencies=False)`` turns this off (instance facts and exact layouts everywhere:
the rule before tendencies, kept as the probe's "before").
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from deltamem._util.lazyre import lazy
from deltamem.core.knowledge import episode_tendencies, supersede
from deltamem.core.model import Episode
from deltamem.scenes.text import (
    SENTENCE_END,
    Noise,
    clean,
    earned_nothing,
    first_sentence,
    flat,
    lowered_score,
)

# -- scene layouts ---------------------------------------------------------------------------

_ROOM = lazy(
    r"\b(?:you are in|this room is called|this outside location is called)\s+"
    r"(?:the\s+|an?\s+)?([^.\n]+?)\s*(?:\.|\n|$)",
    re.IGNORECASE,
)
# TextWorld(Express): "To the North you see a closed wood door." /
# "Through an open patio door, to the North you see the kitchen."
_DIRECTION_EXIT = lazy(
    r"\bto the (north|south|east|west|up|down)\b,? you see\s+([^.\n]+)", re.IGNORECASE
)
# ScienceWorld: "A door to the art studio (that is open)".
_DOOR_EXIT = lazy(r"\ba door to (?:the\s+)?([^(\n]+?)\s*\(", re.IGNORECASE)
# ALFWorld: "You are in the middle of a room. Looking quickly around you, you see a cabinet 4,
# a cabinet 3, ..., and a toilet 1." Every ALFWorld room starts with the same sentence, and the
# numbered receptacles are the floor plan.
_GLANCE = lazy(r"\blooking quickly around you, you see\s+([^.\n]+)", re.IGNORECASE)
_LIST_SPLIT = lazy(r",\s*(?:and\s+)?|\s+and\s+", re.IGNORECASE)
_STATE_WORDS = lazy(r"\b(?:an?|the|open|opened|closed|locked)\b\s*", re.IGNORECASE)


def scene_room(text: str) -> str:
    """The room a scene description names ("kitchen"), or "" when it names none."""
    match = _ROOM.search(text)
    return " ".join(match.group(1).lower().split()) if match else ""


def layout_signature(scene: str) -> str:
    """The layout of a scene description: its room and its exits, normalised.

    Door states and articles are dropped ("a closed wood door" and "an open wood door" are one
    exit), so opening a door does not change the layout. ALFWorld's first glance ("Looking
    quickly around you, you see a cabinet 4, ... and a toilet 1") lists the floor plan's
    receptacles, which count as its exits. "" when the text names no room.
    """
    room = scene_room(scene)
    if not room:
        return ""
    exits = [f"{d.lower()}={_exit_name(what)}" for d, what in _DIRECTION_EXIT.findall(scene)]
    exits += [f"door={_exit_name(what)}" for what in _DOOR_EXIT.findall(scene)]
    for listing in _GLANCE.findall(scene):
        exits += [f"see={_exit_name(item)}" for item in _LIST_SPLIT.split(listing)
                  if item.strip()]
    return "|".join([room, *sorted(set(exits))])


def _exit_name(text: str) -> str:
    return " ".join(_STATE_WORDS.sub("", text).lower().split())


# "a cabinet 4" -> cabinet: a listed name followed by its instance number.
_INSTANCE = lazy(r"^(?:(?:an?|the)\s+)?(.*?[^\W\d_])\s+\d+$", re.IGNORECASE)
# "On the countertop 1, you see a mug 2, and a spoon 1." / "In it, you see ..."
_SIGHTING = lazy(r"\b(?:on|in) (?:the )?([^,.]+?), you see ([^.]+)", re.IGNORECASE)
# "You pick up the mug 2 from the cabinet 4."
_TAKEN = lazy(r"\byou pick up (?:the )?(.+?) from (?:the )?([^.]+)", re.IGNORECASE)
_FIRST_INSTANCE = lazy(r"\b([^\W\d_]+) \d+\b")


def instance_type(item: str) -> str:
    """The type of a listed instance ("a cabinet 4" -> "cabinet"), "" when the item is no
    ``"<name> <number>"`` instance."""
    match = _INSTANCE.match(" ".join(item.split()))
    return match.group(1).lower() if match else ""


def scene_contents(scene: str) -> frozenset[str]:
    """The types of the instances a scene's first glance lists (empty when it lists none)."""
    types: set[str] = set()
    for listing in _GLANCE.findall(scene):
        types.update(instance_type(item) for item in _LIST_SPLIT.split(listing))
    return frozenset(types - {""})


def _sightings(observation: str, moved: set[str]) -> Iterator[str]:
    """``"<object type>: found in <receptacle type>"`` for every instance an observation shows
    in (or taken from) an instance, less the instances in ``moved`` (the agent put them)."""
    text = flat(observation)
    pairs: list[tuple[str, str]] = []
    for where, listing in _SIGHTING.findall(text):
        if where.strip().lower() == "it":  # "You open the cabinet 3. ... In it, you see ..."
            first = _FIRST_INSTANCE.search(text)
            where = first.group(0) if first else ""
        pairs += [(item, where) for item in _LIST_SPLIT.split(listing)]
    pairs += _TAKEN.findall(text)
    for item, where in pairs:
        kind, place = instance_type(item), instance_type(where)
        if kind and place and _instance(item) not in moved:
            yield f"{kind}: found in {place}"


def _instance(item: str) -> str:
    return " ".join(_STATE_WORDS.sub("", item).lower().split())


# -- the facts of an episode ---------------------------------------------------------------

_MOVED = lazy(r"^you (?:move|go|walk|arrive) (?:to|at|in) (?:the )?([^.]+)\.?$", re.I)
_AGENT_ONLY = lazy(
    r"^you (?:focus on|decide to|wait|take|pick up|are carrying|have)\b|to the inventory\.?$|"
    r"^in your inventory",
    re.IGNORECASE,
)
_REVEALING = lazy(r"^you open (?:the )?([^,]+?),? revealing (?:the )?([^.]+)\.?$", re.I)
_MOVED_OBJECT = lazy(r"^you move (?:the )?(.+?) (?:to|into|onto|in|on) (?:the )?([^.]+)\.?$",
                     re.IGNORECASE)
_ACTION_DIRECTION = lazy(r"\b(north|south|east|west|up|down)\b", re.IGNORECASE)
# A TextWorld(Express) description: object sentences, then exits by compass direction.
_TW_EXIT = lazy(r"^(?:through an? ([^,]+), )?to the (north|south|east|west|up|down),? "
                r"you see (.+?)\.?$", re.IGNORECASE)
_TW_LEAD = lazy(
    r"^(?:in (?:one|another) part of the room you see|there is also|you also see|"
    r"you see|there is)\s+", re.IGNORECASE)
_TW_STATE = lazy(r",? that (?:is|has) (.+)$", re.IGNORECASE)
# A ScienceWorld description: tab-indented items, doors as "A door to the X (that is open)".
_SW_DOOR = lazy(r"^a door to (?:the )?(.+?) \(that is (\w+)\)$", re.IGNORECASE)


# The games' own ways of saying a step did not happen or changed nothing (the generic phrases of
# ``scenes.text`` are always included).
NOISE = Noise(rejected=(r"no known action matches", r"that'?s not a verb"),
              no_op=(r"you decide to wait",))


class TextGames:
    """The text-game scene (see the module docstring); stateless, so one instance is shared."""

    name = "text-games"
    noise = NOISE

    def __init__(self, *, tendencies: bool = True) -> None:
        self.tendencies = tendencies

    def signature(self, scene: str) -> str:
        return layout_signature(scene)

    def contents(self, scene: str) -> frozenset[str]:
        """The types of the instances the scene lists (see the module docstring)."""
        return scene_contents(scene) if self.tendencies else frozenset()

    def place(self, observation: str) -> str:
        return scene_room(observation)

    def trigger(self, scene: str, max_chars: int) -> str:
        return first_sentence(scene, max_chars)

    def facts(self, episode: Episode, max_chars: int) -> tuple[str, ...]:
        if self.contents(episode.env):
            return self.tendency_facts(episode, max_chars)
        room = scene_room(episode.env)
        facts: list[str] = []
        seen: set[str] = set()
        for step in episode.steps:
            observation = step.observation.strip()
            if self.noise.says_nothing(observation) or observation in seen:
                continue  # a repeated identical observation says nothing new
            seen.add(observation)
            moved = _MOVED.match(flat(observation))
            named = scene_room(observation) or (moved.group(1).strip().lower() if moved else "")
            if named:
                room = named
            if not moved:
                # A step that lowered the score was wrong, however the episode ended; in a
                # failed episode a step that earned nothing is not known to be right either.
                unrewarded = lowered_score(step) or (not episode.success and earned_nothing(step))
                facts += _statements(step.action, observation, room, bool(named), unrewarded,
                                     max_chars)
        return supersede((), facts)

    def tendency_facts(self, episode: Episode, max_chars: int) -> tuple[str, ...]:
        """The type-level sightings of an episode in a scene with instances, as one episode's
        tendencies (see the module docstring)."""
        facts: list[str] = []
        moved: set[str] = set()
        for step in episode.steps:
            if self.noise.says_nothing(step.observation):
                continue
            facts += _sightings(step.observation, moved)
            placed = _MOVED_OBJECT.match(flat(step.observation))
            if placed:
                moved.add(_instance(placed.group(1)))
        return tuple(clean(f, max_chars) for f in episode_tendencies(facts))

    def __repr__(self) -> str:
        return "TextGames()" if self.tendencies else "TextGames(tendencies=False)"


def _statements(action: str, observation: str, room: str, describes_room: bool,
                unrewarded: bool, max_chars: int) -> Iterator[str]:
    if describes_room:
        yield from _room_facts(observation, room, max_chars)
        return
    text = flat(observation)
    if _AGENT_ONLY.search(text):
        return  # the agent's own state (focus, inventory, waiting) is no scene fact
    revealing = _REVEALING.match(text)
    direction = _ACTION_DIRECTION.search(action)
    if revealing and direction and room:
        door, beyond = revealing.groups()
        yield _fact(f"{direction.group(1).capitalize()} of the {room}",
                    f"the {beyond} (through the {door})", max_chars)
        return
    if unrewarded:
        return  # a placement or an action reply that the score did not confirm
    placed = _MOVED_OBJECT.match(text)
    if placed:
        yield _fact(placed.group(1), f"in the {placed.group(2)}", max_chars)
        return
    where = f" in the {room}" if room else ""
    yield _fact(f"{clean(action, 80)}{where}", text, max_chars)


def _room_facts(observation: str, room: str, max_chars: int) -> Iterator[str]:
    contents: list[str] = []
    exits: list[str] = []
    if "\t" in observation:  # ScienceWorld: one item per tab-indented line
        for line in observation.splitlines():
            item = flat(line)
            if not line.startswith("\t") or not item or item == "the agent":
                continue
            door = _SW_DOOR.match(item)
            if door:
                exits.append(_fact(f"Door from the {room} to the {door.group(1)}",
                                   door.group(2), max_chars))
            else:
                contents.append(item.rstrip("."))
    else:  # TextWorld(Express): sentences
        for sentence in SENTENCE_END.split(flat(observation)):
            sentence = sentence.strip().rstrip(".")
            exit_ = _TW_EXIT.match(sentence)
            if exit_:
                through, direction, what = exit_.groups()
                what = f"{what} (through {through})" if through else what
                exits.append(_fact(f"{direction.capitalize()} of the {room}", what, max_chars))
            elif sentence and scene_room(sentence + ".") != room:
                item = _TW_STATE.sub(r" (\1)", _TW_LEAD.sub("", sentence))
                contents.append(item)
    if contents:
        listing = clean("; ".join(contents), max_chars * 4)
        yield f"In the {room}: {listing}"
    yield from exits


def _fact(subject: str, statement: str, max_chars: int) -> str:
    return clean(f"{subject}: {statement}", max_chars)
