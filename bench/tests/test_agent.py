"""The ReAct agent: parsing, snapping, invalid actions, step limit and memory placement."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from deltamem.testing.llm import ScriptedLLM
from deltamem_bench.agent import (
    AgentConfig,
    ReActAgent,
    clean_action,
    parse_action,
    replay,
    snap_action,
)
from deltamem_bench.envs.base import Environment, EpisodeSpec, Reset, Transition


@dataclass
class CoinRoomDouble:
    """Test double of an Environment: two rooms, the coin is east; "take coin" there wins."""

    name: str = "twx-coin"
    max_steps: int = 6
    instruction: str = "You are an agent in a text game. Answer 'Action: <one action>'."
    fallback_action: str = "look around"
    splits: tuple[str, str] = ("train", "test")
    irreversible: tuple[str, ...] = ()
    list_admissible: bool = True
    played: list[str] = field(default_factory=list)
    room: str = "kitchen"
    spec: EpisodeSpec | None = None
    steps: int = 0

    def specs(self, split: str, *, count: int = 0,
              families: Sequence[str] | None = None) -> list[EpisodeSpec]:
        return [EpisodeSpec("coin", v, split) for v in range(10)]

    def load(self, spec: EpisodeSpec) -> None:
        self.spec = spec

    def _look(self) -> str:
        if self.room == "kitchen":
            return "You are in the kitchen. There is a door to the east."
        return "You are in the pantry. There is a coin."

    def reset(self) -> Reset:
        assert self.spec is not None
        self.room = "kitchen"
        self.steps = 0
        return Reset(task=f"Find the coin and take it (seed {self.spec.variation}).",
                     scene=self._look(), observation=self._look(),
                     admissible=self.admissible())

    def admissible(self) -> list[str] | None:
        if not self.list_admissible:
            return None
        moves = ["move east"] if self.room == "kitchen" else ["move west", "take coin"]
        return ["look around", "inventory", *moves]

    def step(self, action: str) -> Transition:
        self.played.append(action)
        self.steps += 1
        out = self.steps >= self.max_steps
        won = False
        if action == "move east" and self.room == "kitchen":
            self.room = "pantry"
            obs = self._look()
        elif action == "move west" and self.room == "pantry":
            self.room = "kitchen"
            obs = self._look()
        elif action == "take coin" and self.room == "pantry":
            obs, won = "You take the coin.", True
        elif action == "look around":
            obs = self._look()
        else:
            obs = "No known action matches that input."
        done = won or out
        return Transition(obs, 1.0 if won else (0.5 if self.room == "pantry" else 0.0), done,
                          won)

    def gold_actions(self) -> list[str] | None:
        return ["move east", "take coin"]

    def close(self) -> None:
        pass


SPEC = EpisodeSpec("coin", 3, "test")


def test_double_satisfies_the_environment_protocol() -> None:
    """The test double is a structural Environment."""
    assert isinstance(CoinRoomDouble(), Environment)


def test_parse_action_reads_thought_and_first_action() -> None:
    """'Thought:' is kept, the first 'Action:' line wins, punctuation and case are normalised."""
    parsed = parse_action("Thought: the coin is east.\nAction: Move East.\nAction: take coin")
    assert parsed == parse_action("Thought: the coin is east.\nACTION:  move east")
    assert (parsed.action, parsed.thought, parsed.marked) == ("move east",
                                                              "the coin is east.", True)
    assert parse_action("take coin").action == "take coin"
    assert parse_action("").action == ""
    assert parse_action("Thought: hmm").action == ""
    assert clean_action('"[open fridge]"') == "open fridge"
    assert parse_action("Action: take coin, inventory, look around").action == "take coin"


def test_snap_action_finds_close_admissible_actions() -> None:
    """Typos and reorderings snap; unrelated text does not."""
    options = ["look around", "move east", "take coin"]
    assert snap_action("tak coin", options) == "take coin"
    assert snap_action("coin take", options) == "take coin"
    assert snap_action("move east", options) == "move east"
    assert snap_action("sing a song loudly", options) is None
    assert snap_action("", options) is None


def test_agent_wins_and_records_the_episode() -> None:
    """A scripted winning play becomes an Episode with steps, success, score and usage."""
    env = CoinRoomDouble()
    llm = ScriptedLLM(["Thought: go east\nAction: move east", "Action: take coin"])
    result = ReActAgent(llm, env).run(env, SPEC)
    ep = result.episode
    assert env.played == ["move east", "take coin"]
    assert ep.success and ep.score == 1.0
    assert [s.action for s in ep.steps] == ["move east", "take coin"]
    assert ep.steps[0].thought == "go east"
    assert ep.task.startswith("Find the coin") and ep.env.startswith("You are in the kitchen")
    assert ep.meta["task_name"] == "coin" and ep.meta["variation"] == 3
    assert result.usage.llm_calls == 2 == ep.meta["usage"]["llm_calls"]
    assert result.usage.prompt_tokens == sum(len(c.prompt.split()) for c in llm.calls)
    assert result.invalid == 0 and not result.aborted


def test_invalid_actions_fall_back_and_abort_after_a_streak() -> None:
    """Empty or unmatched answers play 'look around', count as invalid, and end the episode."""
    env = CoinRoomDouble(max_steps=20)
    llm = ScriptedLLM(["", "Thought: nothing", "sing a song loudly"])
    result = ReActAgent(llm, env, AgentConfig(max_invalid=3)).run(env, SPEC)
    assert env.played == ["look around"] * 3
    assert result.invalid == 3 and result.aborted
    assert not result.episode.success
    assert llm.remaining == 0


def test_snapping_can_be_turned_off() -> None:
    """Without snapping the parsed action is played as is and the engine's refusal counts."""
    env = CoinRoomDouble()
    llm = ScriptedLLM(["Action: go east", "Action: move east", "Action: take coin"])
    result = ReActAgent(llm, env, AgentConfig(snap=False)).run(env, SPEC)
    assert env.played == ["go east", "move east", "take coin"]
    assert result.invalid == 1 and result.snapped == 0 and result.episode.success


