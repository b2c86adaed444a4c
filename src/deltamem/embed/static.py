"""A static ("model2vec-like") embedder distilled from the numpy MiniLM.

Distillation runs the real MiniLM once over every vocabulary token on its own (``[CLS] tok
[SEP]``), then post-processes the token matrix:

1. **centre** it (MiniLM vectors share a large common direction that would make every mean look
   alike) and optionally project onto the top principal components (PCA, default 256 dims);
2. **weight** each token by ``log(1 + rank)``, where rank is the token's position in BERT's
   WordPiece vocabulary counted from "the": after the special and single-character entries that
   vocabulary lists whole words roughly by corpus frequency, so this is a Zipf-style proxy that
   damps function words without needing a corpus.

A text then embeds as the mean of its tokens' rows, L2-normalised: a gather and a sum, tens of
thousands of sentences per second. Quality is below MiniLM (see ``benchmarks/embed.py`` for the
Spearman agreement of pairwise similarities).

The matrix is cached under :func:`deltamem.config.cache_dir` (``$DELTAMEM_CACHE``) in a folder
keyed by the settings and a fingerprint of the model files. Distillation is resumable and atomic:
chunks are written as temp files then renamed, a restart skips the chunks already on disk, and
``manifest.json`` is written last, so a folder without it is never read as complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from deltamem import config
from deltamem.embed.base import Vectors, l2_normalise
from deltamem.embed.minilm import F32, find_model_dir, load_model
from deltamem.errors import ConfigError

FORMAT_VERSION = 1
DEFAULT_PCA_DIMS = 256
CHUNK_TOKENS = 2048
_BATCH = 512
_FEW = 4  # texts encoded one by one rather than through the tokenizer's thread pool


@dataclass(frozen=True)
class StaticSettings:
    """Everything that changes the distilled matrix; hashed into the cache folder name."""

    pca_dims: int | None
    vocab_limit: int | None
    model_fingerprint: str

    def key(self) -> str:
        """Short stable hash naming the cache folder."""
        blob = json.dumps({"v": FORMAT_VERSION, **self.__dict__}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def model_fingerprint(model_dir: Path) -> str:
    """Cheap identity of the model files: weight size plus hashes of config and tokenizer."""
    h = hashlib.sha256()
    h.update(str((model_dir / "model.safetensors").stat().st_size).encode())
    for name in ("config.json", "tokenizer.json"):
        h.update((model_dir / name).read_bytes())
    return h.hexdigest()[:16]


def _atomic_save(path: Path, array: npt.NDArray[Any]) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "wb") as fh:
        np.save(fh, array)
    os.replace(tmp, path)


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _special_mask(vocab: dict[str, int], size: int) -> npt.NDArray[np.bool_]:
    """Rows that never carry meaning: [PAD], [UNK], [CLS], [SEP], [MASK] and [unusedN]."""
    mask = np.zeros(size, dtype=bool)
    for token, idx in vocab.items():
        if token.startswith("[") and token.endswith("]") and idx < size:
            mask[idx] = True
    return mask


def _zipf_weights(vocab: dict[str, int], size: int) -> F32:
    """``log(1 + rank)`` with rank counted from the entry for "the" (see the module docstring)."""
    start = vocab.get("the", 0)
    rank = np.maximum(np.arange(size, dtype=np.float64) - start + 1.0, 1.0)
    return np.log1p(rank).astype(np.float32)


def _postprocess(raw: F32, ignore: npt.NDArray[np.bool_], weights: F32,
                 pca_dims: int | None) -> F32:
    """Centre, optionally PCA-project, and weight the raw token vectors; zero ``ignore`` rows.

    Statistics (mean, PCA axes) come from real tokens only: untrained [unusedN] rows and tokens
    past a vocabulary limit would skew them.
    """
    real = np.flatnonzero(~ignore)
    centred = raw[real].astype(np.float64)
    centred -= centred.mean(axis=0)
    if pca_dims is not None:
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        centred = centred @ vt[:pca_dims].T
    out = np.zeros((raw.shape[0], centred.shape[1]), dtype=np.float32)
    out[real] = centred * weights[real, None]
    return out


class Distiller:
    """Builds (or resumes building) the token matrix for one :class:`StaticSettings`."""

    def __init__(self, folder: Path, model_dir: Path, settings: StaticSettings):
        """Work in ``folder``; read the MiniLM from ``model_dir``."""
        self.folder = folder
        self.model_dir = model_dir
        self.settings = settings

    @property
    def parts(self) -> Path:
        """Folder of per-chunk raw vectors kept until the final matrix is written."""
        return self.folder / "parts"

    def run(self) -> dict[str, Any]:
        """Distil, resuming from any chunks on disk; return the manifest written."""
        from tokenizers import Tokenizer

        started = time.perf_counter()
        self.parts.mkdir(parents=True, exist_ok=True)
        tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        vocab = tokenizer.get_vocab()
        model = load_model(self.model_dir)
        size = model.vocab_size
        limit = size if self.settings.vocab_limit is None else min(self.settings.vocab_limit, size)
        cls_id, sep_id = vocab["[CLS]"], vocab["[SEP]"]
        ignore = _special_mask(vocab, size)
        ignore[limit:] = True  # tokens past the limit have no vector: ignored when embedding
        todo = np.flatnonzero(~ignore)  # special rows end up zero, so skip their forward passes
        raw = np.zeros((size, model.hidden), dtype=np.float32)
        for start in range(0, len(todo), CHUNK_TOKENS):
            ids = todo[start:start + CHUNK_TOKENS]
            # The name records the exact slice, so a rerun with another chunk size never
            # reads a chunk as covering tokens it does not.
            part = self.parts / f"part-{start:06d}-{start + len(ids):06d}.npy"
            if not part.exists():
                _atomic_save(part, model.embed_ids([[cls_id, int(i), sep_id] for i in ids], _BATCH))
            raw[ids] = np.load(part)
        matrix = _postprocess(raw, ignore, _zipf_weights(vocab, size), self.settings.pca_dims)
        _atomic_save(self.folder / "vectors.npy", matrix)
        tmp = self.folder / f"tokenizer.json.tmp{os.getpid()}"
        shutil.copyfile(self.model_dir / "tokenizer.json", tmp)
        os.replace(tmp, self.folder / "tokenizer.json")
        manifest = {
            "format_version": FORMAT_VERSION,
            **self.settings.__dict__,
            "shape": list(matrix.shape),
            "distilled_tokens": int(len(todo)),
            # Seconds of this run only: a resumed distillation reports the remainder.
            "distil_seconds": round(time.perf_counter() - started, 2),
            "created_at": time.time(),
        }
        _atomic_write_text(self.folder / "manifest.json", json.dumps(manifest, indent=2))
        shutil.rmtree(self.parts, ignore_errors=True)
        return manifest


@dataclass
class _Loaded:
    matrix: F32
    tokenizer: Any
    manifest: dict[str, Any]


_LOADED: dict[Path, _Loaded] = {}
_LOCK = threading.Lock()


class StaticEmbedder:
    """Mean of distilled MiniLM token vectors, L2-normalised (``name = "static-minilm"``).

    The matrix is distilled on first use (about a minute on 2 cores for the full vocabulary) and
    cached on disk; later processes load it in well under a second. It distils from the bundled
    MiniLM (whose tokenizer and fingerprint identify the cache).

    Args:
        cache_dir: root cache folder (default :func:`deltamem.config.cache_dir`).
        pca_dims: keep this many principal components; ``None`` keeps all 384 (centred only).
        vocab_limit: distil only token ids below this (tests use it to stay fast); tokens past it
            are ignored when embedding. Non-default settings are recorded in ``name``.
        model_dir: MiniLM folder (default: the model bundled with deltamem).
    """

    def __init__(self, cache_dir: Path | str | None = None, pca_dims: int | None = DEFAULT_PCA_DIMS,
                 vocab_limit: int | None = None, model_dir: Path | str | None = None):
        """Validate settings and locate the model; nothing heavy happens until :meth:`embed`."""
        if pca_dims is not None and not 1 <= pca_dims <= 384:
            raise ConfigError(f"pca_dims must be in 1..384 or None, got {pca_dims}")
        if vocab_limit is not None and vocab_limit < (2000 + pca_dims if pca_dims else 1000):
            # The first ~2000 ids of BERT's vocabulary are special and single-character tokens
            # (the first ~1000 only special ones): PCA needs ``pca_dims`` real words beyond them.
            raise ConfigError("vocab_limit must be at least 2000 + pca_dims (1000 without PCA), "
                              f"got {vocab_limit}")
        self._model_dir = Path(model_dir) if model_dir is not None else find_model_dir()
        self._root = Path(cache_dir).expanduser() if cache_dir is not None else config.cache_dir()
        self.settings = StaticSettings(pca_dims, vocab_limit, model_fingerprint(self._model_dir))
        self.dim = pca_dims if pca_dims is not None else 384
        default = pca_dims == DEFAULT_PCA_DIMS and vocab_limit is None
        self.name = "static-minilm" if default else (
            f"static-minilm-p{pca_dims or 'full'}" + (f"-v{vocab_limit}" if vocab_limit else ""))

    @property
    def folder(self) -> Path:
        """This configuration's cache folder."""
        return self._root / "static-minilm" / self.settings.key()

    def ensure(self) -> dict[str, Any]:
        """Distil if needed, load once per process, and return the manifest."""
        return self._load().manifest

    def warm(self) -> None:
        """Load the matrix and tokenizer now (see ``MiniLMEmbedder.warm``)."""
        self._load()

    def _load(self) -> _Loaded:
        with _LOCK:
            loaded = _LOADED.get(self.folder)
            if loaded is not None:
                return loaded
            manifest_path = self.folder / "manifest.json"
            if not manifest_path.exists():
                Distiller(self.folder, self._model_dir, self.settings).run()
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
            tokenizer.no_padding()
            tokenizer.no_truncation()
            loaded = _Loaded(np.load(self.folder / "vectors.npy"), tokenizer,
                             json.loads(manifest_path.read_text()))
            _LOADED[self.folder] = loaded
            return loaded

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` into ``(len(texts), dim)`` unit vectors (zero rows for empty texts)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        loaded = self._load()
        tok = loaded.tokenizer
        if len(texts) <= _FEW:  # a recall's two keys: the batch call's thread pool costs more
            encodings = [tok.encode(t, add_special_tokens=False) for t in texts]
        else:  # encode_batch_fast (tokenizers >= 0.20) skips character offsets we never use
            encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
            encodings = encode(list(texts), add_special_tokens=False)
        lengths = np.array([len(e.ids) for e in encodings], dtype=np.int64)
        rows = np.flatnonzero(lengths)
        if rows.size == 0:
            return out
        flat = np.fromiter((i for e in encodings for i in e.ids), dtype=np.int64,
                           count=int(lengths.sum()))
        starts = np.concatenate(([0], np.cumsum(lengths[rows])[:-1]))
        # reduceat sums each text's slice; empty texts were excluded so no slice is empty.
        out[rows] = np.add.reduceat(loaded.matrix[flat], starts, axis=0)
        return l2_normalise(out)
