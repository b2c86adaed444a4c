"""An agent a small model can drive: it picks among valid actions instead of writing one.

Each step the agent builds a bounded candidate set from the environment's admissible actions and
lets the model rank them by length-normalised log-likelihood (:class:`~.scorer.LlamaScorer`); it
never plays an action the engine did not list. The candidate set always contains

1. the model's own proposal (a short greedy continuation) snapped to its nearest admissible
   actions,
2. every admissible action the injected memory block mentions (for DeltaMem: the recalled
   skill's steps; for a baseline: whatever its text names), in the order the block gives them,
3. the admissible actions nearest to the proposal, the task and the latest observation
   (word overlap), at most ``max_candidates // 6`` (at least 2) per verb so that one kind of
   action cannot crowd out the others, until ``max_candidates``.

Engines that list few actions (TextWorldExpress, ALFWorld) usually have all of them scored;
ScienceWorld lists thousands of action/object combinations, which is why the set is bounded.

Prompt layout (append-only but for its last turn, so the KV cache keeps every earlier step): the
system turn holds the environment's instruction, the first user turn the memory block, the task
and the first observation, then one assistant turn ``Action: ...`` and one user turn
``Observation: ...`` per step; only the latest user turn lists the candidates as "Valid actions"
(listing them in every turn would fill a small context with old lists). When the prompt would
outgrow ``context_tokens``, old steps are dropped in one go until it takes 60% of the budget, so
the cache is rebuilt once every several steps.

The memory's plan. The instructing lines of the memory block (warning lines, such as a failure
lesson or a FAILURE note, are left out) are split into phrases (:func:`plan_phrases`). A phrase
is carried out by the admissible action it names, or, when it names the objects of a past
episode, by the admissible action of the same verb whose words overlap it most
(:func:`adapt_step`; "put black pepper in shelf" -> "put red hot pepper in shelf"), if the
overlap reaches ``plan_match`` and the action keeps every word of the phrase that the task names
(a recalled "move keychain 1 to sidetable 1" is not carried out by "move box 1 to sidetable 1"
when the task is to put a keychain there). An abstract step's variables (AWM's "take <object>
from <receptacle>") each stand for one word of the action, the task's objects first, so an
abstract workflow is instantiated with the scene's objects by the same machinery that adapts
a concrete step. The plan's next step (:class:`Plan`) is always a
candidate and its score gets ``plan_bonus``; playing it marks its phrase done, passing it over
sends it behind the open phrases passed over fewer times. This is how a
small model follows a recalled procedure and uses recalled facts; it applies to every memory's
text the same way (no memory: no plan), and ``plan_bonus=0`` leaves the model alone.

Irreversible actions. An action that ends the episode when it names the wrong object (the
environment's ``irreversible`` prefixes: ScienceWorld's ``focus on``) is guarded by one rule for
every arm, ``ChoiceConfig.focus_guard``: by default (``open``) it is a candidate like any other.
The agent of the runs before 2026-12-04 let it through only when the task named its object in a
sentence that uses the prefix or when it was the memory plan's next step (``task-or-plan``,
:func:`guarded`): that rule depended on the memory, so the no-memory control could never focus
in the tasks whose sentence names no object ("First, focus on the thing"), six of the ten
ScienceWorld tasks of the suites, and a memory gained there by unlocking the action rather
than by choosing it well. ``task`` keeps the sentence rule alone (the same for every arm).

Agent rules that cannot favour a memory (issue 47, :data:`AGENT_RULES`), each a frozen option of
:class:`ChoiceConfig`, all off until chosen on dev by the *no-memory* arm's score alone
(``benchmarks/select_agent_rules.py``), then the same for every arm: ``no_put_back`` (the object
just taken is not put back where it was taken from, :func:`puts_back`), ``examine_penalty`` (an
``examine`` action already played in the episode is demoted), ``unvisited_bonus`` (a ``go to``
a place not yet gone to in the episode is promoted) and ``look_before_focus`` (an irreversible
action waits until the agent has looked or moved, :func:`has_looked_or_moved`). They read only
the episode's own actions and the action grammar (``take X from Y`` / ``move X to Y``), never
the memory, and they apply to the plan's step like any other candidate.

Two more rules keep the loop from cycling: an action already played in the same state (same
latest observation) is demoted, by ``repeat_penalty`` when it changed nothing (so that "look
around" is not chosen forever) and by ``revisit_penalty`` otherwise (so that "move east", "move
west" does not ping-pong). Every arm uses the same agent, so the rules favour no memory.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from deltamem import Usage
from deltamem.core.model import Episode
from deltamem.errors import ConfigError
from deltamem_bench.agent import (
    INVALID_REPLY,
    WORD,
    AgentResult,
    Record,
    clean_action,
    cut_text,
)
from deltamem_bench.envs.base import Environment, EpisodeSpec, Reset
from deltamem_bench.scorer import Scorer

CHOICE_HELP = ("Each turn, choose exactly one action from the list of valid actions and answer "
               "'Action: <action>'.")


@dataclass(frozen=True)
class ChoiceConfig:
    """Knobs of the choice agent.

    Attributes:
        max_candidates: Size bound of the candidate set.
        propose: Ask the model for a free-text proposal first (one short generation per step).
        repeat_penalty: Subtracted from the score of an action that was already played in the
            same state and changed nothing (log-probability units).
        revisit_penalty: Subtracted from the score of an action already played in the same
            state that did change something (it leads back where the agent has been).
        plan_bonus: Added to the score of the memory plan's next step (see the module
            docstring; 0 leaves the choice to the model alone).
        plan_match: The least overlap at which a recalled step is carried out by a valid action
            that names other objects (see :func:`adapt_step`); 1.0 plans only the actions the
            memory names exactly. 0.25 was chosen on the dev split of TextWorld Commonsense
            (exact mentions only: DeltaMem 0.27 below no memory there; 0.25: 0.06 below).
        verb_first: A recalled phrase is a plan step only when it starts with the action's verb
            (see :func:`adapt_step`; False is the agent of the runs before 2026-12-01 16:30 UTC,
            whose plans matched verbs anywhere, the memory block's prose included).
        keep_task_objects: An adapted plan step keeps the objects the task names (see
            :func:`adapt_step`; False is the agent of the runs before 2026-12-01 21:15 UTC, whose
            plans swapped them: "move keychain 1 to sidetable 1" became "move box 1 to sidetable
            1" in a game whose task is "put a keychain in sidetable").
        defer_passed: A plan step the agent passed over goes behind the open steps it has not
            passed over (see :class:`Plan`; False is the agent of the runs before 2026-12-02
            03:40 UTC, whose plan offered the same refused step until the episode ended: on
            ScienceWorld, 49% of DeltaMem's steps were spent in a run of three or more such
            refusals, "look around" offered twelve times while "go to hallway", the next step,
            was never offered).
        word_match: An adapted plan step must share a word with the recalled step beyond its
            verb and its numbers (see :func:`adapt_step`; False is the agent of the runs
            before 2026-12-06, whose plans carried "go to countertop 1" out by "go to shelf 1":
            the instance number was the only word in common, in 35 of 44 adapted navigation
            steps of an ALFWorld dev-2 replay).
        no_put_back: Leave out an action that puts the object just taken back where it was
            taken from (:func:`puts_back`; an agent rule of issue 47, off until chosen).
        examine_penalty: Subtracted from the score of an ``examine`` action already played in
            the episode, in any state (off at 0; issue 47).
        unvisited_bonus: Added to the score of a ``go to`` action whose place the agent has not
            gone to in the episode (off at 0; issue 47).
        look_before_focus: Leave out irreversible actions (ScienceWorld's ``focus on``) until
            the agent has looked or moved (:func:`has_looked_or_moved`; off by default; issue
            47). Applied with ``focus_guard``, and like it to every arm and to the plan's step.
        observation_chars: Observations are cut to this many characters in the prompt.
        memory_chars: The memory block is cut to this many characters (same for every arm).
        context_tokens: Prompt budget; the oldest steps are dropped beyond it.
        max_steps: Overrides the environment's ``max_steps`` when set.
        memory_in_prompt: Show the memory block to the model. Off, the memory acts only
            through the plan and the candidate set (a small model's choice degades with long
            prompts, so this separates "the memory's content" from "a longer prompt").
        focus_guard: When an irreversible action (ScienceWorld's ``focus on``) is a candidate
            (:data:`FOCUS_GUARDS`): ``open`` - always, as any other action (the default; the
            same action set for every arm, so a memory can gain only by naming the right
            object); ``task`` - only when the task's sentence with the prefix names its object
            (the same for every arm, but 6 of the 10 ScienceWorld tasks of the suites never
            name it - "focus on the thing" - so nobody can win them); ``task-or-plan`` - the
            task's sentence or the memory plan's next step (the agent of the runs before
            2026-12-04: it depends on the memory, so the no-memory control could never focus
            in those 6 tasks).
    """

    max_candidates: int = 15
    propose: bool = True
    repeat_penalty: float = 2.0
    revisit_penalty: float = 1.0
    plan_bonus: float = 1.0
    plan_match: float = 0.25
    verb_first: bool = True
    keep_task_objects: bool = True
    defer_passed: bool = True
    word_match: bool = True
    no_put_back: bool = False
    examine_penalty: float = 0.0
    unvisited_bonus: float = 0.0
    look_before_focus: bool = False
    observation_chars: int = 600
    memory_chars: int = 2400
    context_tokens: int = 3000
    max_steps: int | None = None
    memory_in_prompt: bool = True
    focus_guard: str = "open"

    def __post_init__(self) -> None:
        if self.focus_guard not in FOCUS_GUARDS:
            raise ConfigError(f"focus_guard must be one of {FOCUS_GUARDS}, got "
                              f"{self.focus_guard!r}")


FOCUS_GUARDS = ("open", "task", "task-or-plan")
# The memory-neutral agent rules of issue 47 and the setting that turns each on when chosen
# (benchmarks/select_agent_rules.py tries each on dev with the no-memory arm alone).
AGENT_RULES: dict[str, dict[str, Any]] = {
    "no_put_back": {"no_put_back": True},
    "examine_penalty": {"examine_penalty": 1.0},
    "unvisited_bonus": {"unvisited_bonus": 0.5},
    "look_before_focus": {"look_before_focus": True},
}
# The action grammar the rules read (ALFWorld's and TextWorld's "take X from Y" and
# "move/put X to/in/on Y"; ScienceWorld's "look around", "go to", "teleport to").
_TAKE = re.compile(r"^take (?P<obj>.+?) from (?P<place>.+)$")
_PUT = re.compile(r"^(?:move|put|place) (?P<obj>.+?) (?:to|in/on|into|onto|in|on) (?P<place>.+)$")
_LOOK_OR_MOVE = ("look", "go", "teleport")


# What each demoting rule waits for: it acts only once an action of this kind was played
# (``no_put_back`` after a ``take X from Y``, ``examine_penalty`` after an ``examine``). The
# other rules have none: a bonus or a gate may act at any step.
RULE_TRIGGERS: dict[str, Callable[[str], bool]] = {
    "no_put_back": lambda action: _TAKE.match(action) is not None,
    "examine_penalty": lambda action: action.startswith("examine "),
}


def puts_back(action: str, played: Sequence[str]) -> bool:
    """True when ``action`` puts the object of the last ``take X from Y`` of ``played`` back
    into ``Y`` and no action since has named that object (a "cool X with fridge" between
    them makes the return a step of the task, not an undo)."""
    put = _PUT.match(action)
    if put is None:
        return False
    for index in range(len(played) - 1, -1, -1):
        took = _TAKE.match(played[index])
        if took is not None:
            since = played[index + 1:]
            return (took["obj"] == put["obj"] and took["place"] == put["place"]
                    and not any(f" {took['obj']} " in f" {a} " for a in since
                                if not a.startswith(("go to", "examine", "look", "inventory"))))
    return False


def has_looked_or_moved(played: Sequence[str]) -> bool:
    """True once an action of ``played`` looked (``look around``, ``look at``) or moved the
    agent (``go to``, ``teleport to``)."""
    return any(a.split(" ", 1)[0] in _LOOK_OR_MOVE for a in played)


def rule_adjustment(action: str, played: Sequence[str], config: ChoiceConfig) -> float:
    """What the agent rules add to ``action``'s score given the episode's ``played`` actions:
    ``-examine_penalty`` for an ``examine`` played before, ``+unvisited_bonus`` for a
    ``go to`` not played before."""
    delta = 0.0
    if config.examine_penalty and action.startswith("examine ") and action in played:
        delta -= config.examine_penalty
    if config.unvisited_bonus and action.startswith("go to ") and action not in played:
        delta += config.unvisited_bonus
    return delta


def _words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def _overlap(a: set[str], b: set[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 0.0


# Lines of a memory block that warn rather than instruct (DeltaMem's failure lessons, the
# baselines' FAILURE notes and trajectories): their actions are never part of the plan.
_WARNING = re.compile(r"fail|avoid|warning|do not|don't|did not work|mistake", re.IGNORECASE)


def _normal(text: str) -> str:
    return " " + " ".join(WORD.findall(text.lower())) + " "


def plan_phrases(memory: str) -> list[tuple[str, ...]]:
    """The instructing part of a memory block as an ordered list of phrases (lower-case word
    tuples): warning lines and the blocks under a FAILURE marker are left out; lines are split
    at list numbers and at ``. : ;``, and one-word phrases are dropped unless they are a whole
    line (a one-word action such as ``inventory``)."""
    phrases: list[tuple[str, ...]] = []
    skipping = False
    for line in memory.splitlines():
        if not line.strip():
            skipping = False
            continue
        if _WARNING.search(line):
            skipping = line.strip().startswith(("WARNING", "[FAILURE]")) or skipping
            continue
        if skipping:
            continue
        line = _SLOT.sub(f" {SLOT} ", line)
        parts = [tuple(WORD.findall(part.lower())) for part in _CLAUSE.split(line)]
        phrases += [p for p in parts if len(p) > 1 or (p and len(parts) == 1)]
    return phrases


_CLAUSE = re.compile(r"[.:;!?]|^\s*(?:\d+[.)]|[-*])\s")
# A variable of an abstract workflow ("take <object> from <receptacle>", AWM's format): in a
# phrase it stands for any one word of the action that carries the step out (see adapt_step).
SLOT = "xslotx"
_SLOT = re.compile(r"<[^<>\n]{1,40}>")
# Words that say nothing about which object or place an action is about.
_GLUE = frozenset({"a", "an", "the", "in", "on", "into", "onto", "to", "from", "of", "with", "at",
                   "for", "and", "or", "is", "it", "its"})


def _content(words: Sequence[str]) -> set[str]:
    return {w for w in words if w not in _GLUE}


@lru_cache(maxsize=65_536)
def _action_words(action: str) -> tuple[str, ...]:
    # Why cached: every step compares every open phrase with every admissible action, and
    # ScienceWorld lists thousands of actions that recur from step to step.
    return tuple(WORD.findall(action.lower()))


def adapt_step(phrase: Sequence[str], admissible: Sequence[str], *,
               verb_first: bool = True,
               keep: frozenset[str] = frozenset(),
               word_match: bool = True) -> tuple[float, str] | None:
    """The valid action that best carries out a recalled step in the current scene.

    Recalled steps name the objects and places of past episodes ("put black pepper in shelf");
    a capable model adapts them, a small one copies them. An action whose words occur in the
    phrase as they are scores 1.0. Otherwise, where the phrase has the action's verb (its first
    word), the action's other content words are compared with the rest of the phrase (Jaccard;
    glue words such as "in", "the" left out): "put red hot pepper in shelf" carries out the
    step above with 0.4. ``(overlap, action)`` of the best action, or None when none shares its
    verb and a content word with the phrase.

    ``verb_first``: a phrase is an instruction only when it starts with the verb, and a one-word
    action ("task", "inventory") carries out only the phrase that is that word. Without it, the
    verb may stand anywhere, and the memory block's own prose became plan steps: ScienceWorld's
    "task" action matched "Task Description: ..." and, never played, blocked the whole plan.

    ``keep``: the words of the current task. A past object may be replaced by the scene's own,
    but a word of the phrase that the task names must stay in the adapted action: the task's
    objects are the goal. Without it, "move keychain 1 to sidetable 1" was carried out by "move
    box 1 to sidetable 1" in a game whose task is "put a keychain in sidetable".

    ``word_match``: an adapted action must share a content word that is not a number with the
    phrase (a variable of an abstract step counts as sharing). Without it, "go to countertop 1"
    was carried out by "go to shelf 1", the instance number their only word in common.
    """
    best: tuple[float, str] | None = None
    # The phrase's content after each place its verb may stand, and the task's words in it: the
    # same for every action, so computed once, not once per admissible action.
    starts = range(min(1, len(phrase))) if verb_first else range(len(phrase))
    slots = [phrase[at + 1:].count(SLOT) for at in starts]
    rests = [_content(phrase[at + 1:]) - {SLOT} for at in starts]
    needed = [rest & keep for rest in rests]
    for action in admissible:
        words = _action_words(action)
        if not words:
            continue
        if verb_first and len(words) == 1:
            if tuple(phrase) == words:
                return 1.0, action
            continue
        want = _content(words[1:])
        for at, word in enumerate(phrase[:1] if verb_first else phrase):
            if word != words[0]:
                continue
            if tuple(phrase[at:at + len(words)]) == words:
                return 1.0, action
            if not needed[at] <= want:
                continue
            if word_match and not slots[at] and not any(not w.isdigit()
                                                         for w in want & rests[at]):
                continue
            score = (_slotted(want, rests[at], slots[at], keep) if slots[at]
                     else _overlap(want, rests[at]))
            if score > 0 and (best is None or score > best[0]):
                best = (score, action)
    return best


def _slotted(want: set[str], rest: set[str], slots: int, keep: frozenset[str]) -> float:
    """The overlap of an action's words ``want`` with a phrase's words ``rest`` and ``slots``
    variables, each variable matching one action word the phrase does not name; among equal
    overlaps, the action whose variable words the task names scores a little more (a workflow's
    ``<object>`` is the task's object). Below 1.0: an instantiated step is never an exact one.
    """
    extra = want - rest
    filled = min(slots, len(extra))
    union = len(want | rest) + (slots - filled)
    base = (len(want & rest) + filled) / union if union else 0.0
    return min(0.99, base + 0.01 * len(extra & keep))


@dataclass
class Plan:
    """The memory's plan during one episode: the phrases of :func:`plan_phrases`, which of them
    were carried out, and the actions that carried them out.

    The next step is the best-carried-out phrase not yet done (an exact mention scores 1.0, so
    an exact procedure is followed in its order; ties go to the earlier phrase), with an overlap
    of at least ``cutoff`` (1.0: only the actions the memory names exactly). Taking the best
    rather than the first phrase matters for knowledge lists: holding a rotten apple, "put
    rotten banana in trash can" is carried out before an earlier "put hair brush in bathroom
    cabinet". An adapted step (overlap below 1.0) is never carried out by an action that
    already carried out another phrase: two facts about one cabinet do not send the same object
    there twice.

    ``defer_passed``: a step the agent passed over (it played another action while that step
    was the plan's next) is not offered again before every open step passed over fewer times:
    the order is fewest passes, then best carried out, then earliest. A small model refuses
    some steps whatever the bonus ("look around" in a room it already sees, 3-4 nats below the
    model's favourite); without the rule such a step stayed the next step to the end of the
    episode and hid every later one.
    """

    phrases: list[tuple[str, ...]]
    cutoff: float = 1.0
    verb_first: bool = True  # see adapt_step
    keep: frozenset[str] = frozenset()  # the task's words (see adapt_step)
    defer_passed: bool = True
    word_match: bool = True  # see adapt_step
    done: set[int] = field(default_factory=set)
    used: set[str] = field(default_factory=set)
    passed: dict[int, int] = field(default_factory=dict)  # phrase index -> times passed over
    # The last _best answer and the admissible actions it was for: a step asks next_step and
    # then played with the same actions; played clears it when it changes done/used.
    _last: tuple[tuple[str, ...], dict[str, tuple[float, int]]] | None = field(
        default=None, repr=False)

    def _best(self, admissible: Sequence[str]) -> dict[str, tuple[float, int]]:
        """For each action that carries out an open phrase: its best ``(overlap, -index)``."""
        key = tuple(admissible)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        best: dict[str, tuple[float, int]] = {}
        for index, phrase in enumerate(self.phrases):
            if index in self.done:
                continue
            found = adapt_step(phrase, admissible, verb_first=self.verb_first, keep=self.keep,
                               word_match=self.word_match)
            if found is not None and found[0] < 1.0 and found[1] in self.used:
                found = adapt_step(phrase, [a for a in admissible if a not in self.used],
                                   verb_first=self.verb_first, keep=self.keep,
                                   word_match=self.word_match)
            if found is not None and found[0] >= self.cutoff:
                score = (found[0], -index)
                best[found[1]] = max(best.get(found[1], score), score)
        self._last = (key, best)
        return best

    def next_step(self, admissible: Sequence[str]) -> str | None:
        """The action the plan asks for now, or None."""
        best = self._best(admissible)

        def order(action: str) -> tuple[int, float, int]:
            overlap, earlier = best[action]
            return -self.passed.get(-earlier, 0), overlap, earlier

        return max(best, key=order) if best else None

    def played(self, action: str, admissible: Sequence[str]) -> None:
        """Record that ``action`` was played: the phrase it carries out best is done, and the
        step the plan asked for, if it was another, was passed over."""
        carried = self._best(admissible)
        asked = self.next_step(admissible)
        if self.defer_passed and asked is not None and asked != action:
            index = -carried[asked][1]
            self.passed[index] = self.passed.get(index, 0) + 1
        best = carried.get(action)
        if best is not None:
            self.done.add(-best[1])
            self.used.add(action)
            self._last = None


def mention_offsets(text: str, admissible: Sequence[str]) -> list[tuple[int, str]]:
    """``(offset, action)`` for each admissible action occurring in normalised ``text`` as a
    whole phrase (first occurrence), in order of appearance."""
    found: list[tuple[int, str]] = []
    for action in admissible:
        phrase = _normal(action)
        if len(phrase) > 2:
            at = text.find(phrase)
            if at >= 0:
                found.append((at, action))
    return sorted(found)


def mentioned_actions(memory: str, admissible: Sequence[str]) -> list[str]:
    """Admissible actions that occur in ``memory`` as whole phrases, in order of appearance."""
    return [a for _, a in mention_offsets(_normal(memory), admissible)]


def guarded(admissible: Sequence[str], irreversible: Sequence[str], task: str,
            planned: str | None = None) -> list[str]:
    """``admissible`` without the irreversible actions that neither the task nor the plan names.

    An action starting with one of the ``irreversible`` prefixes stays when every content word
    of its object's name (the object before " in ": "anode" in "focus on anode in blue light
    bulb") occurs in a sentence of ``task`` that uses the same prefix (the task's other
    sentences name destinations: "move it to the orange box"), or when it is ``planned``.
    """
    if not irreversible:
        return list(admissible)
    sentences = [s.lower() for s in _SENTENCE.split(task)]
    named = {p: set(WORD.findall(" ".join(s for s in sentences if p in s))) for p in irreversible}
    kept = []
    for action in admissible:
        prefix = next((p for p in irreversible if action.startswith(p + " ")), None)
        if prefix is not None and action != planned:
            name = action[len(prefix) + 1:].split(" in ", 1)[0]
            words = _content(_action_words(name))
            if not words or not words <= named[prefix]:
                continue
        kept.append(action)
    return kept


_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def candidate_set(admissible: Sequence[str], *, proposal: str = "", memory: str = "",
                  context: str = "", bound: int = 20) -> list[str]:
    """The bounded, de-duplicated candidate list described in the module docstring."""
    unique = list(dict.fromkeys(a for a in admissible if a.strip()))
    if len(unique) <= bound:
        return unique
    chosen: list[str] = []

    def add(items: Sequence[str], limit: int) -> None:
        for item in items:
            if len(chosen) >= limit:
                return
            if item not in chosen:
                chosen.append(item)

    proposal_words = _words(proposal)
    by_proposal = sorted(unique, key=lambda a: -_overlap(proposal_words, _words(a)))
    if proposal_words:
        add(by_proposal[:3], bound)
    add(mentioned_actions(memory, unique), max(len(chosen), bound - bound // 4))
    context_words = _words(context)
    nearest = sorted(unique, key=lambda a: -(_overlap(proposal_words, _words(a))
                                             + _overlap(context_words, _words(a))))
    # Why: ScienceWorld lists thousands of "move X to Y" pairs; without a cap per verb they
    # crowd out every other kind of action.
    per_verb = max(2, bound // 6)
    verbs: dict[str, int] = {}
    for action in chosen:
        verbs[action.split(" ", 1)[0]] = verbs.get(action.split(" ", 1)[0], 0) + 1
    for action in nearest:
        verb = action.split(" ", 1)[0]
        if len(chosen) >= bound:
            break
        if action not in chosen and verbs.get(verb, 0) < per_verb:
            chosen.append(action)
            verbs[verb] = verbs.get(verb, 0) + 1
    add(nearest, bound)
    return chosen


class ChoiceAgent:
    """Plays episodes by letting a scorer rank admissible actions.

    Args:
        scorer: The model that ranks candidates (and proposes one).
        env: The environment (instruction and fallback action).
        config: Agent settings.
    """

    def __init__(self, scorer: Scorer, env: Environment,
                 config: ChoiceConfig | None = None) -> None:
        self.scorer = scorer
        self.env_name = env.name
        self.instruction = env.instruction
        self.fallback = env.fallback_action
        self.irreversible = tuple(env.irreversible)
        self.config = config or ChoiceConfig()

    # -- prompt ---------------------------------------------------------------------------
    def _system(self) -> str:
        return f"<|im_start|>system\n{self.instruction}\n{CHOICE_HELP}<|im_end|>\n"

    def _opening(self, reset: Reset, memory: str) -> str:
        parts = []
        if memory.strip() and self.config.memory_in_prompt:
            parts.append(cut_text(memory, self.config.memory_chars))
        parts.append(f"Task: {reset.task.strip()}")
        parts.append(f"Observation: {cut_text(reset.observation, self.config.observation_chars)}")
        return "\n".join(parts)

    @staticmethod
    def _user(text: str, candidates: Sequence[str] | None) -> str:
        listed = f"\nValid actions: {', '.join(candidates)}" if candidates else ""
        return f"<|im_start|>user\n{text}{listed}<|im_end|>\n"

    def prompt(self, history: Sequence[tuple[str, str]], current: str,
               candidates: Sequence[str] | None, drop: int = 0) -> str:
        """The prompt for the next choice.

        ``history`` holds one ``(user text, action chosen)`` per played step (the first user
        text is the opening); ``current`` is the latest user text, the only one that lists the
        candidates. ``drop`` steps after the opening are left out and named in one line.
        """
        text = self._system()
        for i, (user, action) in enumerate([*history[:1], *history[1 + drop:]]):
            if i == 1 and drop:
                # The last few dropped actions are named; the line stays short however many.
                names = [h[1] for h in history[1:1 + drop]]
                more = f"{len(names) - 8} more, then " if len(names) > 8 else ""
                user = f"(Earlier actions: {more}{'; '.join(names[-8:])})\n{user}"
            text += self._user(user, None)
            text += f"<|im_start|>assistant\nAction: {action}<|im_end|>\n"
        return text + self._user(current, candidates) + "<|im_start|>assistant\nAction:"

    def fit(self, history: Sequence[tuple[str, str]], current: str,
            candidates: Sequence[str], drop: int) -> int:
        """The number of old steps to leave out so that the prompt fits ``context_tokens``.

        Never less than ``drop``; when it must grow, it grows until the prompt takes at most
        60% of the budget, so the KV cache is rebuilt once every several steps, not every step.
        """
        budget = self.config.context_tokens
        if self.scorer.count(self.prompt(history, current, candidates, drop)) <= budget:
            return drop
        while drop < len(history) - 1 and self.scorer.count(
                self.prompt(history, current, candidates, drop)) > 0.6 * budget:
            drop += 1
        return drop

    def choose(self, history: Sequence[tuple[str, str]], current: str,
               options: Sequence[str], memory: str, context: str,
               tried: dict[tuple[str, str], bool], state: str,
               planned: str | None = None, drop: int = 0,
               played: Sequence[str] = ()) -> tuple[str, list[str], str, int]:
        """``(action, candidates, proposal, drop)`` for the current state.

        ``planned`` is the memory plan's next step (it is always a candidate and gets
        ``plan_bonus``); ``drop`` is the number of old steps left out of the prompt so far;
        ``played`` holds the episode's actions so far (the agent rules read them).
        """
        proposal = ""
        if self.config.propose and len(options) > self.config.max_candidates:
            draft = self.prompt(history, current, None, drop)
            proposal = clean_action(self.scorer.propose(draft))
        candidates = candidate_set(options, proposal=proposal, memory=memory, context=context,
                                   bound=self.config.max_candidates)
        if planned is not None and planned not in candidates:
            candidates[-1] = planned
        drop = self.fit(history, current, candidates, drop)
        scores = self.scorer.score(self.prompt(history, current, candidates, drop),
                                   [" " + c for c in candidates])
        adjusted = [s - self._penalty(tried.get((state, c)))
                    + (self.config.plan_bonus if c == planned else 0.0)
                    + rule_adjustment(c, played, self.config)
                    for s, c in zip(scores, candidates, strict=True)]
        best = max(range(len(candidates)), key=adjusted.__getitem__)
        return candidates[best], candidates, proposal, drop

    def _penalty(self, changed_nothing: bool | None) -> float:
        if changed_nothing is None:
            return 0.0
        return self.config.repeat_penalty if changed_nothing else self.config.revisit_penalty

    def _allowed(self, options: list[str], task: str, planned: str | None,
                 played: Sequence[str] = ()) -> list[str]:
        """The actions the agent may choose from (see ``ChoiceConfig.focus_guard``,
        ``look_before_focus`` and ``no_put_back``)."""
        kept = options
        if self.config.no_put_back:
            kept = [a for a in kept if not puts_back(a, played)]
        if self.irreversible and self.config.look_before_focus and not has_looked_or_moved(
                played):
            kept = [a for a in kept if not a.startswith(tuple(p + " " for p in
                                                             self.irreversible))]
        guard = self.config.focus_guard
        if guard != "open" and self.irreversible:
            kept = guarded(kept, self.irreversible, task,
                           planned if guard == "task-or-plan" else None)
        return kept or [self.fallback]

    # -- loop -----------------------------------------------------------------------------
    def run(self, env: Environment, spec: EpisodeSpec,
            memory: str | Callable[[Reset], str] = "") -> AgentResult:
        """Load ``spec``, play it to the end and return the recorded episode."""
        started = time.perf_counter()
        before = self.scorer.stats.copy()
        env.load(spec)
        reset = env.reset()
        # Why: the plan and the candidates read the same cut block the model is shown; before,
        # they read the whole block, so an arm over the budget planned from text the model
        # never saw (Synapse and ReasoningBank cap at 3,000 characters, the budget is 2,400).
        block = cut_text(memory(reset) if callable(memory) else memory,
                         self.config.memory_chars)
        current = self._opening(reset, block)
        limit = self.config.max_steps or env.max_steps
        record = Record()
        history: list[tuple[str, str]] = []
        drop = 0
        raw: list[str] = []
        tried: dict[tuple[str, str], bool] = {}  # (state, action) -> it changed nothing
        admissible = reset.admissible if reset.admissible is not None else env.admissible()
        state = reset.observation.strip()
        invalid = 0
        first_prompt = ""
        keep = frozenset(_content(_action_words(reset.task))
                         if self.config.keep_task_objects else ())
        plan = Plan(plan_phrases(block), self.config.plan_match, self.config.verb_first, keep,
                    self.config.defer_passed, self.config.word_match)
        played: list[str] = []
        for _ in range(limit):
            options = list(dict.fromkeys(admissible or [self.fallback]))
            planned = plan.next_step(options)
            allowed = self._allowed(options, reset.task, planned, played)
            # Why: the plan's step is added to the candidates; one the guard holds back must not
            # come back that way (the guard would then depend on the memory again).
            action, candidates, proposal, drop = self.choose(
                history, current, allowed, block, f"{reset.task} {state}", tried, state,
                planned if planned in allowed else None, drop, played)
            plan.played(action, options)
            played.append(action)
            first_prompt = first_prompt or self.prompt(history, current, candidates, drop)
            raw.append(f"proposal={proposal!r} chose={action!r} of {len(candidates)}")
            transition = env.step(action)
            reply = transition.observation.strip()
            bad = bool(INVALID_REPLY.match(reply))
            invalid += int(bad)
            tried[(state, action)] = bad or reply == state
            record.add(action, transition)
            history.append((current, action))
            current = f"Observation: {cut_text(reply, self.config.observation_chars)}"
            state = reply
            if transition.done:
                break
            admissible = env.admissible()
        work = self.scorer.stats.since(before)
        usage = Usage(llm_calls=work.calls, prompt_tokens=work.prompt_tokens + work.cached_tokens,
                      completion_tokens=work.candidate_tokens,
                      wall_ms=(time.perf_counter() - started) * 1000)
        meta: dict[str, Any] = {
            "task_name": spec.task_name, "variation": spec.variation, "split": spec.split,
            "env": self.env_name, "invalid": invalid, "agent": "choice",
            "tokens_evaluated": work.prompt_tokens + work.candidate_tokens,
            "tokens_cached": work.cached_tokens, "tokens_per_s": round(work.tokens_per_s, 1),
            "usage": usage.to_dict(),
        }
        episode = Episode(task=reset.task, env=reset.scene, steps=tuple(record.steps),
                          success=record.won, score=record.score, meta=meta)
        return AgentResult(episode, usage, invalid, 0, False, raw, first_prompt)
