"""LangChain v1 agent (create_agent, on LangGraph) with the deltamem middleware and tools.

The model is langchain's own GenericFakeChatModel (a TEST double scripted with replies), wrapped
to record every request it receives and to accept bound tools; everything else is the real
framework: the agent graph, the middleware chain, tool execution.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import StructuredTool, ToolException, tool

from deltamem.core.model import Tree
from deltamem.integrations.langchain import DeltaMemMiddleware, memory_tools
from helpers import make_episode

ENV = "a kitchen with a fridge, a microwave and a table"


class RecordingFakeChatModel(GenericFakeChatModel):
    """GenericFakeChatModel that records the messages of each call and accepts bound tools."""

    seen: list[list[BaseMessage]] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    def bind_tools(self, tools: Any, **kwargs: Any) -> RecordingFakeChatModel:
        return self


@tool
def heat(item: str) -> str:
    """Heat an item in the microwave."""
    return f"The {item} is hot."


def script(replies: list[AIMessage]) -> Iterator[AIMessage]:
    return iter(replies)


def test_middleware_recalls_into_the_model_input_and_learns_the_run(mem):
    mem.learn(make_episode())
    model = RecordingFakeChatModel(messages=script([
        AIMessage(content="Heating it.", tool_calls=[
            {"id": "call-1", "name": "heat", "args": {"item": "apple"}}]),
        AIMessage(content="The apple is hot."),
    ]), seen=[])
    middleware = DeltaMemMiddleware(mem, env=ENV)
    agent = create_agent(model, [heat], system_prompt="You are a kitchen robot.",
                         middleware=[middleware])
    before = mem.stats().episodes

    out = agent.invoke({"messages": [{"role": "user", "content": "heat the apple"}]})

    assert out["messages"][-1].content == "The apple is hot."
    # Recalled context reached every model call, after the agent's own system prompt.
    assert len(model.seen) == 2
    for call in model.seen:
        system = call[0]
        assert system.type == "system" and system.text.startswith("You are a kitchen robot.")
        assert "# Skill memory" in system.text and "1. go to kitchen" in system.text
    # The run was learned as one episode, against the recall it made.
    assert mem.stats().episodes == before + 1
    learned = middleware.learned
    assert learned is not None and learned.task.action in ("delta", "dedup")
    shown = mem.show(learned.task.node or learned.task.matched or "").wire()
    assert "heat: apple" in shown["experience"]["steps"]
    episode = next(e for e in mem.store.episodes(mem.space) if e.id == learned.episode_id)
    assert episode.success and episode.steps[0]["observation"] == "The apple is hot."


def test_default_judge_and_a_failed_run_become_a_failure_lesson(mem):
    """A run that ends on a failed tool call is a failure; it is learned as a lesson."""

    def fridge() -> str:
        raise ToolException("the fridge is locked")

    open_fridge = StructuredTool.from_function(fridge, name="open_fridge",
                                               description="Open the fridge.",
                                               handle_tool_error=True)

    model = RecordingFakeChatModel(messages=script([
        AIMessage(content="", tool_calls=[{"id": "c", "name": "open_fridge", "args": {}}]),
        AIMessage(content="I could not open the fridge."),
    ]), seen=[])
    middleware = DeltaMemMiddleware(mem, env=ENV)
    agent = create_agent(model, [open_fridge], middleware=[middleware])
    out = agent.invoke({"messages": [{"role": "user", "content": "get milk from the fridge"}]})
    assert out["messages"][2].status == "error"
    assert middleware.learned is not None
    node = mem.get(middleware.learned.task.node or "")
    assert node.tree is Tree.TASK and node.outcome.value == "failure"
    [failed] = mem.show(node.id).wire()["experience"]["failed"]
    assert failed.startswith("open_fridge()") and "the fridge is locked" in failed


def test_memory_tools_recall_and_learn_through_a_tool_calling_agent(mem):
    tools = memory_tools(mem)
    model = RecordingFakeChatModel(messages=script([
        AIMessage(content="", tool_calls=[{"id": "l", "name": "deltamem_learn", "args": {
            "task": "heat the apple", "env": ENV, "success": True,
            "steps": [{"action": "go to kitchen", "observation": "ok"},
                      {"action": "heat apple", "observation": "hot"}]}}]),
        AIMessage(content="", tool_calls=[{"id": "r", "name": "deltamem_recall",
                                           "args": {"task": "heat the apple"}}]),
        AIMessage(content="done"),
    ]), seen=[])
    agent = create_agent(model, tools)
    out = agent.invoke({"messages": [{"role": "user", "content": "remember how to heat"}]})
    results = [m.content for m in out["messages"] if m.type == "tool"]
    assert results[0] == "learned: task root, env root"
    assert "1. go to kitchen" in results[1] and "2. heat apple" in results[1]


def test_a_thread_learns_each_run_as_its_own_episode(mem):
    """With a checkpointer the thread keeps earlier runs; each run recalls and learns its own."""
    from langgraph.checkpoint.memory import InMemorySaver

    mem.learn(make_episode(task="wash the plate", actions=("go to sink", "wash plate")))
    model = RecordingFakeChatModel(messages=script([
        AIMessage(content="", tool_calls=[{"id": "1", "name": "heat", "args": {"item": "apple"}}]),
        AIMessage(content="Hot."),
        AIMessage(content="", tool_calls=[{"id": "2", "name": "heat", "args": {"item": "plate"}}]),
        AIMessage(content="Warm."),
    ]), seen=[])
    middleware = DeltaMemMiddleware(mem, env=ENV)
    agent = create_agent(model, [heat], middleware=[middleware], checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [{"role": "user", "content": "heat the apple"}]}, thread)
    first = middleware.learned
    agent.invoke({"messages": [{"role": "user", "content": "wash the plate"}]}, thread)
    second = middleware.learned
    assert first is not None and second is not None and first.episode_id != second.episode_id
    episodes = {e.id: e for e in mem.store.episodes(mem.space)}
    assert episodes[second.episode_id].task == "wash the plate"
    assert [s["action"] for s in episodes[second.episode_id].steps] == [
        "heat: plate", "reply: Warm."]
    # The second run's model calls carried the skill recalled for its own request.
    assert "1. go to sink" in model.seen[-1][0].text


def _shell_outputs(outputs: list[str]) -> Any:
    @tool
    def run_shell(command: str) -> str:
        """Run a shell command in the repository."""
        return outputs.pop(0)

    return run_shell


@tool
def edit_file(path: str, content: str) -> str:
    """Replace a file's content."""
    return f"wrote {len(content)} characters to {path}"


