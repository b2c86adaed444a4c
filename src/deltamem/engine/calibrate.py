"""Calibrate a tree's match threshold tau from labelled episodes (pure numpy).

Retrieval accepts the best-scoring node when its cosine similarity clears tau. Given the embedded
keys of real episodes and a label per episode (same label = "should match"), this module scores
every candidate tau two ways:

* **top-1 retrieval** (recommended; it mirrors what the read path does): each item queries all the
  others. If its best match clears tau, that is a true positive when the match shares its label
  and a false positive otherwise; if it does not clear tau, it is a false negative when some other
  item shares its label (a correct match was available) and a true negative otherwise. Each item
  also queries the others *without its own group* -- a task the memory has never seen -- where
  any accepted match is a false positive. Without these probes a memory in which every task has
  been seen before would calibrate to tau = 0.
* **pairs**: every unordered pair, predicting "same label" when ``cos >= tau``.

Each gives precision, recall and F-beta per tau; the recommended tau is the middle of the range
of taus that reach the best top-1 score, as far as the data allows from both kinds of error.
Precision with no predicted matches is reported as 1.0 (nothing accepted, nothing wrong); the
score is then 0 whenever a match was possible.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from deltamem.core.model import Episode
from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError

F64 = npt.NDArray[np.float64]


def default_thresholds() -> list[float]:
    """Candidate taus 0.00, 0.01, ..., 1.00."""
    return [round(i / 100, 2) for i in range(101)]


@dataclass(frozen=True)
class CurvePoint:
    """Scores of one candidate threshold."""

    tau: float
    precision: float
    recall: float
    f1: float
    tp: int
    fp: int
    fn: int


@dataclass(frozen=True)
class Calibration:
    """Result of :func:`calibrate`: the recommended tau, both curves, and similarity statistics.

    ``tau``/``precision``/``recall``/``f1`` are from the top-1 formulation; ``pair_tau`` and
    ``pair_f1`` are the pair formulation's best, for comparison.
    """

    tau: float
    precision: float
    recall: float
    f1: float
    pair_tau: float
    pair_f1: float
    n_items: int
    n_groups: int
    n_matchable: int
    n_same_pairs: int
    n_diff_pairs: int
    within_mean: float
    between_mean: float
    top1_curve: tuple[CurvePoint, ...]
    pair_curve: tuple[CurvePoint, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (curves as lists of dicts)."""
        return asdict(self)

    def table(self, step: float = 0.05) -> list[dict[str, float]]:
        """Rows for a CLI table: every tau on a ``step`` grid, plus the chosen tau.

        Each row has ``tau``, ``top1_precision``, ``top1_recall``, ``top1_f1``, ``pair_f1``.
        """
        rows = []
        for top, pair in zip(self.top1_curve, self.pair_curve, strict=True):
            on_grid = abs(top.tau / step - round(top.tau / step)) < 1e-6
            if on_grid or top.tau == self.tau:
                rows.append({"tau": top.tau, "top1_precision": top.precision,
                             "top1_recall": top.recall, "top1_f1": top.f1, "pair_f1": pair.f1})
        return rows


def _prf(tp: int, fp: int, fn: int, beta: float = 1.0) -> tuple[float, float, float]:
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    b2 = beta * beta
    denominator = b2 * precision + recall
    score = (1 + b2) * precision * recall / denominator if denominator else 0.0
    return precision, recall, score


def _best(curve: Sequence[CurvePoint]) -> CurvePoint:
    """The point in the middle of the best-F1 plateau (the grid point nearest its centre)."""
    top = max(round(p.f1, 12) for p in curve)
    plateau = [p for p in curve if round(p.f1, 12) == top]
    centre = (plateau[0].tau + plateau[-1].tau) / 2
    return min(plateau, key=lambda p: (abs(p.tau - centre), -p.tau))


