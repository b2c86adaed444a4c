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

import deltamem.formats.transcripts  # noqa: F401  (registers Episode.from_messages)
import deltamem.privacy.redact  # noqa: F401  (registers the redactor of error texts)
from deltamem._util.usage import Usage
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

if TYPE_CHECKING:
    from deltamem.client import AsyncClient, Client

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


def __getattr__(name: str) -> Any:
    # The clients import httpx; load them only when asked for.
    if name in ("Client", "AsyncClient"):
        from deltamem import client

        return getattr(client, name)
    raise AttributeError(f"module 'deltamem' has no attribute {name!r}")
