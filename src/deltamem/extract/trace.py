"""The trace extractor: experiences read straight off the trajectory, no model, no cost.

Rules (deterministic, documented in docs/extractors.md):

* **Noise.** A step is *rejected* when its observation is an invalid-action reply ("I don't
  understand", "Invalid action"), a *no-op* when the reply says nothing changed ("Nothing
  happens.", "The door is already open."), and a *repeat* when it has the same action and the
  same observation as the step kept just before it. The scene plug-in may add its domain's
  phrases (``scenes.text.Noise``; the text-game scene adds its games' own).
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
* Environment tree, any outcome -> ``Knowledge``: trigger and facts come from the extractor's
  scene plug-in (``deltamem.scenes``; by default ``TextGames``, whose module docstring lists its
  fact rules: room descriptions, exits, doors revealed, objects moved, ``<action>: <reply>``
  otherwise). The plug-in also names the place an observation shows (the room, for detours).
  Rejected and no-op replies, observations repeated word for word, and steps the score did not
  confirm give no action fact under any scene.

  A newer fact about a subject supersedes the older one in place (``core.knowledge.supersede``),
  within the episode and against the matched knowledge, so composed knowledge never holds two
  statements about one subject; a tendency (a fact with support counts, which a scene with
  instances writes) tallies with the known one about its subject instead
  (``core.knowledge.absorb``: "mug: found in cabinet (3 of 4 episodes)"). Knowledge
  accumulates: when the episode matched a known scene, the new experience is the known facts
  updated by the episode's (the oldest facts the episode did not see again dropped beyond
  ``max_facts``); the stored residual is then exactly the new and the superseded facts -- the
  paper's "smallest update".

Whitespace is collapsed everywhere and every text item is cut to ``max_chars`` (a room's contents
to four times that) so that a noisy observation cannot blow up the memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from deltamem.core.knowledge import absorb, fact_subject
from deltamem.core.model import Episode, Knowledge, Lesson, Skill, Step, Tree
from deltamem.extract.base import Extraction, ExtractRequest
from deltamem.scenes.base import Scene
from deltamem.scenes.text import (
    Noise,
    clean,
    earned_nothing,
    first_sentence,
    flat,
    lowered_score,
    noise_of,
    rejected,
    says_nothing,
)
from deltamem.scenes.text_games import TextGames

__all__ = ["TraceExtractor", "clean", "earned_nothing", "first_sentence", "lowered_score",
           "rejected", "says_nothing", "useful_steps", "without_detours"]

_flat = flat
_ERROR = re.compile(
    r"\b(errors?|fail(?:s|ed|ure)?|fatal|forbidden|denied|refused|rejected|not allowed|"
    r"not permitted|cannot|can'?t|could ?n[o']t|unable|invalid|not found|"
    r"no such|exception|traceback|timed out|timeout|nothing happens|don'?t understand)\b",
    re.IGNORECASE,
)
_DEFAULT_SCENE = TextGames()
_DEFAULT_NOISE = noise_of(_DEFAULT_SCENE)


def useful_steps(steps: tuple[Step, ...],
                 noise: Noise = _DEFAULT_NOISE) -> list[tuple[int, Step]]:
    """The steps (1-based index, step) left after dropping rejected steps (by ``noise``),
    repeats and mistakes: a step that lowered the score (``Step.reward < 0``) is no part of a
    procedure, even in an episode that was won in the end."""
    kept: list[tuple[int, Step]] = []
    for i, step in enumerate(steps, 1):
        if noise.rejected(step.observation) or lowered_score(step):
            continue
        if kept and _same(kept[-1][1], step):
            continue
        kept.append((i, step))
    return kept


def without_detours(kept: list[tuple[int, Step]], start: str = "",
                    place: Callable[[str], str] = _DEFAULT_SCENE.place,
                    noise: Noise = _DEFAULT_NOISE) -> list[tuple[int, Step]]:
    """``kept`` (from :func:`useful_steps`) without the detours: pairs of consecutive steps
    that left the world as the agent found it.

    * A *retraced move*: the first step's observation describes a room
      (``place``, the scene plug-in's, by default the text-game room), the second one's
      describes another room, and that second
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
        room = place(seen)
        retraced = (room and seen == stack[-1][3] and stack[-1][2] not in ("", room)) \
            if stack else False
        if stack and position < len(kept) - 1 and (retraced or _undoes(stack[-1][1], step,
                                                                       noise)):
            stack.pop()
        else:
            stack.append((index, step, room, current))
        current = seen
    return [(index, step) for index, step, _, _ in stack]


def _undoes(first: Step, second: Step, noise: Noise) -> bool:
    """Whether ``second`` closes what ``first`` opened or opens what it closed (``open X`` /
    ``close X``), neither reply a no-op. Only opening and closing: switching a device off is
    no undo (ScienceWorld's sink runs for the step it is on)."""
    if noise.says_nothing(first.observation) or noise.says_nothing(second.observation):
        return False
    a, b = _flat(first.action).lower(), _flat(second.action).lower()
    return any(a.startswith(x + " ") and b.startswith(y + " ") and a[len(x):] == b[len(y):]
               for x, y in (("open", "close"), ("close", "open")))


def _same(a: Step, b: Step) -> bool:
    return _flat(a.action) == _flat(b.action) and \
        _flat(a.observation) == _flat(b.observation)


class TraceExtractor:
    """Deterministic extractor (see the module docstring for its rules).

    ``scene`` is the scene plug-in that names places and reads facts (``deltamem.scenes``). Left
    None, the extractor follows the scene of the memory that asks (``ExtractRequest.scene``), and
    the text-game scene when used on its own; a scene given here is also the one a ``DeltaMem``
    built without an explicit ``scene`` adopts.
    """

    name = "trace"
    uses_llm = False

    def __init__(self, *, max_facts: int = 80, max_chars: int = 300, scene: Scene | None = None):
        self.max_facts = max_facts
        self.max_chars = max_chars
        self.scene: Scene | None = scene

    def extract(self, request: ExtractRequest) -> Extraction:
        episode = request.episode
        scene = self.scene or request.scene
        if request.tree is Tree.ENV:
            known = request.matched if isinstance(request.matched, Knowledge) else None
            alone = self.knowledge(episode, scene=scene)
            merged = self.knowledge(episode, known, scene=scene) if known is not None else alone
            return Extraction(merged, standalone=alone)
        if episode.success:
            return Extraction(self.skill(episode, scene=scene))
        matched = request.matched if isinstance(request.matched, Skill) else None
        return Extraction(self.lesson(episode, matched, scene=scene))

    def compile(self, tree: Tree, composed: Skill | Knowledge | Lesson) -> Extraction:
        """The exact composition is already self-contained; nothing to generalise."""
        return Extraction(composed, note="exact composition")

    def _scene(self, scene: Scene | None) -> Scene:
        return scene or self.scene or _DEFAULT_SCENE

    def skill(self, episode: Episode, *, scene: Scene | None = None) -> Skill:
        last = episode.steps[-1].observation if episode.steps else ""
        scene = self._scene(scene)
        noise = noise_of(scene)
        return Skill(
            activation=clean(episode.task, self.max_chars),
            steps=tuple(clean(s.action, self.max_chars) for _, s in
                        without_detours(useful_steps(episode.steps, noise), episode.env,
                                        scene.place, noise)),
            termination=clean(last, self.max_chars),
        )

    def lesson(self, episode: Episode, matched: Skill | None = None, *,
               scene: Scene | None = None) -> Lesson:
        """The failure record: failing steps with their error text, what worked, what not.

        A step fails when its reply reads as an error or a rejection (the scene's noise rules),
        or when it lowered the score (``Step.reward < 0``: "You put the hiking boots in the
        umbrella stand." reads as fine, and undid a point); without either, the last step is
        blamed."""
        steps = episode.steps
        noise = noise_of(self._scene(scene))
        errors = [i for i, s in enumerate(steps, 1)
                  if _ERROR.search(s.observation) or noise.rejected(s.observation)
                  or lowered_score(s)]
        if not errors and steps:
            errors = [len(steps)]
        failed = tuple(self._quote(i, steps[i - 1]) for i in errors)
        worked_steps = [s for i, s in useful_steps(steps, noise)
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

    def knowledge(self, episode: Episode, known: Knowledge | None = None, *,
                  scene: Scene | None = None) -> Knowledge:
        """The episode's facts, superseding the ``known`` ones when it matched a known scene.

        Over ``max_facts``, the oldest known facts this episode did not observe again go first."""
        scene = self._scene(scene)
        own = scene.facts(episode, self.max_chars)[: self.max_facts]
        trigger = scene.trigger(episode.env, self.max_chars)
        if known is None:
            return Knowledge(trigger=trigger, facts=own)
        merged = list(absorb(known.facts, own))
        overflow = len(merged) - self.max_facts
        if overflow > 0:
            seen = {fact_subject(f) for f in own}
            dropped = set([f for f in merged if fact_subject(f) not in seen][:overflow])
            merged = [f for f in merged if f not in dropped]
        return Knowledge(trigger=trigger, facts=tuple(merged))
