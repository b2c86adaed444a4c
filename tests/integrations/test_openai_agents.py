"""OpenAI Agents SDK run with the deltamem input filter, learned after the run.

The model is a TEST double implementing the SDK's own ``Model`` interface: it records what it
is sent and answers from a script (a tool call, then a final message). Runner, tools, the
input filter and ``to_input_list`` are the real SDK; no network is touched.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from deltamem.integrations.openai_agents import DeltaMemAgents
from helpers import make_episode

ENV = "a kitchen with a fridge, a microwave and a table"


class ScriptedModel(Model):
    """A Model TEST double: answers from a list of outputs and records every request."""

    def __init__(self, outputs: list[list[Any]]) -> None:
        self.outputs = outputs
        self.requests: list[tuple[str | None, Any]] = []

    async def get_response(self, system_instructions: str | None, input: Any, *args: Any,
                           **kwargs: Any) -> ModelResponse:
        self.requests.append((system_instructions, input))
        return ModelResponse(output=self.outputs.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("this test double does not stream")


def call(name: str, arguments: str, call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", name=name, arguments=arguments,
                                    call_id=call_id)


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id="msg", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text,
                                                             annotations=[])])


@function_tool
def heat(item: str) -> str:
    """Heat an item in the microwave."""
    return f"The {item} is hot."


def test_input_filter_recalls_into_instructions_and_the_run_is_learned(mem):
    mem.learn(make_episode())
    model = ScriptedModel([[call("heat", '{"item": "apple"}', "c1")], [say("The apple is hot.")]])
    agent = Agent(name="robot", instructions="You are a kitchen robot.", model=model,
                  tools=[heat])
    memory = DeltaMemAgents(mem, env=ENV)
    config = memory.run_config(tracing_disabled=True)  # no trace export: nothing leaves the box
    before = mem.stats().episodes

    async def run() -> Any:
        return await Runner.run(agent, "heat the apple", run_config=config)

    result = anyio.run(run)
    assert result.final_output == "The apple is hot."
    assert len(model.requests) == 2
    for instructions, _ in model.requests:
        assert instructions is not None and instructions.startswith("You are a kitchen robot.")
        assert "# Skill memory" in instructions and "1. go to kitchen" in instructions
    learned = memory.learn(result)
    assert mem.stats().episodes == before + 1
    episode = next(e for e in mem.store.episodes(mem.space) if e.id == learned.episode_id)
    assert episode.task == "heat the apple" and episode.success
    assert [s["action"] for s in episode.steps] == ["heat: apple", "reply: The apple is hot."]
    assert episode.steps[0]["observation"] == "The apple is hot."


def test_a_run_judged_failed_is_learned_as_a_failure_lesson(mem):
    model = ScriptedModel([[say("I cannot find the fridge.")]])
    agent = Agent(name="robot", instructions="Help.", model=model)
    memory = DeltaMemAgents(mem, env=ENV)
    config = memory.run_config(tracing_disabled=True)  # no trace export: nothing leaves the box

    async def run() -> Any:
        return await Runner.run(agent, "get milk from the fridge", run_config=config)

    result = anyio.run(run)
    assert model.requests[0][0] == "Help."  # nothing recalled: instructions unchanged
    learned = memory.learn(result, success=False)
    assert mem.get(learned.task.node or "").outcome.value == "failure"


def test_budget_caps_the_recalled_context(mem):
    from deltamem.core.render import estimate_tokens

    mem.learn(make_episode())
    full = DeltaMemAgents(mem, env=ENV).loop.context("heat the apple")
    capped = DeltaMemAgents(mem, env=ENV, budget_tokens=120).loop.context("heat the apple")
    assert 0 < estimate_tokens(capped) <= 120 < estimate_tokens(full)


@function_tool
def shell(command: str) -> str:
    """Run a shell command."""
    return "Error from server (Forbidden): admission webhook denied the request: [ticket] " \
           "prod deployments need a change ticket" if "kubectl" in command else "ok"


def test_a_coding_agent_run_is_judged_by_the_coding_rules(mem, tmp_path):
    root = tmp_path / "shop"
    (root / ".git").mkdir(parents=True)
    model = ScriptedModel([[call("shell", '{"command": "kubectl apply -f k8s/prod"}', "c1")],
                           [say("The deploy was denied by the cluster policy.")]])
    agent = Agent(name="coder", instructions="Ship it.", model=model, tools=[shell])
    memory = DeltaMemAgents(mem, project=root)
    config = memory.run_config(tracing_disabled=True)

    async def run() -> Any:
        return await Runner.run(agent, "deploy the shop to production", run_config=config)

    learned = memory.learn(anyio.run(run))  # a final output, yet the rules judge a failure
    assert learned is not None
    episode = next(e for e in mem.store.episodes(mem.space) if e.id == learned.episode_id)
    assert not episode.success and episode.meta["project"] == str(root)
    assert "[ticket] prod deployments need a change ticket" in memory.loop.context("deploy it")