def test_snapped_actions_are_counted() -> None:
    """A near-miss is replaced by the admissible action and counted as snapped, not invalid."""
    env = CoinRoomDouble()
    llm = ScriptedLLM(["Action: move eastt", "Action: take the coin"])
    result = ReActAgent(llm, env).run(env, SPEC)
    assert env.played == ["move east", "take coin"]
    assert result.snapped == 2 and result.invalid == 0


def test_step_limit_ends_the_episode() -> None:
    """The environment's max_steps (or the config's override) bounds the number of calls."""
    env = CoinRoomDouble(max_steps=50)
    llm = ScriptedLLM(["Action: look around"] * 4)
    result = ReActAgent(llm, env, AgentConfig(max_steps=4)).run(env, SPEC)
    assert len(result.episode.steps) == 4 and llm.remaining == 0
    env = CoinRoomDouble(max_steps=3)
    llm = ScriptedLLM(["Action: look around"] * 3)
    result = ReActAgent(llm, env).run(env, SPEC)
    assert len(result.episode.steps) == 3 and llm.remaining == 0


def test_memory_block_sits_between_instruction_and_task() -> None:
    """The memory comes after the instruction and before "Now, it's your turn" + task."""
    env = CoinRoomDouble()
    llm = ScriptedLLM(["Action: move east", "Action: take coin"])
    agent = ReActAgent(llm, env, AgentConfig(example="Action: look around"))
    agent.run(env, SPEC, "MEMORY-BLOCK")
    first = llm.calls[0].messages[0]["content"]
    assert llm.calls[0].messages[0]["role"] == "user" and len(llm.calls[0].messages) == 1
    i_help = first.index("You are an agent")
    i_example = first.index("Here is an example")
    i_mem = first.index("MEMORY-BLOCK")
    i_turn = first.index("Now, it's your turn")
    i_task = first.index("Task: Find the coin")
    assert i_help < i_example < i_mem < i_turn < i_task
    assert "Valid actions: look around, inventory, move east" in first


def test_memory_may_be_computed_from_the_reset() -> None:
    """A callable memory sees the episode's Reset (task and scene keys)."""
    env = CoinRoomDouble()
    seen: list[Reset] = []

    def memory(reset: Reset) -> str:
        seen.append(reset)
        return f"recalled for {reset.task}"

    llm = ScriptedLLM(["Action: move east", "Action: take coin"])
    ReActAgent(llm, env).run(env, SPEC, memory)
    assert seen and seen[0].task.startswith("Find the coin")
    assert "recalled for Find the coin" in llm.calls[0].prompt


def test_no_memory_means_no_block() -> None:
    """Without memory the first message goes straight from the instruction to the task."""
    env = CoinRoomDouble()
    llm = ScriptedLLM(["Action: move east", "Action: take coin"])
    ReActAgent(llm, env).run(env, SPEC)
    first = llm.calls[0].messages[0]["content"]
    assert "---\nNow, it's your turn" in first


def test_later_turns_are_pairs_and_old_ones_are_dropped() -> None:
    """Turns are assistant/user pairs; beyond history_turns the oldest are summarised."""
    env = CoinRoomDouble(max_steps=10)
    answers = ["Action: look around", "Action: inventory", "Action: look around",
               "Action: move east", "Action: take coin"]
    llm = ScriptedLLM(answers)
    ReActAgent(llm, env, AgentConfig(history_turns=2)).run(env, SPEC)
    second = llm.calls[1].messages
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"] == "Action: look around"
    assert second[2]["content"].startswith("Observation: You are in the kitchen")
    last = llm.calls[4].messages
    assert len(last) == 1 + 2 * 2
    assert "(Earlier actions: look around; inventory)" in last[2]["content"]
    assert "Valid actions" in last[-1]["content"]
    assert "Valid actions" not in last[2]["content"]


def test_environments_without_admissible_lists_play_the_parsed_action() -> None:
    """With no admissible list nothing is snapped and no list is shown."""
    env = CoinRoomDouble(list_admissible=False)
    llm = ScriptedLLM(["move east", "Action: take coin"])
    result = ReActAgent(llm, env).run(env, SPEC)
    assert result.episode.success and "Valid actions" not in llm.calls[0].prompt


def test_replay_records_a_gold_trajectory() -> None:
    """replay plays fixed actions and marks the episode as gold."""
    env = CoinRoomDouble()
    ep = replay(env, SPEC, ["move east", "take coin", "look around"])
    assert ep.success and len(ep.steps) == 2 and ep.meta["source"] == "gold"


def test_instruction_and_fallback_come_from_the_environment() -> None:
    """The agent takes its action help and fallback from the Environment, not from its name."""
    env = CoinRoomDouble(fallback_action="wait", instruction="Play well.")
    agent = ReActAgent(ScriptedLLM([]), env)
    assert agent.fallback == "wait" and agent.instruction == "Play well."
