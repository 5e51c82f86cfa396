"""Probes of a frozen representation: linear, kNN, positive retrieval, clustering.

All four are pure functions of precomputed feature tensors (``torch.Tensor`` or
``numpy.ndarray``, shape ``(n, d)``) and integer labels; none trains or loads a
model.  Features are compared by cosine similarity, so every probe first
L2-normalises the rows, ``x_i / max(||x_i||_2, 1e-12)`` (an all-zero row stays
zero and is then at cosine 0 from everything).

Protocols (the paper, Lee et al., "On the Similarities of Embeddings in
Contrastive Learning", ICML 2025, App. D, probes the backbone output with the
projector dropped, on normalised, un-augmented features):

* :func:`linear_probe` -- multinomial logistic regression on the cached features,
  full-batch L-BFGS, weight decay chosen on a stratified held-out part of the train
  split, then refit on the whole train split.
* :func:`knn_probe` -- weighted cosine kNN with the InstDisc vote (Wu et al. 2018,
  as in solo-learn's ``WeightedKNNClassifier``).
* :func:`retrieval` -- rank of the positive ``v_i`` among all ``v`` for each ``u_i``.
* :func:`clustering` -- k-means with k = number of classes, NMI and ARI.

Every function returns its block of result.json (:class:`cl_diag.result.LinearProbe`,
``KnnProbe``, ``Retrieval``, ``Clustering``) of Python numbers -- accuracies, recalls and
NMI as fractions in [0, 1] -- with ``settings`` recording every choice that affects the
numbers.  All are deterministic for fixed inputs, seed and thread
count.

One module per kind: :mod:`.linear` (with its solver in :mod:`.lbfgs` and the
held-out split in :mod:`.split`), :mod:`.knn`, :mod:`.ranking` (retrieval) and
:mod:`.kmeans` (clustering); :mod:`.features` validates what they are given and
:mod:`.checks` says, from labels alone, whether a probe can run at all.  The
modules are not named after the functions ``retrieval`` and ``clustering`` so that
``import cl_diag.measurement.probes.<module>`` never resolves to a function.
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
