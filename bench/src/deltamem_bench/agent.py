"""The ReAct agent of the evaluation harness: one chat, one action per turn.

Prompt layout (the authors' code's): the first user message is the environment's instruction
(action help), an optional worked example, the memory block when a memory recalled something, then
"Now, it's your turn" with the task and the first observation. Later turns are appended as
assistant/user pairs ("Action: ..." / "Observation: ..."). Only the last ``history_turns`` pairs
are kept, so the prompt fits small context windows (SmolLM2 runs with a few thousand tokens); the
actions of dropped turns are listed in one line so the model still knows what it already did.

Action parsing: the first ``Action:`` line wins; a "Thought:" line before it is kept as the step's
thought. Without an ``Action:`` marker the first non-thought line is taken (small models often
drop the marker). When the environment lists admissible actions and ``snap`` is on (the default),
an action that is not admissible is replaced by the closest admissible one if they are similar
enough (see :func:`snap_action`); otherwise the step counts as invalid and the fallback action
("look around" / "look") is played instead. ``max_invalid`` invalid steps in a row end the episode.
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from deltamem import Usage
from deltamem.core.model import Episode, Step
from deltamem.errors import ConfigError
from deltamem.formats.episodes import episode_to_dict
from deltamem.llm.base import LLM, Message
from deltamem_bench.envs.base import Environment, EpisodeSpec, Reset, Transition

_ACTION = re.compile(r"^\s*(?:>\s*)?action\s*[:：]\s*(.*)$", re.IGNORECASE)
_THOUGHT = re.compile(r"^\s*thought\s*[:：]\s*(.*)$", re.IGNORECASE)
WORD = re.compile(r"[a-z0-9]+")
# Engine replies that mean "the action was not understood" (ScienceWorld, TWX, ALFWorld).
INVALID_REPLY = re.compile(
    r"^\s*(no known action matches|i don'?t understand|unknown action|nothing happens)",
    re.IGNORECASE,
)

# Closes the latest user message: a one-line reminder keeps small models in the format.
NEXT_ACTION = "Your next action (one line: Action: ...)"



@dataclass(frozen=True)
class AgentConfig:
    """Knobs of the ReAct loop.

    Attributes:
        history_turns: action/observation pairs kept verbatim in the prompt.
        max_invalid: consecutive invalid actions that end the episode.
        snap: replace a non-admissible action by the closest admissible one (see snap_action).
        snap_cutoff: least similarity (0..1) for snapping; below it the action is invalid.
        show_admissible: at most this many valid actions are listed in the prompt (0: none).
        max_tokens: answer length per turn (one Thought + one Action line).
        temperature: sampling temperature (0: greedy, reproducible).
        observation_chars: observations are cut to this many characters in the prompt.
        memory_chars: the memory block is cut to this many characters.
        max_steps: overrides the environment's ``max_steps`` when set.
        example: an optional worked example (ICL) placed after the instruction.
    """

    history_turns: int = 4
    max_invalid: int = 5
    snap: bool = True
    snap_cutoff: float = 0.5
    show_admissible: int = 40
    max_tokens: int = 48
    temperature: float = 0.0
    observation_chars: int = 700
    memory_chars: int = 3000
    max_steps: int | None = None
    example: str = ""


@dataclass(frozen=True)
class ParsedAction:
    """What was read from one model answer."""

    action: str
    thought: str | None = None
    marked: bool = False  # an explicit "Action:" line was present


@dataclass
class Record:
    """An episode's steps as they are played: each step's reward is its change of the score;
    ``score`` is the best score reached, ``won`` whether any step won."""

    steps: list[Step] = field(default_factory=list)
    score: float = 0.0
    won: bool = False
    last_score: float = 0.0

    def add(self, action: str, transition: Transition, thought: str | None = None) -> None:
        """Record ``action`` and what it did."""
        self.steps.append(Step(action=action, observation=transition.observation.strip(),
                               thought=thought, reward=transition.score - self.last_score))
        self.last_score = transition.score
        self.score = max(self.score, transition.score)
        self.won = self.won or transition.won


@dataclass
class AgentResult:
    """One played episode with its accounting."""

    episode: Episode
    usage: Usage
    invalid: int = 0
    snapped: int = 0
    aborted: bool = False
    raw: list[str] = field(default_factory=list)
    first_prompt: str = ""


def parse_action(text: str) -> ParsedAction:
    """Read the action (and thought) out of a ReAct answer; empty action when there is none."""
    thought: str | None = None
    fallback = ""
    for line in text.strip().splitlines():
        if not line.strip():
            continue
        act = _ACTION.match(line)
        if act:
            return ParsedAction(clean_action(act.group(1)), thought, marked=True)
        th = _THOUGHT.match(line)
        if th:
            thought = th.group(1).strip() or thought
        elif not fallback:
            fallback = line
    return ParsedAction(clean_action(fallback), thought)


def clean_action(text: str) -> str:
    """Normalise an action string: one line, no quotes/brackets/trailing period, lower case.

    Small models often copy the list of valid actions ("take coin, look around, ..."); only the
    first item of such a list is kept, since one action per turn is the rule.
    """
    text = text.strip().splitlines()[0] if text.strip() else ""
    text = re.split(r"[,;]", text, maxsplit=1)[0]
    text = text.strip().strip("`\"'[]()<>").strip()
    text = text.rstrip(".!").strip()
    return " ".join(text.split()).lower()


def snap_action(action: str, admissible: Sequence[str], cutoff: float = 0.5) -> str | None:
    """The admissible action closest to ``action``, or None when none is similar enough.

    Similarity is the mean of word-set Jaccard overlap and difflib's character ratio, so both
    a reordered/abbreviated action ("coin take") and a small typo ("tak coin") find their target.
    """
    if not action or not admissible:
        return None
    lowered = {a.lower(): a for a in admissible}
    if action in lowered:
        return lowered[action]
    words = set(WORD.findall(action))
    best: tuple[float, str] | None = None
    for candidate in admissible:
        cand_words = set(WORD.findall(candidate.lower()))
        union = words | cand_words
        jaccard = len(words & cand_words) / len(union) if union else 0.0
        ratio = difflib.SequenceMatcher(None, action, candidate.lower()).ratio()
        score = (jaccard + ratio) / 2
        if best is None or score > best[0]:
            best = (score, candidate)
    if best is None or best[0] < cutoff:
        return None
    return best[1]


def cut_text(text: str, limit: int) -> str:
    """``text`` stripped and cut to ``limit`` characters (an ellipsis marks the cut)."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


