"""Choosing a hyperparameter on a validation split, and the gain of that procedure, nested.

A claim about "VRN at a tuned λ" is about a *procedure* (try the candidates, choose on a
validation split, train with the choice), not about one λ\\* chosen once, whose choice may not
replicate (plans/vrn-weight-nested.md). :func:`one_se_choice` is the one-standard-error rule
(Breiman et al. 1984; Hastie et al., *Elements of Statistical Learning*, §7.10: the simplest
candidate within one SE of the best mean); :func:`nested_gains` leaves one seed out (its test
score at the choice made on the other seeds, minus at the reference, no VRN);
:func:`selection_shares` gives the bootstrap shares of each choice. Scores are arrays of
shape (candidates, seeds), simplest (the reference) first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "STABLE_SHARE",
    "NestedGains",
    "nested_gains",
    "one_se_choice",
    "selection_shares",
]

#: a choice is called stable when one candidate takes at least this share of the resamples
STABLE_SHARE = 0.8
#: resamples of the seeds behind :func:`selection_shares` (numpy PCG64, seed 0)
BOOTSTRAP_RESAMPLES = 2000


def _check(scores: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[0] < 1 or scores.shape[1] < 1:
        raise ValueError(f"scores must be (candidates, seeds), got shape {scores.shape}")
    if not np.isfinite(scores).all():
        raise ValueError("scores must be finite")
    return scores


def one_se_choice(validation: np.ndarray, n_val: int | None = None) -> int:
    """The index of the candidate the one-standard-error rule chooses from ``validation``
    (candidates, seeds), candidates ordered simplest first: the simplest whose mean is at
    least the best mean minus the best's standard error. With one seed the standard error is
    the binomial one of an accuracy on ``n_val`` validation images (0 when ``n_val`` is None:
    the plain arg-max)."""
    scores = _check(validation)
    means = scores.mean(axis=1)
    best = int(np.argmax(means))  # the first maximum: ties go to the simpler
    k = scores.shape[1]
    if k > 1:
        se = float(scores[best].std(ddof=1)) / math.sqrt(k)
    elif n_val:
        p = float(means[best])
        se = math.sqrt(max(p * (1.0 - p), 0.0) / n_val)
    else:
        se = 0.0
    # float tolerance: a candidate equal to the bound is within it
    bound = means[best] - se - 1e-12
    return int(np.flatnonzero(means >= bound)[0])


@dataclass(frozen=True)
class NestedGains:
    """Per seed: the candidate chosen without that seed (``loso_choice``) and on that seed
    alone (``own_choice``), and the test-score gains of those choices over the reference."""

    seeds: tuple[object, ...]
    loso_choice: tuple[int, ...]
    loso_gain: tuple[float, ...]
    own_choice: tuple[int, ...]
    own_gain: tuple[float, ...]


def nested_gains(
    validation: np.ndarray,
    test: np.ndarray,
    seeds: Sequence[object],
    *,
    n_val: int | None,
    reference: int = 0,
) -> NestedGains:
    """The nested gains of choosing by :func:`one_se_choice`: for each seed s, the choice on
    the other seeds' validation scores (leave one seed out) and on s's own, and s's test score
    at each choice minus its test score at ``reference``. ``validation`` and ``test`` are
    (candidates, seeds) with the same layout; leave-one-out needs at least 2 seeds."""
    val, tst = _check(validation), _check(test)
    if val.shape != tst.shape or val.shape[1] != len(seeds):
        raise ValueError("validation, test and seeds must agree in shape")
    k = val.shape[1]
    if k < 2:
        raise ValueError("leaving one seed out needs at least 2 seeds")
    loso, own = [], []
    for s in range(k):
        others = np.delete(val, s, axis=1)
        loso.append(one_se_choice(others, n_val))
        own.append(one_se_choice(val[:, s : s + 1], n_val))
    base = tst[reference]
    return NestedGains(
        seeds=tuple(seeds),
        loso_choice=tuple(loso),
        loso_gain=tuple(float(tst[c, s] - base[s]) for s, c in enumerate(loso)),
        own_choice=tuple(own),
        own_gain=tuple(float(tst[c, s] - base[s]) for s, c in enumerate(own)),
    )


def selection_shares(
    validation: np.ndarray,
    *,
    n_val: int | None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> np.ndarray:
    """The share of ``resamples`` bootstrap resamples of the seeds (columns drawn with
    replacement, numpy's PCG64 seeded with ``seed``) in which :func:`one_se_choice` picks each
    candidate: an array of one share per candidate, summing to 1. Deterministic."""
    val = _check(validation)
    k = val.shape[1]
    rng = np.random.default_rng(seed)
    counts = np.zeros(val.shape[0], dtype=np.int64)
    for _ in range(resamples):
        columns = rng.integers(0, k, size=k)
        counts[one_se_choice(val[:, columns], n_val)] += 1
    return counts / resamples
