"""Synthetic two-view embeddings with class structure, for demos and tests.

Instance i of class c gets a latent x_i = mu_c + s * e_i and two views
z_k,i = x_i + t * e'_k,i (Gaussian e), so positives are close, same-class
negatives closer than different-class ones, and everything is seeded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from cl_diag.errors import UserError
from cl_diag.io.atomic import atomic_write
from cl_diag.options import MAX_SYNTH_NUMBERS, SYNTH, check_values

#: the most numbers (n x d) one synthetic view may hold (declared with synth's options)
MAX_NUMBERS = MAX_SYNTH_NUMBERS


def make_synthetic_pairs(
    n: int = 2000,
    d: int = 64,
    classes: int = 10,
    spread: float = 0.6,
    view_noise: float = 0.3,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    values = check_values(
        dict(n=n, d=d, classes=classes, spread=spread, view_noise=view_noise, seed=seed), SYNTH
    )
    n, d, classes, spread, view_noise, seed = (
        values[k] for k in ("n", "d", "classes", "spread", "view_noise", "seed")
    )
    if classes > n:
        raise UserError(
            f"--classes {classes} is more than the --n {n} instances; some classes would be "
            "empty. Use --classes <= --n."
        )
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((classes, d)) / np.sqrt(d)
    labels = np.arange(n) % classes
    rng.shuffle(labels)
    latent = centres[labels] + spread * rng.standard_normal((n, d)) / np.sqrt(d)
    z1 = latent + view_noise * rng.standard_normal((n, d)) / np.sqrt(d)
    z2 = latent + view_noise * rng.standard_normal((n, d)) / np.sqrt(d)
    return {
        "z1": z1.astype(np.float32),
        "z2": z2.astype(np.float32),
        "labels": labels.astype(np.int64),
    }


def check_npz_target(path: Path, *, overwrite: bool) -> None:
    """UserError unless ``path`` names a ``.npz`` file that may be written (``overwrite`` to
    replace an existing one)."""
    path = Path(path)
    if path.suffix != ".npz":
        raise UserError(f"{path}: the output must end in .npz.")
    if path.is_dir():
        raise UserError(f"{path} is a folder; give a file name ending in .npz.")
    if (path.exists() or path.is_symlink()) and not overwrite:
        raise UserError(
            f"{path} already exists; pass --overwrite to replace it, or give another file name."
        )


def save_npz_atomically(
    path: Path, arrays: dict[str, np.ndarray], *, overwrite: bool = True
) -> None:
    """Write ``arrays`` to the ``.npz`` file ``path`` atomically (``overwrite=False``: refuse
    an existing file)."""
    path = Path(path)
    check_npz_target(path, overwrite=overwrite)
    parent = path.parent if str(path.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        # typed Any: numpy's stub would match the arrays against savez's allow_pickle flag
        named: dict[str, Any] = dict(arrays)
        atomic_write(path, lambda stream: np.savez(stream, **named))
    except OSError as exc:
        raise UserError(
            f"Cannot write {path}: {exc.strerror or exc}. Choose a writable folder."
        ) from None