def _top1_curve(sims: F64, labels: npt.NDArray[np.int64],
                taus: Sequence[float], beta: float = 1.0) -> list[CurvePoint]:
    n = len(labels)
    masked = sims.copy()
    np.fill_diagonal(masked, -np.inf)
    best = masked.argmax(axis=1)
    best_sim = masked[np.arange(n), best]
    correct = labels[best] == labels
    counts = np.bincount(labels)
    matchable = counts[labels] > 1
    # Probe for an unseen task: the best match among the other groups only.
    best_other = np.where(labels[:, None] != labels[None, :], masked, -np.inf).max(axis=1)
    curve = []
    for tau in taus:
        accepted = best_sim >= tau
        tp = int(np.sum(accepted & correct))
        fp = int(np.sum(accepted & ~correct)) + int(np.sum(best_other >= tau))
        fn = int(np.sum(~accepted & matchable))
        curve.append(CurvePoint(tau, *_prf(tp, fp, fn, beta), tp=tp, fp=fp, fn=fn))
    return curve


def _pair_curve(pair_sims: F64, same: npt.NDArray[np.bool_],
                taus: Sequence[float]) -> list[CurvePoint]:
    # Sort once, then count pairs at or above each tau with a binary search.
    order = np.argsort(-pair_sims, kind="stable")
    sorted_sims = pair_sims[order]
    cum_same = np.concatenate(([0], np.cumsum(same[order])))
    total_same = int(same.sum())
    curve = []
    for tau in taus:
        k = int(np.searchsorted(-sorted_sims, -tau, side="right"))  # pairs with sim >= tau
        tp = int(cum_same[k])
        fp = k - tp
        fn = total_same - tp
        curve.append(CurvePoint(tau, *_prf(tp, fp, fn), tp=tp, fp=fp, fn=fn))
    return curve


def calibrate(vectors: npt.ArrayLike, groups: Sequence[Hashable],
              thresholds: Sequence[float] | None = None, *, beta: float = 1.0) -> Calibration:
    """Pick the match threshold that best separates same-group from different-group items.

    Args:
        vectors: ``(n, d)`` embedded keys, one per episode (normalised here if they are not).
        groups: a label per row; rows with equal labels should match each other.
        thresholds: candidate taus (default 0.00..1.00 in steps of 0.01).
        beta: weight of recall against precision in the top-1 score (F-beta; 1 = F1). A memory
            that misses a known task loses everything, while a match to a *related* task still
            gives an adaptable hint, so ``deltamem calibrate`` uses beta = 2 by default.

    Returns:
        A :class:`Calibration`; ``tau`` is the middle of the best top-1 F-beta plateau (the
        ``f1`` field holds that F-beta score).

    Raises:
        ConfigError: shapes disagree, fewer than two items, or no group has two members (then
            no match is ever correct and there is nothing to calibrate).
    """
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] != len(groups):
        raise ConfigError(f"need an (n, d) array with one group per row; got shape {x.shape} "
                          f"and {len(groups)} groups")
    if x.shape[0] < 2:
        raise ConfigError("calibration needs at least two items")
    _, labels = np.unique(np.array([repr(g) for g in groups]), return_inverse=True)
    labels = labels.astype(np.int64)
    if np.bincount(labels).max() < 2:
        raise ConfigError("no group has two or more items, so no match can be correct; "
                          "label episodes of the same task (or scene) with the same group")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x = x / np.where(norms == 0.0, 1.0, norms)
    sims = x @ x.T
    taus = list(thresholds) if thresholds is not None else default_thresholds()
    iu = np.triu_indices(len(labels), k=1)
    pair_sims = sims[iu]
    same = labels[iu[0]] == labels[iu[1]]
    top1 = _top1_curve(sims, labels, taus, beta)
    pairs = _pair_curve(pair_sims, same, taus)
    best, best_pair = _best(top1), _best(pairs)
    counts = np.bincount(labels)
    return Calibration(
        tau=best.tau, precision=best.precision, recall=best.recall, f1=best.f1,
        pair_tau=best_pair.tau, pair_f1=best_pair.f1,
        n_items=len(labels), n_groups=len(counts), n_matchable=int(np.sum(counts[labels] > 1)),
        n_same_pairs=int(same.sum()), n_diff_pairs=int((~same).sum()),
        within_mean=float(pair_sims[same].mean()) if same.any() else float("nan"),
        between_mean=float(pair_sims[~same].mean()) if (~same).any() else float("nan"),
        top1_curve=tuple(top1), pair_curve=tuple(pairs),
    )


