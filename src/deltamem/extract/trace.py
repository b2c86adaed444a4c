"""The trace extractor: experiences read straight off the trajectory, no model, no cost.

Rules (deterministic, documented in docs/extractors.md):

* **Noise.** A step is *rejected* when its observation is an invalid-action reply ("No known
  action matches…", "I don't understand"), a *no-op* when the reply says nothing changed
  ("Nothing happens.", "The door is already open."), and a *repeat* when it has the same action
  and the same observation as the step kept just before it.
* Task tree, successful episode -> ``Skill``: activation = the task text; steps = the actions in
  order without rejected steps, repeats (a ``look around`` loop becomes one ``look around``)
  and mistakes (a step that lowered the score, ``Step.reward < 0``: an agent's own win may put
  a thing in the wrong place on its way), and without *detours* (:func:`without_detours`): a
  *retraced move*, a move into another described room followed by a move that brings back,
  word for word, the room description seen before it (``move north``, ``move south``: a room
  looked into and left; TextWorldExpress's gold paths for Coin Collector walk into rooms and
  back), and an *undone step*, ``open X`` followed by ``close X`` or the other way round (an
  agent's own wins open and shut cabinets on the way); nested pairs go too. No-op steps stay:
  "open door to kitchen" did nothing here because the door was open, and is needed where it is
  closed. termination = the last observation.
* Task tree, failed episode -> ``Lesson``: situation = the task text; failed = each step whose
  observation reads as an error or that lowered the score (``Step.reward < 0``; or, when none
  does, the last step), written ``<action> (step N) -> "<observation>"`` (``(step N, score
  -0.25)`` for a score drop) so the error text is kept; worked = the other actions
  (repeats removed), less those the environment scored at nothing (``Step.reward <= 0``: in a
  lost game, opening an empty cabinet is no evidence of what works); untried = the steps of
  the skill the episode matched that it never played (empty when it matched none: a trace
  cannot know more).
* Environment tree, any outcome -> ``Knowledge``: trigger = the first sentence of the scene text;
  facts = statements ``"<subject>: <statement>"`` about the scene (see ``core.knowledge``):

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
  - rejected and no-op replies, and observations repeated word for word, give nothing.

  A newer fact about a subject supersedes the older one in place (``core.knowledge.supersede``),
  within the episode and against the matched knowledge, so composed knowledge never holds two
  statements about one subject. Knowledge accumulates: when the episode matched a known scene,
  the new experience is the known facts updated by the episode's (the oldest facts the episode
  did not see again dropped beyond ``max_facts``); the stored residual is then exactly the new
  and the superseded facts -- the paper's "smallest update".

Whitespace is collapsed everywhere and every text item is cut to ``max_chars`` (a room's contents
to four times that) so that a noisy observation cannot blow up the memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from deltamem.core.knowledge import scene_room, supersede
from deltamem.core.model import Episode, Knowledge, Lesson, Skill, Step, Tree
from deltamem.extract.base import Extraction, ExtractRequest

_WS = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_REJECTED = re.compile(
    r"^(no known action matches|i don'?t understand|invalid action|unknown command|"
    r"that'?s not a verb|you can'?t do that)",
    re.IGNORECASE,
)
_NO_OP = re.compile(
    r"^(nothing happens|nothing happened|(?:the|this|that|it) [\w -]*is already|"
    r"you are already|you decide to wait)",
    re.IGNORECASE,
)
_ERROR = re.compile(
    r"\b(errors?|fail(?:s|ed|ure)?|fatal|forbidden|denied|refused|rejected|not allowed|"
    r"not permitted|cannot|can'?t|could ?n[o']t|unable|invalid|no known action|not found|"
    r"no such|exception|traceback|timed out|timeout|nothing happens|don'?t understand)\b",
    re.IGNORECASE,
)
_MOVED = re.compile(r"^you (?:move|go|walk|arrive) (?:to|at|in) (?:the )?([^.]+)\.?$", re.I)
_AGENT_ONLY = re.compile(
    r"^you (?:focus on|decide to|wait|take|pick up|are carrying|have)\b|to the inventory\.?$|"
    r"^in your inventory",
    re.IGNORECASE,
)
_REVEALING = re.compile(r"^you open (?:the )?([^,]+?),? revealing (?:the )?([^.]+)\.?$", re.I)
_MOVED_OBJECT = re.compile(r"^you move (?:the )?(.+?) (?:to|into|onto|in|on) (?:the )?([^.]+)\.?$",
                           re.IGNORECASE)
_ACTION_DIRECTION = re.compile(r"\b(north|south|east|west|up|down)\b", re.IGNORECASE)
# A TextWorld(Express) description: object sentences, then exits by compass direction.
_TW_EXIT = re.compile(r"^(?:through an? ([^,]+), )?to the (north|south|east|west|up|down),? "
                      r"you see (.+?)\.?$", re.IGNORECASE)
_TW_LEAD = re.compile(
    r"^(?:in (?:one|another) part of the room you see|there is also|you also see|"
    r"you see|there is)\s+", re.IGNORECASE)
_TW_STATE = re.compile(r",? that (?:is|has) (.+)$", re.IGNORECASE)
# A ScienceWorld description: tab-indented items, doors as "A door to the X (that is open)".
_SW_DOOR = re.compile(r"^a door to (?:the )?(.+?) \(that is (\w+)\)$", re.IGNORECASE)


def _flat(text: str) -> str:
    """``text`` with its whitespace collapsed to single spaces and trimmed."""
    return _WS.sub(" ", text).strip()


def clean(text: str, max_chars: int) -> str:
    """Collapse whitespace and cut to ``max_chars`` characters."""
    text = _flat(text)
    return text if len(text) <= max_chars else text[: max_chars - 3].rstrip() + "..."


def first_sentence(text: str, max_chars: int) -> str:
    text = _flat(text)
    return clean(_SENTENCE_END.split(text, maxsplit=1)[0], max_chars)


def rejected(observation: str) -> bool:
    """Whether an observation is an invalid-action reply (the step did not happen)."""
    return bool(_REJECTED.match(_flat(observation)))


def says_nothing(observation: str) -> bool:
    """Whether an observation carries no scene information (empty, rejected or a no-op)."""
    text = _flat(observation)
    return not text or bool(_REJECTED.match(text) or _NO_OP.match(text))


def lowered_score(step: Step) -> bool:
    """Whether the step is known to have lowered the environment's score (a mistake)."""
    return step.reward is not None and step.reward < 0


