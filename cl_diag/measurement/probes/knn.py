"""Weighted cosine kNN (InstDisc vote) on frozen features: the kNN probe."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from cl_diag.measurement.probes.checks import require_probe_inputs
from cl_diag.measurement.probes.features import (
    _check_same_dim,
    _classes,
    _encode,
    _features,
    _labels,
    _normalise,
    _positive_int,
)
from cl_diag.measurement.stats import wilson_interval
from cl_diag.result import KnnProbe, KnnScore


def _policy_neighbours(sims: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k nearest per row, ordered by (similarity desc, train index asc).

    ``torch.topk`` returns the right k-th value but leaves the order of equal values,
    and which of them make the cut, unspecified; this puts every row under the stated
    rule so the result does not depend on the kernel.
    """
    vals, idx = sims.topk(k, dim=1, largest=True, sorted=True)
    # reorder candidates: index ascending first, then a stable descending sort by value
    idx, by_idx = idx.sort(dim=1)
    vals = vals.gather(1, by_idx)
    vals, by_val = vals.sort(dim=1, descending=True, stable=True)
    idx = idx.gather(1, by_val)
    # rows where values equal to the k-th straddle the cut: redo them with a full stable sort
    straddle = (sims >= vals[:, -1:]).sum(dim=1) > k
    if bool(straddle.any()):
        rows = straddle.nonzero().squeeze(1)
        full_vals, full_idx = sims[rows].sort(dim=1, descending=True, stable=True)
        vals[rows] = full_vals[:, :k]
        idx[rows] = full_idx[:, :k]
    return vals, idx


def _knn_inputs(train_x, train_y, test_x, ks, temperature, block_size):
    tx = _features(train_x, "train_x")
    vx = _features(test_x, "test_x")
    _check_same_dim(tx, vx, "train_x", "test_x")
    ty = _labels(train_y, tx.shape[0], "train_y", "train_x")
    require_probe_inputs("knn", train_y=ty)
    classes = _classes(ty)
    ks = [_positive_int(k, "each k") for k in ks]
    if not ks:
        raise ValueError("ks is empty; pass at least one k, e.g. ks=(20, 200)")
    try:
        t = float(temperature)
    except (TypeError, ValueError):
        t = math.nan
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    block_size = _positive_int(block_size, "block_size")
    return tx, ty, vx, classes, ks, t, block_size


def _knn_core(tx, ty, vx, classes, ks, temperature, block_size) -> dict[int, np.ndarray]:
    n_train = tx.shape[0]
    eff = {k: min(k, n_train) for k in ks}
    k_max = max(eff.values())
    train = _normalise(tx)
    test = _normalise(vx)
    y_enc = torch.from_numpy(_encode(ty, classes))
    preds = {k: np.empty(vx.shape[0], dtype=np.int64) for k in ks}
    for start in range(0, vx.shape[0], block_size):
        blk = test[start : start + block_size]
        vals, idx = _policy_neighbours(blk @ train.T, k_max)
        weights = (vals.double() / temperature).exp()
        nbr_y = y_enc[idx]
        for k in ks:
            kk = eff[k]
            votes = torch.zeros(blk.shape[0], classes.size, dtype=torch.float64)
            # scatter_add_ adds along each row in neighbour order, so two classes with the
            # same multiset of similarities get bit-identical votes and tie exactly
            votes.scatter_add_(1, nbr_y[:, :kk], weights[:, :kk])
            # argmax returns the first maximal index: equal votes go to the smallest class
            preds[k][start : start + blk.shape[0]] = classes[votes.argmax(dim=1).numpy()]
    return preds


def knn_predict(
    train_x: Any,
    train_y: Any,
    test_x: Any,
    *,
    ks: Sequence[int] = (20, 200),
    temperature: float = 0.07,
    block_size: int = 1024,
) -> dict[int, np.ndarray]:
    """Weighted cosine kNN predictions (InstDisc vote), one label array per requested k.

    With unit rows, s_ij = <x_test_i, x_train_j> (float32).  N_k(i) is the k train rows
    of largest s_ij (ties: smaller train index first; k clipped to n_train).  The vote
    of class c is

        score_c(i) = sum_{j in N_k(i), y_j = c} exp(s_ij / T),

    summed in float64 over neighbours in (similarity desc, index asc) order, and the
    prediction is argmax_c score_c(i), equal votes going to the smallest class label
    (Wu et al. 2018, "Unsupervised Feature Learning via Non-Parametric Instance
    Discrimination"; solo-learn's ``WeightedKNNClassifier``).  Test rows are processed
    ``block_size`` at a time, so memory is O(block_size * n_train), never n_test x n_train.
    """
    return _knn_core(*_knn_inputs(train_x, train_y, test_x, ks, temperature, block_size))


def knn_probe(
    train_x: Any,
    train_y: Any,
    test_x: Any,
    test_y: Any,
    *,
    ks: Sequence[int] = (20, 200),
    temperature: float = 0.07,
    block_size: int = 1024,
) -> KnnProbe:
    """Top-1 accuracy of the weighted cosine kNN classifier of :func:`knn_predict`.

    Returns the top-1 accuracy by requested k (``.top1[20]``; in result.json
    ``{"k20": {"top1": ...}, ...}``) and the ``settings`` (the k actually used, after
    clipping to n_train, is in ``settings["k_effective"]``).  Defaults follow solo-learn / InstDisc:
    k = 20 and 200, T = 0.07.  Test labels absent from the train split count as errors.
    """
    tx, ty, vx, classes, ks, temperature, block_size = _knn_inputs(
        train_x, train_y, test_x, ks, temperature, block_size
    )
    vy = _labels(test_y, vx.shape[0], "test_y", "test_x")
    preds = _knn_core(tx, ty, vx, classes, ks, temperature, block_size)
    n_train = tx.shape[0]
    n_test = len(vy)
    correct = {k: int((preds[k] == vy).sum()) for k in ks}
    scores = {
        k: KnnScore(top1=correct[k] / n_test, top1_interval=wilson_interval(correct[k], n_test))
        for k in ks
    }
    settings = {
        "normalisation": "l2 per row",
        "similarity": "cosine, float32",
        "vote": "sum of exp(sim / T) per class over the k nearest (InstDisc / solo-learn)",
        "ties": "neighbours: smaller train index first; votes: smallest class label",
        "ks": ks,
        "k_effective": {f"k{k}": min(k, n_train) for k in ks},
        "temperature": temperature,
        "n_train": int(n_train),
        "n_test": int(vx.shape[0]),
        "classes": int(classes.size),
    }
    return KnnProbe(scores=scores, settings=settings)
