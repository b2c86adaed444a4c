"""Threshold calibration on synthetic clusters and labelled episodes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from deltamem.core.model import Episode
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.calibrate import calibrate, calibrate_episodes, in_splits
from deltamem.errors import ConfigError


def clusters(n_groups: int = 6, per: int = 5, spread: float = 0.35,
             seed: int = 0) -> tuple[np.ndarray, list[int]]:
    """Unit vectors scattered around random orthogonal-ish centres."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_groups, 64))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    x = np.repeat(centres, per, axis=0) + spread * rng.normal(size=(n_groups * per, 64)) / 8
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32), [g for g in range(n_groups) for _ in range(per)]


def best_sims(x: np.ndarray, groups: list[int]) -> tuple[float, float]:
    """(lowest best same-group cosine, highest best other-group cosine) over items."""
    s = x @ x.T
    np.fill_diagonal(s, -np.inf)
    g = np.array(groups)
    same = g[:, None] == g[None, :]
    return float(np.where(same, s, -np.inf).max(1).min()), float(np.where(same, -np.inf, s).max())


def test_recovers_tau_between_within_and_between() -> None:
    """On separable clusters tau lies between the cross-group and within-group similarities."""
    x, groups = clusters()
    low_same, high_other = best_sims(x, groups)
    assert high_other < low_same  # the fixture is separable
    cal = calibrate(x, groups)
    assert high_other < cal.tau <= low_same
    assert cal.f1 == 1.0 and cal.precision == 1.0 and cal.recall == 1.0
    assert cal.between_mean < cal.tau < cal.within_mean


def test_tau_is_the_middle_of_the_best_plateau() -> None:
    """Among equally good thresholds the one in the middle of the range is chosen."""
    x, groups = clusters()
    low_same, high_other = best_sims(x, groups)
    cal = calibrate(x, groups)
    plateau = [p.tau for p in cal.top1_curve if p.f1 == cal.f1]
    assert abs(cal.tau - (plateau[0] + plateau[-1]) / 2) <= 0.005
    assert high_other < cal.tau <= low_same


def test_pair_curve_matches_brute_force() -> None:
    """Pair counts at each tau equal a direct count over all unordered pairs."""
    x, groups = clusters(n_groups=4, per=4, spread=3.0, seed=3)  # overlapping clusters
    cal = calibrate(x, groups, thresholds=[0.0, 0.2, 0.5, 0.8])
    s = x.astype(np.float64) @ x.T.astype(np.float64)
    for point in cal.pair_curve:
        tp = fp = fn = 0
        for i in range(len(groups)):
            for j in range(i + 1, len(groups)):
                hit, same = s[i, j] >= point.tau, groups[i] == groups[j]
                tp += hit and same
                fp += hit and not same
                fn += same and not hit
        assert (point.tp, point.fp, point.fn) == (tp, fp, fn)


def test_top1_counts_a_wrong_nearest_neighbour_as_false_positive() -> None:
    """An item whose best match is in another group is a false positive when accepted."""
    x = np.array([[1.0, 0.0], [0.8, 0.6], [0.96, 0.28], [0.0, 1.0]])
    groups = ["a", "a", "b", "c"]  # item 0's nearest is item 2 (group b)
    cal = calibrate(x, groups, thresholds=[0.5, 0.99])
    low, high = cal.top1_curve
    # at 0.5 every item accepts its best match, and each best match is in another group:
    # 0 -> 2 (b, wrong), 1 -> 2 (b, wrong), 2 -> 0 (a, wrong), 3 -> 1 (cos 0.6, a, wrong);
    # the unseen-task probes (own group hidden) also accept for all four: 4 more false positives
    assert (low.tp, low.fp, low.fn) == (0, 8, 0)
    # at 0.99 nothing is accepted; items 0 and 1 had a same-group partner, so 2 misses
    assert (high.tp, high.fp, high.fn) == (0, 0, 2)
    assert high.precision == 1.0 and high.f1 == 0.0


def test_to_dict_and_table() -> None:
    """The result serialises to JSON and the table includes the chosen tau."""
    x, groups = clusters()
    cal = calibrate(x, groups)
    blob = json.loads(json.dumps(cal.to_dict()))
    assert blob["tau"] == cal.tau and len(blob["top1_curve"]) == 101
    taus = [row["tau"] for row in cal.table(step=0.1)]
    assert cal.tau in taus and 0.5 in taus and len(taus) <= 12


@pytest.mark.parametrize("groups", [[1, 2, 3], [1]])
def test_refuses_uncalibratable_input(groups: list[int]) -> None:
    """Fewer than two items or no repeated group is a ConfigError."""
    x = np.eye(3)[: len(groups)]
    with pytest.raises(ConfigError):
        calibrate(x, groups)


def test_refuses_shape_mismatch() -> None:
    """One group label per row is required."""
    with pytest.raises(ConfigError, match="one group per row"):
        calibrate(np.eye(3), [1, 1])


def test_calibrate_episodes_task_and_env() -> None:
    """Episode calibration embeds task and env keys and groups them with the callables."""
    tasks = {"heat": ["heat the apple", "heat an apple", "heat the red apple"],
             "open": ["open the drawer", "open a drawer", "open the top drawer"]}
    eps = [Episode(task=t, env=f"kitchen {k} room", meta={"kind": k, "scene": k})
           for k, ts in tasks.items() for t in ts]
    eps.append(Episode(task="unlabelled task", meta={}))
    out = calibrate_episodes(eps, HashingEmbedder(), task_group=lambda e: e.meta.get("kind"),
                             env_group=lambda e: e.meta.get("scene"))
    assert out.task is not None and out.env is not None
    assert out.task.n_items == 6 and out.task.f1 == 1.0 and out.env.n_items == 6
    assert out.embedder == "hashing-256"
    assert json.loads(json.dumps(out.to_dict()))["task"]["tau"] == out.task.tau
    no_env = calibrate_episodes(eps, HashingEmbedder(), task_group=lambda e: e.meta.get("kind"))
    assert no_env.env is None


def test_in_splits_keeps_the_named_splits_only() -> None:
    """Episodes are kept by their recorded split; one without a split is never kept."""
    eps = [Episode(task=f"t{i}", meta={"split": s} if s else {})
           for i, s in enumerate(("train", "dev", "test", None, "train"))]
    assert [e.task for e in in_splits(eps, ["train"])] == ["t0", "t4"]
    assert [e.task for e in in_splits(iter(eps), ("train", "dev"))] == ["t0", "t1", "t4"]
    with pytest.raises(ConfigError, match="no episode has split valid"):
        in_splits(eps, ["valid"])