def earned_nothing(step: Step) -> bool:
    """Whether the environment scored the step and it gained nothing (``Step.reward <= 0``).

    In a failed episode such a step is no evidence of what works: it is no "worked" step of the
    lesson and gives no action fact (``open cabinet: It's empty inside.`` played by an agent
    that lost)."""
    return step.reward is not None and step.reward <= 0


def useful_steps(steps: tuple[Step, ...]) -> list[tuple[int, Step]]:
    """The steps (1-based index, step) left after dropping rejected steps, repeats and
    mistakes: a step that lowered the score (``Step.reward < 0``) is no part of a procedure,
    even in an episode that was won in the end."""
    kept: list[tuple[int, Step]] = []
    for i, step in enumerate(steps, 1):
        if rejected(step.observation) or lowered_score(step):
            continue
        if kept and _same(kept[-1][1], step):
            continue
        kept.append((i, step))
    return kept


def without_detours(kept: list[tuple[int, Step]], start: str = "") -> list[tuple[int, Step]]:
    """``kept`` (from :func:`useful_steps`) without the detours: pairs of consecutive steps
    that left the world as the agent found it.

    * A *retraced move*: the first step's observation describes a room
      (``core.knowledge.scene_room``), the second one's describes another room, and that second
      description is word for word the one seen before the first step (``start``, the scene,
      before step one). Only room descriptions count: action replies repeat for different state
      changes ("The door is now open." after each door), and a ``look around`` after a ``focus
      on`` shows the same room although the focus changed the episode.
    * An *undone step*: the second step closes what the first opened or opens what it closed
      (:func:`_undoes`).

    Pairs nest, so a walk into two rooms and back drops all four moves, and ``open door``,
    ``move north``, ``move south``, ``close door`` is all detour. The last step is never dropped.
    """
    stack: list[tuple[int, Step, str, str]] = []  # (index, step, room it shows, view before)
    current = _flat(start)
    for position, (index, step) in enumerate(kept):
        seen = _flat(step.observation)
        room = scene_room(seen)
        retraced = (room and seen == stack[-1][3] and stack[-1][2] not in ("", room)) \
            if stack else False
        if stack and position < len(kept) - 1 and (retraced or _undoes(stack[-1][1], step)):
            stack.pop()
        else:
            stack.append((index, step, room, current))
        current = seen
    return [(index, step) for index, step, _, _ in stack]


