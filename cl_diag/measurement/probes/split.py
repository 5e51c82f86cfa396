"""The project's one seeded stratified split of sample indices into a kept and a held-out part.

Two rules, chosen by ``method`` (they draw different samples for the same seed, and both are
pinned by data that already exist, so neither can replace the other):

* ``"per_class"`` -- the linear probe's fit / validation split of its train split.
* ``"sklearn"`` -- scikit-learn's ``train_test_split(stratify=y)``: the fixed digits train /
  test split of ``training.data.digits_split``, recorded in every digits checkpoint and
  behind the reference reports.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from cl_diag.measurement.probes.features import ProbeInputError, _labels

SplitMethod = Literal["per_class", "sklearn"]


def _check_fraction(fraction: float) -> float:
    f = float(fraction)
    if not (0.0 < f < 1.0):
        raise ValueError(f"val_fraction must lie strictly between 0 and 1, got {fraction}")
    return f


def held_out_counts(y: np.ndarray, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Classes of y (sorted) and how many samples of each the ``"per_class"`` rule holds out.

    n_held_out(c) = min(round(fraction * n_c), n_c - 1), Python's round (halves to even), so
    a class always keeps at least one sample.  The linear probe's input check uses it to
    tell, from the labels alone, whether its validation part would be empty.
    """
    f = _check_fraction(fraction)
    classes, sizes = np.unique(y, return_counts=True)
    counts = np.array([min(round(f * int(n)), int(n) - 1) for n in sizes], dtype=np.int64)
    return classes, counts


def empty_validation_reason(n: int, fraction: float) -> str:
    """The message for a ``"per_class"`` split whose held-out part would be empty."""
    # the smallest class that can spare a sample: round(0.1 * 5) = 0 but round(0.1 * 6) = 1
    need = max(2, int(0.5 / float(fraction)))
    while round(float(fraction) * need) < 1:
        need += 1
    return (
        f"the validation part of the train split is empty (val_fraction={fraction}, {n} samples): "
        f"no class has the {need} samples it needs to spare one for choosing the weight decay; "
        f"use more training samples or a larger val_fraction"
    )


def stratified_split(
    y: Any, val_fraction: float, seed: int, *, method: SplitMethod = "per_class"
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded stratified split of ``range(len(y))`` into (kept, held-out) index arrays.

    ``method="per_class"`` (the linear probe's fit / validation split): each class c with
    n_c samples sends ``min(round(val_fraction * n_c), n_c - 1)`` of them, drawn by
    ``numpy.random.default_rng(seed)``, to validation, so every class stays in the fit part;
    an empty validation part raises :class:`ProbeInputError`.

    ``method="sklearn"`` (the fixed digits train / test split): exactly scikit-learn's
    ``train_test_split(arange(n), test_size=val_fraction, stratify=y, random_state=seed)``,
    i.e. ``StratifiedShuffleSplit``'s allocation of ceil(val_fraction * n) held-out samples
    over the classes by largest remainders, drawn with ``RandomState(seed)``.

    Both arrays are int64 and sorted.
    """
    y = _labels(y, len(y), "y", "y")
    if method == "sklearn":
        from sklearn.model_selection import train_test_split

        _check_fraction(val_fraction)
        kept, held = train_test_split(
            np.arange(y.size), test_size=val_fraction, stratify=y, random_state=seed
        )
        return np.sort(kept), np.sort(held)
    if method != "per_class":
        raise ValueError(f"method must be 'per_class' or 'sklearn', got {method!r}")
    classes, counts = held_out_counts(y, val_fraction)
    rng = np.random.default_rng(seed)
    val_parts = []
    for c, n_val in zip(classes, counts, strict=True):
        idx = np.flatnonzero(y == c)
        if n_val > 0:
            val_parts.append(rng.permutation(idx)[:n_val])
    val = np.sort(np.concatenate(val_parts)) if val_parts else np.empty(0, dtype=np.int64)
    if val.size == 0:
        raise ProbeInputError(empty_validation_reason(y.size, val_fraction))
    mask = np.ones(y.size, dtype=bool)
    mask[val] = False
    return np.flatnonzero(mask), val
