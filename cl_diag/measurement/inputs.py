"""Two views in, checked and L2-normalised once: the one input of pair statistics and geometry.

Every measurement of a layer works on u_i = z1_i / ||z1_i||, v_i = z2_i / ||z2_i|| (paper Sec.
3), each norm in float64 and the quotient rounded once to float32: :func:`normalise_views`
returns them as :class:`UnitViews`. A problem is a :class:`ViewsError` (a ValueError) whose
:meth:`~ViewsError.user_message` names the file or layer for a command-line user.

Example::

    >>> import numpy as np
    >>> from cl_diag.measurement.inputs import normalise_views
    >>> views = normalise_views(np.array([[3.0, 4.0], [0.0, 2.0]]), np.eye(2))
    >>> views.u.tolist()
    [[0.6000000238418579, 0.800000011920929], [0.0, 1.0]]
"""

from __future__ import annotations

import operator
from typing import NamedTuple, SupportsIndex, cast

import numpy as np
import torch

__all__ = ["UnitViews", "ViewsError", "check_int", "check_n_ref", "label_codes", "normalise_views"]

_INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
#: bad rows named in a message
_ROWS_SHOWN = 5
#: bytes of one float64 chunk of rows: normalising never makes a full float64 copy
_CHUNK_BYTES = 8 << 20


class UnitViews(NamedTuple):
    """Two views' L2-normalised float32 rows (row i of each = instance i), same shape
    (n, d) with n >= 2 and d >= 1, on one device. Made by :func:`normalise_views`; a tuple,
    so ``u, v = normalise_views(z1, z2)`` unpacks it."""

    u: torch.Tensor
    v: torch.Tensor

    @property
    def n(self) -> int:
        return int(self.u.shape[0])

    @property
    def d(self) -> int:
        return int(self.u.shape[1])


class ViewsError(ValueError):
    """Views that cannot be measured.

    ``problem`` is one of "dtype", "ndim", "shape", "too_few", "no_dims", "device",
    "non_finite", "zero_rows", "labels"; ``key`` the array at fault ("z1", "z2",
    "labels"); ``rows`` the first bad rows; ``shapes`` the shapes involved.
    """

    def __init__(
        self,
        message: str,
        problem: str,
        *,
        key: str | None = None,
        rows: tuple[int, ...] = (),
        shapes: tuple[tuple[int, ...], ...] = (),
    ):
        super().__init__(message)
        self.problem = problem
        self.key = key
        self.rows = rows
        self.shapes = shapes

    def user_message(self, where: str) -> str:
        """The problem and its fix for a user of the CLI, ``where`` naming the views' origin
        (a file, or a checkpoint's layer outputs)."""
        if self.problem == "shape":
            a, b = self.shapes
            return (
                f"z1 and z2 in {where} differ in shape: {a} vs {b}. "
                "Row i of each must be the two views of the same instance, "
                "with the same dimension d."
            )
        if self.problem == "too_few":
            n = self.shapes[0][0]
            return f"{where} has n = {n} instance(s); negative pairs need at least 2 rows."
        if self.problem == "no_dims":
            return f"{where} has d = 0: the embeddings have no dimensions."
        if self.problem == "non_finite":
            return (
                f"'{self.key}' in {where} contains NaN or Inf (first bad rows: {list(self.rows)}). "
                "Fix or drop those rows before analysing; a diverged encoder is the usual cause."
            )
        if self.problem == "zero_rows":
            return (
                f"'{self.key}' in {where} has all-zero rows (first: {list(self.rows)}); "
                "a zero vector has no direction, so its cosine similarity is undefined. "
                "Drop those rows."
            )
        if self.problem == "labels":
            got, wanted = self.shapes
            return (
                f"'labels' in {where} has shape {got}; it must hold one integer per row, "
                f"shape ({wanted[0]},)."
            )
        return f"The views in {where} cannot be measured: {self}"


def _to_tensor(z: object, name: str) -> torch.Tensor:
    if isinstance(z, torch.Tensor):
        t = z.detach()
        if not (t.is_floating_point() or t.dtype in _INT_DTYPES):
            raise ViewsError(
                f"{name} must hold real numbers (got dtype {t.dtype}); pass a float array.",
                "dtype",
                key=name,
            )
        return t
    try:
        arr = np.asarray(z)
    except (TypeError, ValueError) as exc:
        raise ViewsError(
            f"{name} must be a numeric array of shape (n, d); could not convert it ({exc}).",
            "dtype",
            key=name,
        ) from None
    if arr.dtype.kind not in "iuf":
        raise ViewsError(
            f"{name} must hold real numbers (got dtype {arr.dtype}); pass a float array.",
            "dtype",
            key=name,
        )
    return torch.from_numpy(np.ascontiguousarray(arr))


def _bad_rows(t: torch.Tensor, chunk: int) -> tuple[str, tuple[int, ...]] | None:
    """The first rows that are not finite, else the first all-zero rows, else None.

    Non-finite rows are looked for in the whole view before zero rows, so a view with both
    is reported for its NaN/Inf (the usual root cause: a diverged encoder)."""
    n = t.shape[0]
    for problem, test in (
        ("non_finite", lambda x: ~torch.isfinite(x).all(dim=1)),
        ("zero_rows", lambda x: (x == 0).all(dim=1)),
    ):
        rows: list[int] = []
        for r0 in range(0, n, chunk):
            found = torch.nonzero(test(t[r0 : r0 + chunk])).flatten()[: _ROWS_SHOWN - len(rows)]
            rows += [r0 + int(i) for i in found]
            if len(rows) >= _ROWS_SHOWN:
                break
        if rows:
            return problem, tuple(rows)
    return None


