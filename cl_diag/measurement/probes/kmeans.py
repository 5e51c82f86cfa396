"""k-means on frozen features scored by NMI and ARI: the clustering probe."""

from __future__ import annotations

from typing import Any

import torch

from cl_diag.measurement.probes.checks import require_probe_inputs
from cl_diag.measurement.probes.features import (
    _classes,
    _features,
    _labels,
    _normalise,
    _positive_int,
)
from cl_diag.result import Clustering


def clustering(
    x: Any, y: Any, *, seed: int = 0, n_init: int = 10, max_iter: int = 300
) -> Clustering:
    """k-means on L2-normalised features with k = number of classes; NMI and ARI.

    scikit-learn's ``KMeans(n_clusters=C, init="k-means++", n_init=n_init,
    random_state=seed)`` on x_i / ||x_i|| (float64), scored against the labels with
    ``normalized_mutual_info_score`` (arithmetic mean normalisation) and
    ``adjusted_rand_score``.  NMI lies in [0, 1]; ARI is at most 1 and near 0 for
    chance (it can be slightly negative).
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    xx = _features(x, "x", dtype=torch.float64)
    yy = _labels(y, xx.shape[0], "y", "x")
    require_probe_inputs("clustering", test_y=yy)
    classes = _classes(yy)
    n_init = _positive_int(n_init, "n_init")
    max_iter = _positive_int(max_iter, "max_iter")
    feats = _normalise(xx).numpy()
    km = KMeans(
        n_clusters=int(classes.size),
        init="k-means++",
        n_init=n_init,
        max_iter=max_iter,
        random_state=seed,
    )
    pred = km.fit_predict(feats)
    return Clustering(
        nmi=float(normalized_mutual_info_score(yy, pred)),
        ari=float(adjusted_rand_score(yy, pred)),
        settings={
            "normalisation": "l2 per row",
            "algorithm": "sklearn KMeans, k-means++ init, Lloyd",
            "k": int(classes.size),
            "n_init": n_init,
            "max_iter": max_iter,
            "seed": int(seed),
            "nmi_average": "arithmetic",
            "n": int(xx.shape[0]),
        },
    )
