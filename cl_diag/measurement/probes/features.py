"""Validation of probe inputs, shared by every probe of the package: the features and labels.

Features are (n, d) real, finite matrices (``torch.Tensor`` or ``numpy.ndarray``)
returned as CPU float tensors; labels are 1-D integer vectors returned as int64
numpy arrays.  Class labels are names: probes encode them to 0..C-1 by rank.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from cl_diag.errors import UserError


class ProbeInputError(UserError, ValueError):
    """Inputs a probe cannot run on: a single class, too few samples to split, no rows.

    A :class:`~cl_diag.errors.UserError` (the data, not the code, is at fault: the CLI
    prints the message and exits 2), and a ``ValueError`` as well, which the probes raised
    for the same inputs before this class existed.
    :func:`~cl_diag.measurement.probes.checks.check_probe_inputs` returns the same message
    without raising, so a caller can skip a probe before encoding anything.
    """


_NORM_EPS = 1e-12


def _to_numpy(a: Any, name: str) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        return a.detach().cpu().numpy()
    if isinstance(a, np.ndarray):
        return a
    raise ValueError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(a).__name__}")


def _features(x: Any, name: str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Validate a (n, d) real feature matrix and return it as a CPU torch tensor."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
    elif isinstance(x, np.ndarray):
        if x.dtype == object or not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
            raise ValueError(f"{name} must hold numbers, got dtype {x.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(x))
    else:
        raise ValueError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(x).__name__}")
    if t.is_complex():
        raise ValueError(f"{name} must be real, got dtype {t.dtype}")
    if t.dim() != 2:
        raise ValueError(f"{name} must be 2-D (n, d), got shape {tuple(t.shape)}")
    if t.shape[0] < 1 or t.shape[1] < 1:
        raise ProbeInputError(
            f"{name} is empty (shape {tuple(t.shape)}); pass at least one row and one column"
        )
    t = t.to(device="cpu", dtype=dtype)
    if not torch.isfinite(t).all():
        bad = int((~torch.isfinite(t)).any(dim=1).nonzero()[0, 0])
        raise ValueError(
            f"{name} contains NaN or infinite values (first in row {bad}); clean the features first"
        )
    return t


def _labels(y: Any, n: int, name: str, xname: str) -> np.ndarray:
    """Validate a 1-D integer label vector of length n and return it as int64 numpy."""
    a = _to_numpy(y, name)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if a.shape[0] != n:
        raise ValueError(
            f"{name} has {a.shape[0]} labels but {xname} has {n} rows; they must match"
        )
    if not (np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_):
        raise ValueError(f"{name} must hold integer class labels, got dtype {a.dtype}")
    return a.astype(np.int64, copy=False)


def _check_same_dim(a: torch.Tensor, b: torch.Tensor, an: str, bn: str) -> None:
    if a.shape[1] != b.shape[1]:
        raise ValueError(
            f"{an} has {a.shape[1]} columns but {bn} has {b.shape[1]}; features must have the "
            "same dimension"
        )


def _classes(y: np.ndarray) -> np.ndarray:
    """The sorted class labels of y; the probes have checked there are two or more
    (``checks.require_probe_inputs``)."""
    return np.unique(y)


def _encode(y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Map labels to 0..C-1 by their rank in ``classes``; labels absent from ``classes`` become
    -1."""
    pos = np.searchsorted(classes, y)
    pos_c = np.minimum(pos, classes.size - 1)
    return np.where(classes[pos_c] == y, pos_c, -1).astype(np.int64)


def _normalise(x: torch.Tensor) -> torch.Tensor:
    return F.normalize(x, p=2.0, dim=1, eps=_NORM_EPS)


def _positive_int(v: Any, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return int(v)
