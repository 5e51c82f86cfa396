"""Self-describing training checkpoints: atomic writes, weights-only loads.

A checkpoint is one dict (``FORMAT``, version ``FORMAT_VERSION``) holding only types that
``torch.load(weights_only=True)`` accepts -- tensors, dicts, lists, str, int, float, bool,
None -- so loading a file never unpickles arbitrary objects::

    format, format_version      "cl-diag/checkpoint", 1
    config                      the full TrainConfig as a dict (auto values resolved)
    dataset, n_train, split     what the model was trained on; split says which images
                                are train and test (digits: the index tensors)
    backbone, projector         state dicts, separately
    optimizer, scheduler, scaler  optimiser state dict; {"step", "total_steps", ...}; GradScaler
                                state or None
    epoch, step                 completed epochs and optimiser steps
    complete                    True once the run reached its last step
    rng                         torch, cuda, numpy, python and DataLoader-generator states
    metrics                     one dict per completed epoch (what metrics.csv shows)
    versions                    cl-diag, torch, torchvision, numpy, python
    embeddings                  toy dataset only: {"z1": (n, d), "z2": (n, d)}, the learned vectors

:func:`save_checkpoint` writes through :func:`cl_diag.io.atomic.atomic_write` (a temporary
file in the same folder, fsynced and renamed over the target), so a crash (even SIGKILL)
leaves either the old or the new file, never a torn one. :func:`load_checkpoint` reads
through the one safe loader, :func:`cl_diag.io.checkpoints.safe_torch_load`, and turns every
failure into a ``UserError``.
"""

from __future__ import annotations

import os
import platform
import random
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cl_diag.io.atomic import atomic_write
from cl_diag.io.checkpoints import safe_torch_load

# The format's reading side (marker, version, check) is models.checkpoints'; FORMAT and
# FORMAT_VERSION are re-exported here because the tests import them from this module.
from cl_diag.models.checkpoints import FORMAT, FORMAT_VERSION, check_checkpoint

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "capture_rng_state",
    "check_plain_types",
    "library_versions",
    "load_checkpoint",
    "restore_rng_state",
    "save_checkpoint",
]

_PLAIN = (str, int, float, bool, type(None))


def check_plain_types(obj: Any, where: str = "checkpoint") -> None:
    """Raise ``TypeError`` naming the first value a weights-only load would refuse."""
    # Exact types: a str subclass such as torch.__version__ (TorchVersion) would be pickled
    # as its class and refused by the weights-only unpickler.
    if isinstance(obj, torch.Tensor) or type(obj) in _PLAIN:
        return
    if type(obj) in (dict, OrderedDict):  # state dicts are OrderedDicts (allowed too)
        for k, v in obj.items():
            if not isinstance(k, (str, int)):
                raise TypeError(f"{where}: key {k!r} is a {type(k).__name__}, not str/int")
            check_plain_types(v, f"{where}[{k!r}]")
        return
    if type(obj) in (list, tuple):
        for i, v in enumerate(obj):
            check_plain_types(v, f"{where}[{i}]")
        return
    raise TypeError(
        f"{where} is a {type(obj).__name__}; checkpoints hold only tensors and plain values"
    )


def save_checkpoint(path: str | os.PathLike, checkpoint: dict[str, Any]) -> None:
    """Atomically write ``checkpoint`` (which must hold only weights-only types)."""
    check_plain_types(checkpoint)
    atomic_write(path, lambda f: torch.save(checkpoint, f))


#: What the user should do about a file that is not a readable cl-diag checkpoint.
_GIVE_LAST_PT = "Give the path of a cl-diag checkpoint (the last.pt that cl-diag train wrote)."


def load_checkpoint(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """Read a cl-diag checkpoint with ``torch.load(weights_only=True)``.

    Raises :class:`UserError` when the file is missing, unreadable, not a torch file,
    damaged, carries pickled code, is not a cl-diag checkpoint, or is from a newer format
    version (see :func:`cl_diag.io.checkpoints.safe_torch_load` and :func:`check_checkpoint`).
    """
    p = Path(path).expanduser()
    obj = safe_torch_load(
        p, what="cl-diag checkpoint", fix=_GIVE_LAST_PT, map_location=map_location
    )
    return check_checkpoint(obj, p)


# --------------------------------------------------------------------------- RNG states


def capture_rng_state(loader_generator: torch.Generator | None = None) -> dict[str, Any]:
    """Every RNG state as tensors and plain lists (weights-only loadable)."""
    np_state = np.random.get_state()
    # numpy's global RandomState is an MT19937, whose legacy state is this 5-tuple
    assert isinstance(np_state, tuple)
    py_version, py_internal, py_gauss = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": {
            "kind": str(np_state[0]),
            "keys": torch.from_numpy(np.asarray(np_state[1], dtype=np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "python": {"version": int(py_version), "state": list(py_internal), "gauss_next": py_gauss},
        "loader": None if loader_generator is None else loader_generator.get_state(),
    }


def restore_rng_state(
    state: dict[str, Any], loader_generator: torch.Generator | None = None
) -> None:
    """Inverse of :func:`capture_rng_state`."""
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    n = state["numpy"]
    np.random.set_state(
        (
            n["kind"],
            n["keys"].numpy().astype(np.uint32),
            n["pos"],
            n["has_gauss"],
            n["cached_gaussian"],
        )
    )
    p = state["python"]
    random.setstate((p["version"], tuple(p["state"]), p["gauss_next"]))
    if loader_generator is not None and state.get("loader") is not None:
        loader_generator.set_state(state["loader"])


def library_versions() -> dict[str, str]:
    import torchvision

    import cl_diag

    return {
        "cl_diag": str(cl_diag.__version__),
        "torch": str(torch.__version__),
        "torchvision": str(torchvision.__version__),
        "numpy": str(np.__version__),
        "python": platform.python_version(),
    }