def test_a_coding_agent_learns_tasks_by_the_coding_rules_scoped_to_its_repository(
        mem, tmp_path):
    shop, shop2 = tmp_path / "shop", tmp_path / "shop2"
    for root in (shop, shop2):
        (root / ".git").mkdir(parents=True)
    failing = "FAILED tests/test_cart.py::test_total - assert 80.0 == 90.0\n1 failed, 2 passed"
    model = RecordingFakeChatModel(messages=script([
        AIMessage(content="", tool_calls=[
            {"id": "c1", "name": "run_shell", "args": {"command": "pytest -q"}}]),
        AIMessage(content="", tool_calls=[{"id": "c2", "name": "edit_file", "args": {
            "path": f"{shop}/shop/cart.py", "content": "def total(): ..."}}]),
        AIMessage(content="", tool_calls=[
            {"id": "c3", "name": "run_shell", "args": {"command": "pytest -q"}}]),
        AIMessage(content="", tool_calls=[
            {"id": "c4", "name": "run_shell", "args": {"command": "grep -rn 'total - d' shop/"}}]),
        AIMessage(content="Fixed the total; 3 passed."),
    ]), seen=[])
    shell = _shell_outputs([failing, "3 passed in 0.2s", "error: exit code 1: "])
    middleware = DeltaMemMiddleware(mem, project=shop / "shop")  # a subfolder: its repository
    agent = create_agent(model, [shell, edit_file], middleware=[middleware])
    agent.invoke({"messages": [{"role": "user", "content": "fix the cart total test"}]})
    [episode] = list(mem.store.episodes(mem.space))
    assert episode.success and episode.meta["project"] == str(shop)
    assert episode.meta["outcome_rule"] == "the last tests run passed"
    assert episode.env == f"software project shop at {shop}"

    def first_system_prompt(project: Any) -> str:
        recorder = RecordingFakeChatModel(messages=script([AIMessage(content="ok")]), seen=[])
        agent = create_agent(recorder, [], system_prompt="Be brief.",
                             middleware=[DeltaMemMiddleware(mem, project=project, learn=False)])
        agent.invoke({"messages": [{"role": "user", "content": "fix the cart total test"}]})
        return str(recorder.seen[0][0].content)

    here = first_system_prompt(shop)
    assert "deltamem notes on shop" in here and "`pytest -q` works (3 passed" in here
    assert "- edit shop/cart.py" in here
    assert first_system_prompt(shop2) == "Be brief."  # nothing of shop crosses to shop2
