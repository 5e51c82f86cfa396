"""Self-describing training checkpoints: atomic writes, weights-only loads.

A checkpoint is one dict (``FORMAT``, version ``FORMAT_VERSION``) holding only types that
``torch.load(weights_only=True)`` accepts -- tensors, dicts, lists, str, int, float, bool,
None -- so loading a file never unpickles arbitrary objects::

    format, format_version      "cl-diag/checkpoint", 1
    config                      the full TrainConfig as a dict (auto values resolved)
    dataset, n_train, split     what the model was trained on; split says which images
                                are train and test (digits: the index tensors)
    backbone, projector         state dicts, separately
    optimizer, scheduler, scaler  optimiser state dict; {"step", "total_steps", ...}; GradScaler state or None
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

from cl_diag.errors import UserError
from cl_diag.io.atomic import atomic_write
from cl_diag.io.checkpoints import safe_torch_load

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "capture_rng_state",
    "check_checkpoint",
    "check_plain_types",
    "check_training_state",
    "library_versions",
    "load_checkpoint",
    "restore_rng_state",
    "save_checkpoint",
]

FORMAT = "cl-diag/checkpoint"
FORMAT_VERSION = 1

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
    """Read a cl-diag checkpoint with ``torch.load(weights_only=True)``.

    Raises :class:`UserError` when the file is missing, unreadable, not a torch file,
    damaged, carries pickled code, is not a cl-diag checkpoint, is from a newer format
    version, or holds a value of the wrong type or size (see
    :func:`cl_diag.io.checkpoints.safe_torch_load` and :func:`check_checkpoint`).
    ``for_resume``: also check the training state a resumed run restores
    (:func:`check_training_state`).
    """
    p = Path(path).expanduser()
    obj = safe_torch_load(
        p, what="cl-diag checkpoint", fix=_GIVE_LAST_PT, map_location=map_location
    )
    checkpoint = check_checkpoint(obj, p)
    if for_resume:
        check_training_state(checkpoint, p)
    return checkpoint


class _Damaged(Exception):
    """One key of a checkpoint that does not hold what cl-diag writes there."""

    def __init__(self, key: str, problem: str):
        super().__init__(f"{key} {problem}")
        self.key, self.problem = key, problem


def _damaged(path: Path, error: _Damaged) -> UserError:
    return UserError(
        f"{path} is a damaged cl-diag checkpoint: '{error.key}' {error.problem}. Give the "
        "last.pt that cl-diag train wrote (an intact copy), or train the run again."
    )


def _whole(value: Any, key: str, least: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Damaged(key, f"must be a whole number, not {value!r}")
    if value < least:
        raise _Damaged(key, f"must be at least {least}, not {value}")
    return value


def _mapping(value: Any, key: str) -> dict:
    if not isinstance(value, dict) or not all(isinstance(k, (str, int)) for k in value):
        raise _Damaged(key, f"must be a dict, not {type(value).__name__}")
    return value


def _state_dict(value: Any, key: str) -> None:
    for name, tensor in _mapping(value, key).items():
        if not isinstance(tensor, torch.Tensor):
            raise _Damaged(f"{key}.{name}", f"must be a tensor, not {type(tensor).__name__}")
        if tensor.layout != torch.strided or tensor.is_meta or tensor.is_quantized:
            raise _Damaged(f"{key}.{name}", "must be a dense tensor")


def _views(value: Any) -> None:
    emb = _mapping(value, "embeddings")
    shapes = []
    for name in ("z1", "z2"):
        t = emb.get(name)
        key = f"embeddings.{name}"
        if not isinstance(t, torch.Tensor):
            raise _Damaged(key, f"must be a tensor, not {type(t).__name__}")
        if t.layout != torch.strided or t.is_meta or not t.is_floating_point() or t.dim() != 2:
            raise _Damaged(key, "must be a dense 2-D float tensor (n x d)")
        shapes.append(tuple(t.shape))
    if shapes[0] != shapes[1]:
        raise _Damaged("embeddings", f"holds views of different shapes {shapes[0]} and {shapes[1]}")


#: config keys that decide the model and the data a checkpoint is rebuilt with, and their types
_MODEL_CONFIG = {"dataset": str, "arch": str, "data_root": str, "val_root": str}


def _model_config(config: dict) -> None:
    from cl_diag.models.build import SIZE_LIMITS, size_problem, toy_size_problem

    for key, kind in _MODEL_CONFIG.items():
        value = config.get(key)
        if value is not None and not isinstance(value, kind):
            raise _Damaged(f"config.{key}", f"must be a {kind.__name__}, not {value!r}")
    for key in SIZE_LIMITS:
        least = 0 if key == "conv1_padding" else 1
        problem = size_problem(key, config.get(key), least=least)
        if problem is not None:
            raise _Damaged(f"config.{key}", problem)
    if config.get("dataset") == "toy":
        problem = toy_size_problem(config.get("num_samples"), config.get("dim"))
        if problem is not None:
            raise _Damaged("config", problem)


def check_checkpoint(obj: Any, path: str | os.PathLike) -> dict[str, Any]:
    """``obj`` (read from ``path``) if it is a cl-diag checkpoint this version can read;
    UserError otherwise. For a payload that is already loaded, so the file is read once.

    Every key that describes the model and its measuring is checked here, once, for its type
    and size: ``config`` (a dict; its model and data keys typed, its sizes within
    :data:`cl_diag.models.build.SIZE_LIMITS`), ``n_train``, ``epoch``, ``step``, ``complete``,
    ``dataset``, ``backbone`` and ``projector`` (dicts of dense tensors), ``split`` and, for
    the toy dataset, ``embeddings``. The message names the first key at fault."""
    p = Path(path)
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise UserError(
            f"{p} is a torch file but not a cl-diag checkpoint (no format marker {FORMAT!r}). "
            f"Give the last.pt that cl-diag train wrote."
        )
    version = obj.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise UserError(
            f"{p} has checkpoint format version {version!r}; this cl-diag reads up to "
            f"{FORMAT_VERSION}. Upgrade cl-diag to read it."
        )
    missing = [k for k in ("config", "backbone", "projector", "epoch", "step") if k not in obj]
    if missing:
        raise UserError(f"{p} is a damaged cl-diag checkpoint: it lacks {', '.join(missing)}.")
    try:
        _model_config(_mapping(obj["config"], "config"))
        if obj.get("n_train") is not None:
            _whole(obj["n_train"], "n_train", least=2)
        _whole(obj["epoch"], "epoch")
        _whole(obj["step"], "step")
        if obj.get("complete") is not None and not isinstance(obj["complete"], bool):
            raise _Damaged("complete", f"must be true or false, not {obj['complete']!r}")
        if obj.get("dataset") is not None and not isinstance(obj["dataset"], str):
            raise _Damaged("dataset", f"must be a string, not {obj['dataset']!r}")
        _state_dict(obj["backbone"], "backbone")
        _state_dict(obj["projector"], "projector")
        split = obj.get("split")
        if split is not None:
            _mapping(split, "split")
            for key in ("train_indices", "test_indices"):
                if key in split and not isinstance(split[key], torch.Tensor):
                    raise _Damaged(f"split.{key}", "must be a tensor of indices")
        toy = (obj.get("dataset") or obj["config"].get("dataset")) == "toy"
        if toy or obj.get("embeddings") is not None:
            _views(obj.get("embeddings"))
    except _Damaged as error:
        raise _damaged(p, error) from None
    return obj


def check_training_state(ck: dict[str, Any], path: str | os.PathLike) -> None:
    """UserError unless ``ck`` holds the training state a resumed run restores, as cl-diag
    writes it: ``optimizer`` (its ``state`` and one parameter group), ``scaler`` (None or a
    dict), ``rng`` (the torch, numpy and python generator states) and ``metrics`` (one dict of
    numbers per row)."""
    try:
        optimizer = _mapping(ck.get("optimizer"), "optimizer")
        _mapping(optimizer.get("state"), "optimizer.state")
        groups = optimizer.get("param_groups")
        if not isinstance(groups, list) or len(groups) != 1 or not isinstance(groups[0], dict):
            raise _Damaged(
                "optimizer.param_groups", "must hold the one parameter group cl-diag writes"
            )
        if not isinstance(groups[0].get("params"), list):
            raise _Damaged("optimizer.param_groups", "lacks its list of parameters")
        if ck.get("scaler") is not None:
            _mapping(ck["scaler"], "scaler")
        rng = _mapping(ck.get("rng"), "rng")
        if not isinstance(rng.get("torch"), torch.Tensor) or rng["torch"].dtype != torch.uint8:
            raise _Damaged("rng.torch", "must be the byte tensor of torch's generator state")
        numpy_state = _mapping(rng.get("numpy"), "rng.numpy")
        if not isinstance(numpy_state.get("kind"), str) or not isinstance(
            numpy_state.get("keys"), torch.Tensor
        ):
            raise _Damaged("rng.numpy", "must hold numpy's generator kind and keys")
        for key in ("pos", "has_gauss"):
            _whole(numpy_state.get(key), f"rng.numpy.{key}")
        if not isinstance(numpy_state.get("cached_gaussian"), (int, float)):
            raise _Damaged("rng.numpy.cached_gaussian", "must be a number")
        python_state = _mapping(rng.get("python"), "rng.python")
        _whole(python_state.get("version"), "rng.python.version")
        state = python_state.get("state")
        if not isinstance(state, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in state
        ):
            raise _Damaged("rng.python.state", "must be a list of whole numbers")
        loader = rng.get("loader")
        if loader is not None and not isinstance(loader, torch.Tensor):
            raise _Damaged("rng.loader", "must be a generator state tensor")
        metrics = ck.get("metrics", [])
        if not isinstance(metrics, list):
            raise _Damaged("metrics", f"must be a list of rows, not {type(metrics).__name__}")
        for i, row in enumerate(metrics):
            for name, value in _mapping(row, f"metrics[{i}]").items():
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise _Damaged(f"metrics[{i}].{name}", f"must be a number, not {value!r}")
    except _Damaged as error:
        raise _damaged(Path(path), error) from None


# --------------------------------------------------------------------------- RNG states


def capture_rng_state(loader_generator: torch.Generator | None = None) -> dict[str, Any]:
    """Every RNG state as tensors and plain lists (weights-only loadable)."""
    np_state = np.random.get_state()
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