def _normalise(t: torch.Tensor, name: str, chunk: int) -> torch.Tensor:
    n, d = t.shape
    unit = torch.empty(n, d, dtype=torch.float32, device=t.device)
    for r0 in range(0, n, chunk):
        t64 = t[r0 : r0 + chunk].to(torch.float64)
        finite = torch.isfinite(t64).all(dim=1)
        norms = torch.linalg.vector_norm(t64, dim=1, keepdim=True)
        if not bool(finite.all()) or bool((norms == 0).any()):
            # only now is the whole view searched, for the rows to name
            problem, rows = _bad_rows(t, chunk) or ("non_finite", (r0,))
            if problem == "non_finite":
                message = (
                    f"{name} contains NaN or Inf (first in row {rows[0]}); "
                    "remove or fix those rows."
                )
            else:
                message = (
                    f"{name} row {rows[0]} is all zeros, so it has no direction and no "
                    "cosine similarity; remove that instance from both views."
                )
            raise ViewsError(message, problem, key=name, rows=rows)
        unit[r0 : r0 + chunk] = t64 / norms
    return unit


def normalise_views(z1: object, z2: object) -> UnitViews:
    """Check two views and return their L2-normalised rows as float32 tensors.

    Each row is divided by its Euclidean norm computed in float64 and the result rounded
    once to float32, so every normalised entry is the correctly rounded value (up to one
    float64 rounding). The tensors stay on the inputs' device.

    Raises :class:`ViewsError` (a ValueError) for: not real numbers, not 2-D, shapes that
    differ, n < 2, d = 0, different devices, NaN/Inf, an all-zero row.
    """
    a, b = _to_tensor(z1, "z1"), _to_tensor(z2, "z2")
    for name, t in (("z1", a), ("z2", b)):
        if t.dim() != 2:
            raise ViewsError(
                f"{name} must be a 2-D array (n, d) of embeddings; got shape {tuple(t.shape)}.",
                "ndim",
                key=name,
                shapes=(tuple(t.shape),),
            )
    if a.shape != b.shape:
        raise ViewsError(
            "z1 and z2 must have the same shape (row i of each is instance i); "
            f"got {tuple(a.shape)} and {tuple(b.shape)}.",
            "shape",
            shapes=(tuple(a.shape), tuple(b.shape)),
        )
    n, d = a.shape
    if n < 2:
        raise ViewsError(
            f"need at least 2 instances (rows) to form negative pairs; got n = {n}.",
            "too_few",
            shapes=((n, d),),
        )
    if d == 0:
        raise ViewsError(
            "the embeddings have dimension d = 0; each row must hold at least one number.",
            "no_dims",
            shapes=((n, d),),
        )
    if a.device != b.device:
        raise ViewsError(
            f"z1 and z2 are on different devices ({a.device} and {b.device}); "
            "move both to one device.",
            "device",
        )
    chunk = max(1, _CHUNK_BYTES // (8 * d))  # rows per float64 chunk
    return UnitViews(_normalise(a, "z1", chunk), _normalise(b, "z2", chunk))


def label_codes(labels: object, n: int, device: torch.device | str) -> torch.Tensor | None:
    """Class labels as int64 codes 0..C-1 on ``device`` (any 1-D array of n comparable
    values; None stays None). Raises :class:`ViewsError` for a wrong shape or non-finite
    or non-label values."""
    if labels is None:
        return None
    arr = labels.detach().cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ViewsError(
            f"labels must be a 1-D array of n = {n} class labels; got shape {arr.shape}.",
            "labels",
            key="labels",
            shapes=(tuple(arr.shape), (n,)),
        )
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise ViewsError(
            "labels contain NaN or Inf; give one class label per instance.", "labels", key="labels"
        )
    if arr.dtype.kind not in "biuf" and arr.dtype.kind not in "USO":
        raise ViewsError(
            f"labels must be integers (or strings); got dtype {arr.dtype}.", "labels", key="labels"
        )
    _, codes = np.unique(arr, return_inverse=True)
    return torch.as_tensor(codes.reshape(-1).astype(np.int64), device=device)


def check_int(value: object, name: str, least: int, most: int | None = None) -> int:
    """``value`` as an int in [least, most]; ValueError naming ``name`` otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    try:
        # any object: operator.index raises TypeError for anything that is not an integer
        value = operator.index(cast(SupportsIndex, value))
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}.") from None
    if value < least or (most is not None and value > most):
        bound = f">= {least}" if most is None else f"in [{least}, {most}]"
        raise ValueError(f"{name} must be {bound}, got {value}.")
    return value


def check_n_ref(n_ref: object, n: int) -> int:
    """The instances the threshold -1/(n_ref - 1) refers to: ``n_ref``, or n when None."""
    if n_ref is None:
        return n
    if isinstance(n_ref, bool):
        raise ValueError(f"n_ref must be an integer >= 2, got {n_ref!r}.")
    try:
        n_ref = operator.index(cast(SupportsIndex, n_ref))  # TypeError for a non-integer
    except TypeError:
        raise ValueError(
            f"n_ref must be an integer >= 2 (the number of training instances), got {n_ref!r}."
        ) from None
    if n_ref < 2:
        raise ValueError(
            f"n_ref = {n_ref} is too small: the threshold -1/(n_ref - 1) needs n_ref >= 2."
        )
    return n_ref
