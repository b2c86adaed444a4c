"""deltamem: incremental experience memory for LLM agents via residual trees.

Everyday use::

    from deltamem import DeltaMem, Episode, Step

    with DeltaMem.open("agent.db") as mem:
        recall = mem.recall(task="heat the apple", env="You are in a kitchen ...")
        prompt_block = recall.context          # put this in the agent's prompt
        ...                                    # run the episode
        mem.learn(Episode(task=..., env=..., steps=(Step("open fridge", "It is open."),),
                          success=True), recall=recall)

``AsyncDeltaMem`` is the same facade for asyncio hosts; ``Client`` / ``AsyncClient`` talk to a
``deltamem serve`` server with the same vocabulary.

The five extension points are protocols: ``Store``, ``Embedder``, ``LLM``, ``Extractor`` and
``Scene``. Adapters live in documented submodules: ``deltamem.store.sqlite`` / ``.postgres``,
``deltamem.embed``, ``deltamem.llm``, ``deltamem.extract``, ``deltamem.scenes``; test doubles in
``deltamem.testing``.
"""

from typing import TYPE_CHECKING, Any

# Imported now, for what they register (cheap, standard library and the core only): the reader
# behind ``Episode.from_messages`` and the redactor of error texts (``errors.redacted``).
import deltamem.formats.transcripts  # noqa: F401
import deltamem.privacy.redact  # noqa: F401

# Everything else loads when first used (PEP 562): ``import deltamem`` stays cheap, and so does
# any ``deltamem.*`` import, which runs this module first. The hook daemon's start, which the
# first prompt of a session waits for, pays only for what a recall needs.
if TYPE_CHECKING:
    from deltamem._util.usage import Usage
    from deltamem.client import AsyncClient, Client
    from deltamem.config import Settings
    from deltamem.core.delta import Edit, Patch, Put, SetText, Splice, apply, compose, diff
    from deltamem.core.model import (
        Episode,
        Experience,
        Knowledge,
        Lesson,
        Node,
        NodeKind,
        Outcome,
        Skill,
        Step,
        Tree,
    )
    from deltamem.core.ranking import Candidate
    from deltamem.core.render import Style
    from deltamem.core.tree import Action
    from deltamem.embed.base import Embedder
    from deltamem.engine.aio import AsyncDeltaMem
    from deltamem.engine.corrections import Correction
    from deltamem.engine.memory import DeltaMem
    from deltamem.engine.results import (
        BatchResult,
        ChainLink,
        Consolidation,
        LearnResult,
        OutcomeRecord,
        Recall,
        TreeRecall,
        TreeWrite,
    )
    from deltamem.errors import (
        BudgetExceeded,
        ConfigError,
        DeltaMemError,
        EmbedderMismatch,
        EpisodeError,
        ExtractionError,
        InvalidExport,
        NodeNotFound,
        PatchError,
        ProviderError,
        RemoteError,
        SchemaError,
        SpaceNotFound,
        StoreError,
    )
    from deltamem.extract.base import Extractor
    from deltamem.llm.base import LLM
    from deltamem.scenes import Scene
    from deltamem.store.base import EpisodeRecord, Store

__version__ = "0.1.0"

__all__ = [
    "Action",
    "AsyncClient",
    "AsyncDeltaMem",
    "BatchResult",
    "BudgetExceeded",
    "Candidate",
    "ChainLink",
    "Client",
    "ConfigError",
    "Consolidation",
    "Correction",
    "DeltaMem",
    "DeltaMemError",
    "Edit",
    "Embedder",
    "EmbedderMismatch",
    "Episode",
    "EpisodeError",
    "EpisodeRecord",
    "Experience",
    "ExtractionError",
    "Extractor",
    "InvalidExport",
    "Knowledge",
    "LLM",
    "LearnResult",
    "Lesson",
    "Node",
    "NodeKind",
    "NodeNotFound",
    "Outcome",
    "OutcomeRecord",
    "Patch",
    "PatchError",
    "ProviderError",
    "Put",
    "Recall",
    "RemoteError",
    "Scene",
    "SchemaError",
    "SetText",
    "Settings",
    "Skill",
    "SpaceNotFound",
    "Splice",
    "Step",
    "Store",
    "StoreError",
    "Style",
    "Tree",
    "TreeRecall",
    "TreeWrite",
    "Usage",
    "__version__",
    "apply",
    "compose",
    "diff",
]


# Public name -> the module that defines it.
_HOME: dict[str, str] = {
    "Action": "deltamem.core.tree",
    "AsyncClient": "deltamem.client",
    "AsyncDeltaMem": "deltamem.engine.aio",
    "BatchResult": "deltamem.engine.results",
    "BudgetExceeded": "deltamem.errors",
    "Candidate": "deltamem.core.ranking",
    "ChainLink": "deltamem.engine.results",
    "Client": "deltamem.client",
    "ConfigError": "deltamem.errors",
    "Consolidation": "deltamem.engine.results",
    "Correction": "deltamem.engine.corrections",
    "DeltaMem": "deltamem.engine.memory",
    "DeltaMemError": "deltamem.errors",
    "Edit": "deltamem.core.delta",
    "Embedder": "deltamem.embed.base",
    "EmbedderMismatch": "deltamem.errors",
    "Episode": "deltamem.core.model",
    "EpisodeError": "deltamem.errors",
    "EpisodeRecord": "deltamem.store.base",
    "Experience": "deltamem.core.model",
    "ExtractionError": "deltamem.errors",
    "Extractor": "deltamem.extract.base",
    "InvalidExport": "deltamem.errors",
    "Knowledge": "deltamem.core.model",
    "LLM": "deltamem.llm.base",
    "LearnResult": "deltamem.engine.results",
    "Lesson": "deltamem.core.model",
    "Node": "deltamem.core.model",
    "NodeKind": "deltamem.core.model",
    "NodeNotFound": "deltamem.errors",
    "Outcome": "deltamem.core.model",
    "OutcomeRecord": "deltamem.engine.results",
    "Patch": "deltamem.core.delta",
    "PatchError": "deltamem.errors",
    "ProviderError": "deltamem.errors",
    "Put": "deltamem.core.delta",
    "Recall": "deltamem.engine.results",
    "RemoteError": "deltamem.errors",
    "Scene": "deltamem.scenes",
    "SchemaError": "deltamem.errors",
    "SetText": "deltamem.core.delta",
    "Settings": "deltamem.config",
    "Skill": "deltamem.core.model",
    "SpaceNotFound": "deltamem.errors",
    "Splice": "deltamem.core.delta",
    "Step": "deltamem.core.model",
    "Store": "deltamem.store.base",
    "StoreError": "deltamem.errors",
    "Style": "deltamem.core.render",
    "Tree": "deltamem.core.model",
    "TreeRecall": "deltamem.engine.results",
    "TreeWrite": "deltamem.engine.results",
    "Usage": "deltamem._util.usage",
    "apply": "deltamem.core.delta",
    "compose": "deltamem.core.delta",
    "diff": "deltamem.core.delta",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'deltamem' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
