"""``deltamem bench``: run memories against a text environment and report the comparison.

The command reaches the main CLI through the ``deltamem.plugins`` entry point of this
distribution (:func:`register`). :func:`run_bench_command` is the same thing for Python callers.
Errors are library errors; ``deltamem``'s CLI turns them into one-line messages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console


def build_llm(llm: str, base_url: str | None, model: str | None, n_ctx: int) -> Any:
    """The backbone from the CLI's ``--llm/--base-url/--model`` options."""
    from deltamem.llm import make_llm

    if llm == "local":
        options: dict[str, Any] = {"n_ctx": n_ctx}
        if model:
            options["model_path"] = model
        return make_llm("local", **options)
    options = {k: v for k, v in (("base_url", base_url), ("model", model)) if v}
    return make_llm(llm, **options)


def bench(
    env: Annotated[str, typer.Option("--env", help="twx-<game>, scienceworld, "
                                     "alfworld-generated.")] = "twx-coin",
    memory: Annotated[str, typer.Option("--memory", help="Comma list of memory kinds: none, "
                                        "deltamem, synapse, awm, reasoningbank, long-context, "
                                        "deltamem-task, deltamem-env, deltamem-nopenalty, "
                                        "deltamem-nocons, deltamem-flat, deltamem-successes, "
                                        "deltamem-llm, placebo.")]
    = "none,deltamem,synapse,awm,reasoningbank,long-context",
    agent: Annotated[str, typer.Option("--agent", help="choice (the model ranks valid actions; "
                                       "default) or react (the model writes the action; for "
                                       "capable endpoints).")] = "choice",
    ablations: Annotated[bool, typer.Option("--ablations", help="Add the DeltaMem "
                                            "ablations.")] = False,
    llm: Annotated[str, typer.Option("--llm", help="local (SmolLM2), openai or "
                                     "anthropic.")] = "local",
    base_url: Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible "
                                                 "server URL (or an Anthropic-compatible one "
                                                 "for anthropic).")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model name (openai, "
                                              "anthropic), or .gguf path or gemma-3-270m "
                                              "(local).")] = None,
    episodes: Annotated[int, typer.Option("--episodes", help="Evaluation episodes.")] = 5,
    seed: Annotated[int, typer.Option("--seed", help="Fixes the episode stream.")] = 0,
    protocol: Annotated[str, typer.Option("--protocol", help="online (cold start, learn on "
                                          "the stream) or warm (gold train trajectories "
                                          "first).")] = "online",
    out: Annotated[Path, typer.Option("--out", help="Run directory (rerun to resume).")]
    = Path("runs/bench"),
    eval_split: Annotated[str | None, typer.Option("--eval-split", help="Evaluate on this "
                                                   "split instead of the environment's "
                                                   "held-out one (e.g. dev, to tune).")] = None,
    train_episodes: Annotated[int, typer.Option("--train-episodes", help="Warm start: gold "
                                                "trajectories to learn.")] = 5,
    learn_during_eval: Annotated[bool, typer.Option("--learn-during-eval", help="Warm start: "
                                                    "keep learning while evaluating.")] = False,
    extractor: Annotated[str, typer.Option("--extractor", help="DeltaMem extractor: llm (as "
                                           "in the paper) or trace (no model).")] = "llm",
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="Step limit per "
                                                  "episode.")] = None,
    game_params: Annotated[str | None, typer.Option("--game-params", help="TextWorldExpress "
                                                    "generation parameters.")] = None,
    families: Annotated[str | None, typer.Option("--families", help="Comma list of task "
                                                 "families (ScienceWorld tasks, ALFWorld "
                                                 "types).")] = None,
    embedder: Annotated[str | None, typer.Option("--embedder", help="Embedder spec (default "
                                                 "minilm).")] = None,
    history_turns: Annotated[int, typer.Option("--history-turns", help="Turns kept in the "
                                               "prompt.")] = 4,
    snap: Annotated[bool, typer.Option("--snap/--no-snap", help="Snap actions to the closest "
                                       "admissible one.")] = True,
    plan_bonus: Annotated[float, typer.Option("--plan-bonus", help="Choice agent: bonus for "
                                              "the memory plan's next step (0: the model "
                                              "alone).")] = 1.0,
    plan_match: Annotated[float, typer.Option("--plan-match", help="Choice agent: least word "
                                              "overlap at which a recalled step is carried out "
                                              "by a valid action naming other objects (1: "
                                              "exact mentions only).")] = 0.25,
    memory_in_prompt: Annotated[bool, typer.Option("--memory-in-prompt/--memory-as-plan-only",
                                                   help="Choice agent: show the memory block "
                                                   "to the model, or use it only as a plan and "
                                                   "candidates.")] = True,
    n_ctx: Annotated[int, typer.Option("--n-ctx", help="Context window of the local "
                                       "model.")] = 4096,
    agent_rules: Annotated[str | None, typer.Option("--agent-rules", help="Choice agent: comma "
                                                    "list of memory-neutral rules to turn on "
                                                    "(no_put_back, examine_penalty, "
                                                    "unvisited_bonus, look_before_focus; none "
                                                    "by default).")] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="Evaluate only episodes that no "
                                        "registered run has evaluated (see --registry), drawn "
                                        "by --seed.")] = False,
    registry: Annotated[Path, typer.Option("--registry", help="The registry of evaluated "
                                           "episodes.")] = Path("results/registry.jsonl"),
    registration: Annotated[Path | None, typer.Option("--registration", help="Play an entry "
                                                      "of this registration (written by "
                                                      "benchmarks/register.py); refused when "
                                                      "the code or an option differs.")] = None,
    entry: Annotated[str | None, typer.Option("--entry", help="The registered entry "
                                              "played.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Compare memories on a text environment; writes logs, plots and report.html to --out."""
    summary = run_bench_command(
        env=env, memory=memory, ablations=ablations, agent=agent, llm=llm, base_url=base_url,
        model=model, episodes=episodes, seed=seed, protocol=protocol, out=out,
        eval_split=eval_split, train_episodes=train_episodes, learn_during_eval=learn_during_eval,
        extractor=extractor, max_steps=max_steps, game_params=game_params,
        families=families, embedder=embedder, history_turns=history_turns, snap=snap,
        plan_bonus=plan_bonus, plan_match=plan_match, memory_in_prompt=memory_in_prompt,
        n_ctx=n_ctx, fresh=fresh, registry=registry, registration=registration, entry=entry,
        agent_rules=agent_rules)
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        from deltamem_bench.report import table

        console = Console()
        console.print(table(summary))
        console.print(f"report: {out / 'report.html'}")


@dataclass(frozen=True)
class BenchPlan:
    """What a ``deltamem bench`` command resolves to before anything is played."""

    env: str
    kinds: list[str]
    options: Any  # RunOptions (imported lazily: the CLI must start fast)
    llm: str
    base_url: str | None
    model: str | None
    n_ctx: int


def plan_bench(*, env: str, memory: str, ablations: bool = False,
               agent: str = "choice", llm: str = "local",
               base_url: str | None = None, model: str | None = None, episodes: int = 5,
               seed: int = 0, protocol: str = "online",
               eval_split: str | None = None, train_episodes: int = 5,
               learn_during_eval: bool = False,
               extractor: str = "llm", max_steps: int | None = None,
               game_params: str | None = None, families: str | None = None,
               embedder: str | None = None, history_turns: int = 4, snap: bool = True,
               plan_bonus: float = 1.0, plan_match: float = 0.25,
               memory_in_prompt: bool = True, n_ctx: int = 4096, memory_chars: int = 2400,
               fresh: bool = False, focus_guard: str | None = None,
               agent_rules: str | None = None) -> BenchPlan:
    """The arms and :class:`~deltamem_bench.runner.RunOptions` of a ``deltamem bench`` command
    (the memory settings come from the environment, as the library's).

    ``agent_rules`` is a comma list of :data:`deltamem_bench.choice.AGENT_RULES` names to turn
    on (the memory-neutral agent rules of issue 47; none by default).

    Raises:
        ConfigError: an unknown memory kind or agent rule.
    """
    from deltamem.config import Settings
    from deltamem.errors import ConfigError
    from deltamem_bench.agent import AgentConfig
    from deltamem_bench.choice import AGENT_RULES, ChoiceConfig
    from deltamem_bench.factory import parse_kinds
    from deltamem_bench.models import resolve_model
    from deltamem_bench.runner import RunOptions

    kinds = parse_kinds(memory, ablations=ablations)
    settings = Settings.from_env().with_(embedder=embedder)
    env_options: dict[str, Any] = {}
    if max_steps is not None:
        env_options["max_steps"] = max_steps
    if game_params is not None:
        env_options["game_params"] = game_params
    choice = ChoiceConfig(memory_chars=memory_chars, plan_bonus=plan_bonus,
                          plan_match=plan_match, memory_in_prompt=memory_in_prompt)
    if focus_guard is not None:
        choice = replace(choice, focus_guard=focus_guard)
    for rule in (r.strip() for r in (agent_rules or "").split(",") if r.strip()):
        if rule not in AGENT_RULES:
            raise ConfigError(f"unknown agent rule {rule!r}; choose from "
                              f"{', '.join(AGENT_RULES)}")
        choice = replace(choice, **AGENT_RULES[rule])
    options = RunOptions(
        episodes=episodes, seed=seed, protocol=protocol, train_episodes=train_episodes,
        eval_split=eval_split,
        freeze=not learn_during_eval,
        families=tuple(f.strip() for f in families.split(",") if f.strip()) if families
        else None,
        env_options=env_options, extractor=extractor, settings=settings, agent_kind=agent,
        agent=AgentConfig(history_turns=history_turns, snap=snap, memory_chars=memory_chars),
        choice=choice,
        memory_chars=memory_chars, fresh=fresh)
    if llm == "local":
        model = resolve_model(model)
    return BenchPlan(env, kinds, options, llm, base_url, model, n_ctx)


def run_bench_command(*, out: Path, console: Console | None = None,
                      registry: Path | None = None, registration: Path | None = None,
                      entry: str | None = None, **options: Any) -> dict[str, Any]:
    """What ``deltamem bench`` does, callable from Python; returns the report's summary.

    ``options`` are :func:`plan_bench`'s. ``fresh`` draws the evaluation stream from the
    episodes ``registry`` does not hold. ``registration`` (a file written by
    ``benchmarks/register.py``) with its ``entry`` plays that entry's registered streams, after
    checking that the code and every option are the registered ones
    (:func:`deltamem_bench.registration.check_run`).
    """
    from deltamem.embed import make_embedder
    from deltamem.errors import ConfigError
    from deltamem_bench.registration import check_run, load_registration, pins
    from deltamem_bench.registry import DEFAULT_REGISTRY, Registry
    from deltamem_bench.report import write_report
    from deltamem_bench.runner import run_bench
    from deltamem_bench.scorer import LlamaScorer

    plan = plan_bench(**options)
    opts = plan.options
    planned = None
    extra: dict[str, Any] = {"pins": pins(plan.model, llm=plan.llm)}
    if registration is not None:
        if entry is None:
            raise ConfigError("a registered run names its entry (--entry)")
        registered = load_registration(registration)
        found = check_run(registered, entry, run_options=opts.to_dict(), kinds=plan.kinds)
        planned = found["streams"]
        extra["registration"] = {"name": registered["name"], "entry": entry,
                                 "code_sha256": registered["code"]["code_sha256"]}
    known = Registry(registry or DEFAULT_REGISTRY) if opts.fresh and planned is None else None
    model_obj = build_llm(plan.llm, plan.base_url, plan.model, plan.n_ctx)
    scorer = None
    if opts.agent_kind == "choice":
        if plan.llm != "local":
            raise ConfigError("--agent choice scores actions with a local GGUF model; use "
                              "--agent react with --llm openai")
        scorer = LlamaScorer(plan.model, n_ctx=plan.n_ctx)
    try:
        run_bench(plan.env, plan.kinds, model_obj, scorer=scorer, out=out,
                  embedder=make_embedder(opts.settings.embedder), options=opts, console=console,
                  registry=known, planned=planned, extra_config=extra)
    finally:
        if scorer is not None:
            scorer.close()
    return write_report(out)


def register(app: typer.Typer) -> None:
    """Add the ``bench`` command to ``app``."""
    app.command("bench")(bench)