@dataclass(frozen=True)
class EpisodeCalibration:
    """Task-tree and environment-tree calibrations; either is ``None`` when it could not run."""

    task: Calibration | None
    env: Calibration | None
    embedder: str

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict."""
        return {"embedder": self.embedder,
                "task": self.task.to_dict() if self.task else None,
                "env": self.env.to_dict() if self.env else None}


def in_splits(episodes: Iterable[Episode], splits: Iterable[str]) -> list[Episode]:
    """The episodes whose recorded split (``meta["split"]``) is one of ``splits``.

    Thresholds are chosen on train or dev episodes only (docs/evaluation-protocol.md), so the
    calibration of the defaults reads ``--split train``; an episode without a recorded split is
    left out, since nothing says it is not a test episode.

    Raises:
        ConfigError: no episode is left.
    """
    wanted = set(splits)
    eps = list(episodes)
    kept = [e for e in eps if e.meta.get("split") in wanted]
    if not kept:
        found = sorted({str(e.meta.get("split")) for e in eps})
        raise ConfigError(f"no episode has split {' or '.join(sorted(wanted))} in its meta "
                          f"(found: {', '.join(found) or 'no episodes'})")
    return kept


def _calibrate_keys(episodes: Sequence[Episode], key: Callable[[Episode], str],
                    group: Callable[[Episode], Hashable | None], embedder: Embedder,
                    thresholds: Sequence[float] | None, beta: float) -> Calibration | None:
    keys, labels = [], []
    for ep in episodes:
        label = group(ep)
        text = key(ep)
        if label is not None and text.strip():  # unlabelled or keyless episodes are skipped
            keys.append(text)
            labels.append(label)
    if len(keys) < 2 or max((labels.count(g) for g in set(labels)), default=0) < 2:
        return None
    return calibrate(embedder.embed(keys), labels, thresholds, beta=beta)


def calibrate_episodes(episodes: Iterable[Episode], embedder: Embedder, *,
                       task_group: Callable[[Episode], Hashable | None],
                       env_group: Callable[[Episode], Hashable | None] | None = None,
                       thresholds: Sequence[float] | None = None,
                       beta: float = 1.0) -> EpisodeCalibration:
    """Calibrate tau_task (keys: ``episode.task``) and tau_env (keys: ``episode.env``).

    Args:
        episodes: labelled episodes, e.g. from a benchmark run.
        embedder: the embedder the memory will use (thresholds do not transfer between models).
        task_group: label of an episode's task, e.g. ``lambda e: e.meta["task_type"]``; return
            ``None`` to leave an episode out.
        env_group: label of an episode's scene, e.g. ``lambda e: e.meta["room_layout"]``;
            ``None`` skips the environment calibration.
        thresholds: candidate taus (default 0.00..1.00 step 0.01).
        beta: recall weight of the top-1 score (see :func:`calibrate`).

    Returns:
        An :class:`EpisodeCalibration`; a side is ``None`` when it had no two same-group items.
    """
    eps = list(episodes)
    task = _calibrate_keys(eps, lambda e: e.task, task_group, embedder, thresholds, beta)
    env = (_calibrate_keys(eps, lambda e: e.env, env_group, embedder, thresholds, beta)
           if env_group is not None else None)
    return EpisodeCalibration(task=task, env=env, embedder=embedder.name)
