"""The evaluation harness: a ReAct agent, the memories it compares, a runner and reports.

* :mod:`.agent` - the ReAct loop (:class:`~deltamem_bench.agent.ReActAgent`).
* :mod:`.memories` / :mod:`.baselines` / :mod:`.factory` - NoMemory, DeltaMem (modes and
  ablations), Synapse, AWM, ReasoningBank behind one ``Memory`` protocol.
* :mod:`.runner` - online (cold start) and warm-start protocols, JSONL logs, resume.
* :mod:`.report` - summary table, Wilson intervals, PNG plots, HTML report.
* :mod:`.envs` - the text environments.

Submodules are imported on use so that ``import deltamem_bench`` stays cheap.
"""
