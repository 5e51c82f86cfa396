"""Can a probe run on these labels?  One answer, given before any features exist.

:func:`check_probe_inputs` needs only labels and counts, so a caller can ask it before
encoding a single image (``analyze`` encodes whole splits before it fits a probe) and skip a
probe with the reason instead of failing after the work is done.  The probes call
:func:`require_probe_inputs` on the same rule, so the answer and the probe never disagree: the
check returns None exactly when the probe accepts the labels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from cl_diag.measurement.probes.features import ProbeInputError, _labels
from cl_diag.measurement.probes.split import empty_validation_reason, held_out_counts

#: The probes :func:`check_probe_inputs` knows, and the labels each needs.
_NEEDS: dict[str, str] = {
    "linear": "train_y",
    "knn": "train_y",
    "clustering": "test_y",
    "retrieval": "n_pairs",
}


def _as_labels(y: Any, name: str) -> np.ndarray:
    a = y if isinstance(y, (np.ndarray, torch.Tensor)) else np.asarray(y)
    if a.ndim == 1 and a.shape[0] == 0:
        # np.asarray([]) is float64: no labels is a reason to skip, not a dtype error
        return np.empty(0, dtype=np.int64)
    return _labels(a, a.shape[0], name, name)


def _single_class(y: np.ndarray, what: str, probe: str) -> str | None:
    classes = np.unique(y)
    if classes.size == 0:
        return f"{what} hold no samples; the {probe} probe needs samples of at least two classes"
    if classes.size == 1:
        return (
            f"{what} hold a single class ({classes[0]}); the {probe} probe needs samples of at "
            f"least two classes: give it more samples, or data with more than one class"
        )
    return None


def check_probe_inputs(
    probe: str,
    *,
    train_y: Any = None,
    test_y: Any = None,
    n_pairs: int | None = None,
    val_fraction: float = 0.1,
) -> str | None:
    """Why ``probe`` cannot run on these labels, or None when it can.

    What each probe needs (a missing argument it needs is a ``ValueError``):

    * ``"linear"`` -- ``train_y`` with at least two classes, and a non-empty validation part
      of the stratified split that chooses the weight decay: some class c must have
      round(``val_fraction`` * n_c) >= 1 and n_c >= 2 (six samples at the default 0.1);
      ``test_y``, when given, non-empty.
    * ``"knn"`` -- ``train_y`` with at least two classes; ``test_y``, when given, non-empty.
    * ``"clustering"`` -- ``test_y``, the labels of the rows it clusters (``analyze`` clusters
      the test split), with at least two classes (k-means with k = the number of classes).
    * ``"retrieval"`` -- ``n_pairs`` >= 1 pairs (u_i, v_i); it uses no labels.

    Labels are 1-D integer sequences (``numpy``, ``torch`` or anything ``numpy`` takes).
    """
    if probe not in _NEEDS:
        raise ValueError(f"probe must be one of {', '.join(_NEEDS)}, got {probe!r}")
    need = _NEEDS[probe]
    if {"train_y": train_y, "test_y": test_y, "n_pairs": n_pairs}[need] is None:
        raise ValueError(f"check_probe_inputs({probe!r}) needs {need}")
    if probe == "retrieval":
        if isinstance(n_pairs, bool) or not isinstance(n_pairs, (int, np.integer)):
            raise ValueError(f"n_pairs must be an integer, got {n_pairs!r}")
        return None if n_pairs >= 1 else "there are no (u, v) pairs; retrieval needs at least one"
    if probe == "clustering":
        return _single_class(_as_labels(test_y, "test_y"), "the clustered labels", probe)
    ty = _as_labels(train_y, "train_y")
    reason = _single_class(ty, "train labels", probe)
    if reason is not None:
        return reason
    if test_y is not None and len(test_y) == 0:
        return f"there are no test samples; the {probe} probe needs at least one to score"
    if probe == "linear" and int(held_out_counts(ty, val_fraction)[1].sum()) == 0:
        return empty_validation_reason(ty.size, val_fraction)
    return None


def require_probe_inputs(probe: str, **labels: Any) -> None:
    """Raise :class:`ProbeInputError` with :func:`check_probe_inputs`'s reason, if any."""
    reason = check_probe_inputs(probe, **labels)
    if reason is not None:
        raise ProbeInputError(reason)