def _undoes(first: Step, second: Step) -> bool:
    """Whether ``second`` closes what ``first`` opened or opens what it closed (``open X`` /
    ``close X``), neither reply a no-op. Only opening and closing: switching a device off is
    no undo (ScienceWorld's sink runs for the step it is on)."""
    if says_nothing(first.observation) or says_nothing(second.observation):
        return False
    a, b = _flat(first.action).lower(), _flat(second.action).lower()
    return any(a.startswith(x + " ") and b.startswith(y + " ") and a[len(x):] == b[len(y):]
               for x, y in (("open", "close"), ("close", "open")))


def _same(a: Step, b: Step) -> bool:
    return _flat(a.action) == _flat(b.action) and \
        _flat(a.observation) == _flat(b.observation)


class TraceExtractor:
    """Deterministic extractor (see the module docstring for its rules)."""

    name = "trace"
    uses_llm = False

    def __init__(self, *, max_facts: int = 80, max_chars: int = 300):
        self.max_facts = max_facts
        self.max_chars = max_chars

    def extract(self, request: ExtractRequest) -> Extraction:
        episode = request.episode
        if request.tree is Tree.ENV:
            known = request.matched if isinstance(request.matched, Knowledge) else None
            alone = self.knowledge(episode)
            merged = self.knowledge(episode, known) if known is not None else alone
            return Extraction(merged, standalone=alone)
        if episode.success:
            return Extraction(self.skill(episode))
        matched = request.matched if isinstance(request.matched, Skill) else None
        return Extraction(self.lesson(episode, matched))

    def compile(self, tree: Tree, composed: Skill | Knowledge | Lesson) -> Extraction:
        """The exact composition is already self-contained; nothing to generalise."""
        return Extraction(composed, note="exact composition")

    def skill(self, episode: Episode) -> Skill:
        last = episode.steps[-1].observation if episode.steps else ""
        return Skill(
            activation=clean(episode.task, self.max_chars),
            steps=tuple(clean(s.action, self.max_chars) for _, s in
                        without_detours(useful_steps(episode.steps), episode.env)),
            termination=clean(last, self.max_chars),
        )

    def lesson(self, episode: Episode, matched: Skill | None = None) -> Lesson:
        """The failure record: failing steps with their error text, what worked, what not.

        A step fails when its reply reads as an error or when it lowered the score
        (``Step.reward < 0``: "You put the hiking boots in the umbrella stand." reads as fine,
        and undid a point); without either, the last step is blamed."""
        steps = episode.steps
        errors = [i for i, s in enumerate(steps, 1)
                  if _ERROR.search(s.observation) or lowered_score(s)]
        if not errors and steps:
            errors = [len(steps)]
        failed = tuple(self._quote(i, steps[i - 1]) for i in errors)
        worked_steps = [s for i, s in useful_steps(steps)
                        if i not in errors and not earned_nothing(s)]
        worked = tuple(dict.fromkeys(clean(s.action, self.max_chars) for s in worked_steps))
        played = {clean(s.action, self.max_chars) for s in steps}
        untried = tuple(s for s in (matched.steps if matched else ()) if s not in played)
        return Lesson(situation=clean(episode.task, self.max_chars), failed=failed,
                      untried=tuple(dict.fromkeys(untried)), worked=worked)

    def _quote(self, index: int, step: Step) -> str:
        action = clean(step.action, 120)
        where = f"step {index}"
        if lowered_score(step):
            where += f", score {step.reward:g}"
        observation = clean(step.observation, self.max_chars - len(action) - len(where) - 8)
        return f'{action} ({where}) -> "{observation}"'

    def knowledge(self, episode: Episode, known: Knowledge | None = None) -> Knowledge:
        """The episode's facts, superseding the ``known`` ones when it matched a known scene.

        Over ``max_facts``, the oldest known facts this episode did not observe again go first."""
        own = self._facts(episode)
        trigger = first_sentence(episode.env, self.max_chars)
        if known is None:
            return Knowledge(trigger=trigger, facts=own)
        merged = list(supersede(known.facts, own))
        overflow = len(merged) - self.max_facts
        if overflow > 0:
            own_set = set(own)
            dropped = set([f for f in merged if f not in own_set][:overflow])
            merged = [f for f in merged if f not in dropped]
        return Knowledge(trigger=trigger, facts=tuple(merged))

    def _facts(self, episode: Episode) -> tuple[str, ...]:
        room = scene_room(episode.env)
        facts: list[str] = []
        seen: set[str] = set()
        for step in episode.steps:
            observation = step.observation.strip()
            if says_nothing(observation) or observation in seen:
                continue  # a repeated identical observation says nothing new
            seen.add(observation)
            moved = _MOVED.match(_flat(observation))
            named = scene_room(observation) or (moved.group(1).strip().lower() if moved else "")
            if named:
                room = named
            if not moved:
                # A step that lowered the score was wrong, however the episode ended; in a
                # failed episode a step that earned nothing is not known to be right either.
                unrewarded = lowered_score(step) or (not episode.success and earned_nothing(step))
                facts += self._statements(step.action, observation, room, bool(named),
                                          unrewarded)
        return supersede((), facts)[: self.max_facts]

    def _statements(self, action: str, observation: str, room: str,
                    describes_room: bool, unrewarded: bool) -> Iterator[str]:
        if describes_room:
            yield from self._room_facts(observation, room)
            return
        text = _flat(observation)
        if _AGENT_ONLY.search(text):
            return  # the agent's own state (focus, inventory, waiting) is no scene fact
        revealing = _REVEALING.match(text)
        direction = _ACTION_DIRECTION.search(action)
        if revealing and direction and room:
            door, beyond = revealing.groups()
            yield self._fact(f"{direction.group(1).capitalize()} of the {room}",
                             f"the {beyond} (through the {door})")
            return
        if unrewarded:
            return  # a placement or an action reply that the score did not confirm
        placed = _MOVED_OBJECT.match(text)
        if placed:
            yield self._fact(placed.group(1), f"in the {placed.group(2)}")
            return
        where = f" in the {room}" if room else ""
        yield self._fact(f"{clean(action, 80)}{where}", text)

    def _room_facts(self, observation: str, room: str) -> Iterator[str]:
        contents: list[str] = []
        exits: list[str] = []
        if "\t" in observation:  # ScienceWorld: one item per tab-indented line
            for line in observation.splitlines():
                item = _flat(line)
                if not line.startswith("\t") or not item or item == "the agent":
                    continue
                door = _SW_DOOR.match(item)
                if door:
                    exits.append(self._fact(f"Door from the {room} to the {door.group(1)}",
                                            door.group(2)))
                else:
                    contents.append(item.rstrip("."))
        else:  # TextWorld(Express): sentences
            for sentence in _SENTENCE_END.split(_flat(observation)):
                sentence = sentence.strip().rstrip(".")
                exit_ = _TW_EXIT.match(sentence)
                if exit_:
                    through, direction, what = exit_.groups()
                    what = f"{what} (through {through})" if through else what
                    exits.append(self._fact(f"{direction.capitalize()} of the {room}", what))
                elif sentence and scene_room(sentence + ".") != room:
                    item = _TW_STATE.sub(r" (\1)", _TW_LEAD.sub("", sentence))
                    contents.append(item)
        if contents:
            listing = clean("; ".join(contents), self.max_chars * 4)
            yield f"In the {room}: {listing}"
        yield from exits

    def _fact(self, subject: str, statement: str) -> str:
        return clean(f"{subject}: {statement}", self.max_chars)