class ReActAgent:
    """Plays episodes with an LLM in the ReAct format.

    Args:
        llm: The acting model.
        env_name: Selects the action help and the fallback action.
        config: Loop settings.
        instruction: Overrides the environment's action help.
    """

    def __init__(self, llm: LLM, env: Environment, config: AgentConfig | None = None, *,
                 instruction: str | None = None) -> None:
        self.llm = llm
        self.env_name = env.name
        self.config = config or AgentConfig()
        self.instruction = instruction or env.instruction
        self.fallback = env.fallback_action

    # -- prompt ---------------------------------------------------------------------------
    def first_message(self, reset: Reset, memory: str = "") -> str:
        """The opening user message: instruction, example, memory, then the task."""
        parts = [self.instruction]
        if self.config.example:
            parts.append("Here is an example of a complete task trajectory.\n"
                         + self.config.example.strip())
        head = "\n---\n".join(parts)
        tail = ""
        if memory.strip():
            tail += cut_text(memory, self.config.memory_chars) + "\n"
        tail += ("Now, it's your turn and here is the task.\n"
                 f"Task: {reset.task.strip()}\n"
                 f"Observation: {cut_text(reset.observation, self.config.observation_chars)}")
        return f"{head}\n---\n{tail}"

    def _admissible_line(self, admissible: Sequence[str] | None) -> str:
        limit = self.config.show_admissible
        if not admissible or limit <= 0:
            return ""
        shown = list(admissible[:limit])
        more = len(admissible) - len(shown)
        suffix = f", ... ({more} more)" if more > 0 else ""
        return "\nValid actions: " + ", ".join(shown) + suffix

    def messages(self, first: str, turns: Sequence[tuple[str, str]],
                 admissible: Sequence[str] | None) -> list[Message]:
        """The chat for the next turn, keeping only the last ``history_turns`` pairs."""
        keep = max(0, self.config.history_turns)
        dropped = turns[: len(turns) - keep] if len(turns) > keep else []
        kept = turns[len(dropped):]
        msgs: list[Message] = [{"role": "user", "content": first}]
        for i, (action, observation) in enumerate(kept):
            msgs.append({"role": "assistant", "content": f"Action: {action}"})
            text = f"Observation: {cut_text(observation, self.config.observation_chars)}"
            if i == 0 and dropped:
                # Why: the model must not lose track of what it did when old turns are dropped.
                text = ("(Earlier actions: " + "; ".join(a for a, _ in dropped) + ")\n" + text)
            msgs.append({"role": "user", "content": text})
        last = self._admissible_line(admissible) + "\n" + NEXT_ACTION
        msgs[-1] = {"role": "user", "content": msgs[-1]["content"] + last}
        return msgs

    # -- loop -----------------------------------------------------------------------------
    def choose(self, answer: str, admissible: Sequence[str] | None) -> tuple[str, str | None,
                                                                                bool, bool]:
        """Turn a model answer into ``(action, thought, valid, snapped)``."""
        parsed = parse_action(answer)
        action = parsed.action
        if not action:
            return self.fallback, parsed.thought, False, False
        if admissible and self.config.snap:
            target = snap_action(action, admissible, self.config.snap_cutoff)
            if target is None:
                return self.fallback, parsed.thought, False, False
            return target, parsed.thought, True, target.lower() != action
        return action, parsed.thought, True, False

    def run(self, env: Environment, spec: EpisodeSpec,
            memory: str | Callable[[Reset], str] = "") -> AgentResult:
        """Load ``spec``, play it to the end, and return the recorded episode.

        Args:
            env: The environment (its ``max_steps`` is the step limit unless overridden).
            spec: The episode to play.
            memory: The memory block to inject (empty: no memory block at all), or a function
                of the episode's :class:`Reset` returning it (the memory keys are known only
                after the reset).
        """
        started = time.perf_counter()
        env.load(spec)
        reset = env.reset()
        block = memory(reset) if callable(memory) else memory
        first = self.first_message(reset, block)
        limit = self.config.max_steps or env.max_steps
        usage = Usage()
        record = Record()
        turns: list[tuple[str, str]] = []
        raw: list[str] = []
        admissible = reset.admissible
        invalid = snapped = streak = 0
        aborted = False
        for _ in range(limit):
            msgs = self.messages(first, turns, admissible)
            completion = self.llm.complete(msgs, temperature=self.config.temperature,
                                           max_tokens=self.config.max_tokens)
            usage.llm_calls += 1
            usage.prompt_tokens += completion.prompt_tokens
            usage.completion_tokens += completion.completion_tokens
            raw.append(completion.text)
            action, thought, valid, was_snapped = self.choose(completion.text, admissible)
            snapped += int(was_snapped)
            transition = env.step(action)
            if valid and INVALID_REPLY.match(transition.observation):
                valid = False
            invalid += int(not valid)
            streak = 0 if valid else streak + 1
            record.add(action, transition, thought)
            turns.append((action, transition.observation))
            if transition.done:
                break
            if streak >= self.config.max_invalid:
                aborted = True
                break
            admissible = env.admissible()
        usage.wall_ms = (time.perf_counter() - started) * 1000
        meta: dict[str, Any] = {
            "task_name": spec.task_name, "variation": spec.variation, "split": spec.split,
            "env": self.env_name, "invalid": invalid, "snapped": snapped, "aborted": aborted,
            "usage": usage.to_dict(),
        }
        episode = Episode(task=reset.task, env=reset.scene, steps=tuple(record.steps),
                          success=record.won, score=record.score, meta=meta)
        return AgentResult(episode, usage, invalid, snapped, aborted, raw, first)


