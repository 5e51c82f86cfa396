"""The seeded stratified split of the linear probe's train split into fit and validation parts."""

from __future__ import annotations

from typing import Any

import numpy as np

from cl_diag.measurement.probes.inputs import _labels


def stratified_split(y: Any, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded stratified split of ``range(len(y))`` into (fit, validation) index arrays.

    Each class c with n_c samples sends ``min(round(val_fraction * n_c), n_c - 1)`` of
    them, drawn by ``numpy.random.default_rng(seed)``, to validation, so every class
    stays in the fit part.  Both arrays are returned sorted.
    """
    y = _labels(y, len(y), "y", "y")
    if not (0.0 < float(val_fraction) < 1.0):
        raise ValueError(f"val_fraction must lie strictly between 0 and 1, got {val_fraction}")
    rng = np.random.default_rng(seed)
    val_parts = []
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        n_val = min(int(round(val_fraction * idx.size)), idx.size - 1)
        if n_val > 0:
            val_parts.append(rng.permutation(idx)[:n_val])
    val = np.sort(np.concatenate(val_parts)) if val_parts else np.empty(0, dtype=np.int64)
    if val.size == 0:
        raise ValueError(
            f"the validation part of the train split is empty (val_fraction={val_fraction}, "
            f"{y.size} samples); use more training samples or a larger val_fraction"
        )
    mask = np.ones(y.size, dtype=bool)
    mask[val] = False
    return np.flatnonzero(mask), val