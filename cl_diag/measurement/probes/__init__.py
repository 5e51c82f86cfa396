"""Probes of a frozen representation: linear, kNN, positive retrieval, clustering.

Pure functions of cached ``(n, d)`` features and integer labels, deterministic for fixed
inputs, seed and thread count; each L2-normalises the rows first (``x_i / max(||x_i||,
1e-12)``) and returns its block of result.json with ``settings`` recording every choice. The
protocol follows the paper (Lee et al., ICML 2025, App. D: backbone output, projector
dropped, un-augmented features):

* :func:`linear_probe` -- multinomial logistic regression, full-batch L-BFGS, weight decay
  chosen on a stratified held-out part of the train split, then refit on all of it;
* :func:`knn_probe` -- weighted cosine kNN with the InstDisc vote (Wu et al. 2018, as
  solo-learn's ``WeightedKNNClassifier``);
* :func:`retrieval` -- rank of the positive ``v_i`` among all ``v`` for each ``u_i``;
* :func:`clustering` -- k-means with k = number of classes, NMI and ARI.

The modules (``linear``, ``lbfgs``, ``split``, ``knn``, ``ranking``, ``kmeans``, ``features``,
``checks``) are not named after the functions, so an import of one never resolves to a
function.
"""

from __future__ import annotations

from cl_diag.measurement.probes.checks import check_probe_inputs
from cl_diag.measurement.probes.features import ProbeInputError
from cl_diag.measurement.probes.kmeans import clustering
from cl_diag.measurement.probes.knn import knn_predict, knn_probe

# _fit_logreg and _Memory: re-exported because tests/test_probes.py imports them from here
from cl_diag.measurement.probes.lbfgs import _Memory  # noqa: F401
from cl_diag.measurement.probes.linear import (  # noqa: F401
    DEFAULT_WEIGHT_DECAYS,
    _fit_logreg,
    linear_probe,
)
from cl_diag.measurement.probes.ranking import retrieval, retrieval_ranks
from cl_diag.measurement.probes.split import stratified_split

__all__ = [
    "DEFAULT_WEIGHT_DECAYS",
    "ProbeInputError",
    "check_probe_inputs",
    "clustering",
    "knn_predict",
    "knn_probe",
    "linear_probe",
    "retrieval",
    "retrieval_ranks",
    "stratified_split",
]