def gold_episode(env: Environment, spec: EpisodeSpec) -> Episode:
    """The engine's gold trajectory of ``spec``, played and recorded (see :func:`replay`).

    Raises:
        ConfigError: the environment has no gold path for ``spec``.
    """
    env.load(spec)
    env.reset()
    gold = env.gold_actions()
    if not gold:
        raise ConfigError(f"{env.name}: no gold trajectory for {spec}; warm start and "
                          "recording need gold_actions()")
    return replay(env, spec, gold)


def gold_record(env: Environment, spec: EpisodeSpec, **meta: Any) -> dict[str, Any]:
    """The gold episode of ``spec`` as a fixture record (``meta`` added to its meta), for the
    recording scripts.

    Raises:
        RuntimeError: the gold path did not win (a fixture must hold a winning episode).
    """
    episode = gold_episode(env, spec)
    if not episode.success:
        raise RuntimeError(f"gold path of {spec} did not win (score {episode.score})")
    record = episode_to_dict(episode)
    record["meta"] = {**record["meta"], **meta}
    return record


def replay(env: Environment, spec: EpisodeSpec, actions: Sequence[str]) -> Episode:
    """Play a fixed action list (a gold trajectory) and record it as an :class:`Episode`.

    The evaluation step limit does not apply: a gold path longer than ``env.max_steps`` is
    played to its end (cut, it would be recorded as a failure).
    """
    limit = env.max_steps
    env.max_steps = max(limit, len(actions) + 1)
    record = Record()
    try:
        env.load(spec)
        reset = env.reset()
        for action in actions:
            transition = env.step(action)
            record.add(action, transition)
            if transition.done:
                break
    finally:
        env.max_steps = limit
    meta = {"task_name": spec.task_name, "variation": spec.variation, "split": spec.split,
            "source": "gold"}
    return Episode(task=reset.task, env=reset.scene, steps=tuple(record.steps),
                   success=record.won, score=record.score, meta=meta)
