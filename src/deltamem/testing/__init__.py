"""Test doubles and the store conformance suite, for deltamem's tests and for third parties.

Nothing here is ever used by the product: a memory only gets these objects when a caller passes
them in explicitly.

* :class:`ScriptedLLM`, :class:`FunctionLLM` -- stand-ins for a chat model.
* :class:`HashingEmbedder` -- a deterministic bag-of-words embedder with no notion of meaning.
* ``deltamem.testing.conformance.StoreConformance`` -- the suite every Store backend must pass
  (imported separately because it needs pytest).
"""

from deltamem.embed.hashing import HashingEmbedder
from deltamem.testing.llm import FunctionLLM, LLMCall, ScriptedLLM

__all__ = ["FunctionLLM", "HashingEmbedder", "LLMCall", "ScriptedLLM"]
