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
from cl_diag.models.checkpoints import (
    FORMAT,
    FORMAT_VERSION,
    Damaged,
    check_checkpoint,
    damaged,
    mapping_key,
    whole_key,
)

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "capture_rng_state",
    "check_plain_types",
    "check_training_state",
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


def load_checkpoint(
    path: str | os.PathLike, map_location: Any = "cpu", *, for_resume: bool = False
) -> dict[str, Any]:
    """Read a cl-diag checkpoint with ``torch.load(weights_only=True)``; a UserError for a file
    that is missing, unreadable, damaged, pickled code, no cl-diag checkpoint, of a newer format or
    holding a value of the wrong type or size. ``for_resume``: also check the training state a
    resumed run restores (:func:`check_training_state`).
    """
    p = Path(path).expanduser()
    obj = safe_torch_load(
        p, what="cl-diag checkpoint", fix=_GIVE_LAST_PT, map_location=map_location
    )
    checkpoint = check_checkpoint(obj, p)
    if for_resume:
        check_training_state(checkpoint, p)
    return checkpoint


def check_training_state(ck: dict[str, Any], path: str | os.PathLike) -> None:
    """UserError unless ``ck`` holds the training state a resumed run restores, as cl-diag
    writes it: ``optimizer`` (its ``state`` and one parameter group), ``scaler`` (None or a
    dict) and ``rng`` (the torch, numpy and python generator states); ``metrics`` is checked
    by :func:`check_checkpoint`, which the analysis runs too."""
    try:
        optimizer = mapping_key(ck.get("optimizer"), "optimizer")
        mapping_key(optimizer.get("state"), "optimizer.state")
        groups = optimizer.get("param_groups")
        if not isinstance(groups, list) or len(groups) != 1 or not isinstance(groups[0], dict):
            raise Damaged(
                "optimizer.param_groups", "must hold the one parameter group cl-diag writes"
            )
        if not isinstance(groups[0].get("params"), list):
            raise Damaged("optimizer.param_groups", "lacks its list of parameters")
        if ck.get("scaler") is not None:
            mapping_key(ck["scaler"], "scaler")
        rng = mapping_key(ck.get("rng"), "rng")
        if not isinstance(rng.get("torch"), torch.Tensor) or rng["torch"].dtype != torch.uint8:
            raise Damaged("rng.torch", "must be the byte tensor of torch's generator state")
        numpy_state = mapping_key(rng.get("numpy"), "rng.numpy")
        if not isinstance(numpy_state.get("kind"), str) or not isinstance(
            numpy_state.get("keys"), torch.Tensor
        ):
            raise Damaged("rng.numpy", "must hold numpy's generator kind and keys")
        for key in ("pos", "has_gauss"):
            whole_key(numpy_state.get(key), f"rng.numpy.{key}")
        if not isinstance(numpy_state.get("cached_gaussian"), (int, float)):
            raise Damaged("rng.numpy.cached_gaussian", "must be a number")
        python_state = mapping_key(rng.get("python"), "rng.python")
        whole_key(python_state.get("version"), "rng.python.version")
        state = python_state.get("state")
        if not isinstance(state, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in state
        ):
            raise Damaged("rng.python.state", "must be a list of whole numbers")
        loader = rng.get("loader")
        if loader is not None and not isinstance(loader, torch.Tensor):
            raise Damaged("rng.loader", "must be a generator state tensor")
    except Damaged as error:
        raise damaged(Path(path), error) from None


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

    from cl_diag.version import __version__

    return {
        "cl_diag": str(__version__),
        "torch": str(torch.__version__),
        "torchvision": str(torchvision.__version__),
        "numpy": str(np.__version__),
        "python": platform.python_version(),
    }
