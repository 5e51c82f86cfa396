"""Shared machinery of the loss library: hyper-parameter declarations, input
validation, and the fp32 normalisation every loss starts from.

Every named loss is an instance of a :class:`Loss` subclass. Calling it,

    loss(z1, z2, labels=None, **hparams) -> scalar tensor,

1. rejects unknown hyper-parameters (``ValueError`` naming the accepted ones),
   fills in defaults and checks each value;
2. checks the inputs (2-D, same shape, batch of at least 2, labels length);
3. casts to float32, L2-normalises each row and runs the formula with autocast
   disabled, so a loss is computed in full fp32 even inside an AMP region;
4. returns the mean loss as a 0-dim float32 tensor.

Row i of ``z1`` and row i of ``z2`` are the two views of instance i (a
positive pair); every other pairing is a negative unless labels say otherwise
(only supcon, triplet and contrastive read labels).
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import torch
import torch.nn.functional as F

__all__ = ["HParam", "Loss", "normalise_pair", "check_inputs"]


class HParam(NamedTuple):
    """One hyper-parameter a loss accepts.

    ``kind`` is the Python type (float, int, bool, str); ``choices`` lists
    the allowed values of a string option; ``check`` returns an error
    fragment (e.g. ``"must be > 0"``) or None when the value is valid.
    """

    name: str
    default: Any
    kind: type
    help: str
    choices: tuple | None = None
    check: Callable[[Any], str | None] | None = None


def positive(x: float) -> str | None:
    return None if (math.isfinite(x) and x > 0) else "must be a finite number > 0"


def non_negative(x: float) -> str | None:
    return None if (math.isfinite(x) and x >= 0) else "must be a finite number >= 0"


def finite(x: float) -> str | None:
    return None if math.isfinite(x) else "must be a finite number"


def _coerce(hp: HParam, value: Any, loss_name: str) -> Any:
    """Accept the obvious spellings (an int for a float, a 0-dim tensor) and
    reject the rest with a message naming the loss and the option."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if hp.kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{loss_name}: {hp.name} must be True or False, got {value!r}")
    elif hp.kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{loss_name}: {hp.name} must be a number, got {value!r}")
        value = float(value)
    elif hp.kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{loss_name}: {hp.name} must be an integer, got {value!r}")
    elif hp.kind is str:
        if not isinstance(value, str):
            raise ValueError(f"{loss_name}: {hp.name} must be a string, got {value!r}")
    if hp.choices is not None and value not in hp.choices:
        raise ValueError(
            f"{loss_name}: {hp.name}={value!r} is not one of {', '.join(map(repr, hp.choices))}"
        )
    if hp.check is not None:
        problem = hp.check(value)
        if problem:
            raise ValueError(f"{loss_name}: {hp.name} {problem}, got {value!r}")
    return value


def check_inputs(
    z1: torch.Tensor, z2: torch.Tensor, labels: Any, loss_name: str
) -> torch.Tensor | None:
    """Validate the two views and labels; return labels as a 1-D int64 tensor
    on the embeddings' device (or None)."""
    for name, z in (("z1", z1), ("z2", z2)):
        if not isinstance(z, torch.Tensor):
            raise ValueError(f"{loss_name}: {name} must be a torch.Tensor, got {type(z).__name__}")
        if z.dim() != 2:
            raise ValueError(
                f"{loss_name}: {name} must be 2-D (batch, dim), got shape {tuple(z.shape)}"
            )
        if not (z.is_floating_point()):
            raise ValueError(f"{loss_name}: {name} must be a floating-point tensor, got {z.dtype}")
    if z1.shape != z2.shape:
        raise ValueError(
            f"{loss_name}: z1 and z2 must have the same shape (row i of each is a positive pair), "
            f"got {tuple(z1.shape)} and {tuple(z2.shape)}"
        )
    if z1.shape[0] < 2:
        raise ValueError(
            f"{loss_name}: a batch of {z1.shape[0]} has no negative pairs; use a batch of at least 2"
        )
    if z1.shape[1] < 1:
        raise ValueError(f"{loss_name}: embeddings have dimension 0")
    if labels is None:
        return None
    labels = torch.as_tensor(labels, device=z1.device)
    if labels.dim() != 1 or labels.shape[0] != z1.shape[0]:
        raise ValueError(
            f"{loss_name}: labels must be 1-D with one entry per row of z1 ({z1.shape[0]}), "
            f"got shape {tuple(labels.shape)}"
        )
    if labels.is_floating_point() or labels.is_complex():
        raise ValueError(f"{loss_name}: labels must be integers, got {labels.dtype}")
    return labels.long()


def normalise_pair(z1: torch.Tensor, z2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cast to fp32 and L2-normalise rows. Call with autocast disabled."""
    return F.normalize(z1.float(), dim=1), F.normalize(z2.float(), dim=1)


class Loss:
    """Base class of every named loss: validation, fp32, normalisation.

    Subclasses set ``name``, ``family`` ("info", "ind-add" or None),
    ``negatives`` ("cross", "within", "both" or "labels"), ``hyperparameters``
    and implement ``_compute(u, v, labels, **hp)`` on normalised fp32 rows.
    """

    name: str = "loss"
    family: str | None = None
    negatives: str = "both"
    uses_labels: bool = False
    hyperparameters: tuple[HParam, ...] = ()

    # (c1, c2) of the paper's framework; None outside it.
    def coefficients(self, **hparams) -> tuple[float, float] | None:
        self.resolve(**hparams)
        return None

    @property
    def c1(self) -> float | None:
        c = self.coefficients()
        return None if c is None else c[0]

    @property
    def c2(self) -> float | None:
        c = self.coefficients()
        return None if c is None else c[1]

    @property
    def defaults(self) -> dict[str, Any]:
        return {h.name: h.default for h in self.hyperparameters}

    @property
    def hyperparameter_names(self) -> tuple[str, ...]:
        return tuple(h.name for h in self.hyperparameters)

    def resolve(self, **hparams) -> dict[str, Any]:
        """Defaults overlaid with ``hparams``, each checked; ValueError on an
        unknown name or a bad value."""
        known = {h.name: h for h in self.hyperparameters}
        unknown = sorted(set(hparams) - set(known))
        if unknown:
            accepted = ", ".join(known) if known else "none"
            raise ValueError(
                f"{self.name} does not take {', '.join(unknown)}; "
                f"its hyper-parameters are: {accepted}"
            )
        out = {}
        for name, hp in known.items():
            out[name] = _coerce(hp, hparams.get(name, hp.default), self.name)
        return out

    def __call__(self, z1: torch.Tensor, z2: torch.Tensor, labels=None, **hparams) -> torch.Tensor:
        hp = self.resolve(**hparams)
        labels = check_inputs(z1, z2, labels, self.name)
        device_type = z1.device.type
        # fp32 regardless of an enclosing autocast region: similarities near
        # delta(n) and exp(s/t) at small t do not survive half precision.
        with torch.autocast(device_type=device_type, enabled=False):
            u, v = normalise_pair(z1, z2)
            return self._compute(u, v, labels, **hp)

    def _compute(self, u, v, labels, **hp) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def __repr__(self) -> str:
        hp = ", ".join(f"{h.name}={h.default!r}" for h in self.hyperparameters)
        return f"<loss {self.name}({hp}) family={self.family}>"


def instance_labels(labels: torch.Tensor | None, batch: int, device) -> torch.Tensor:
    """Labels if given, else the instance index (each pair its own class)."""
    if labels is None:
        return torch.arange(batch, device=device)
    return labels


def zero_like_graph(z: torch.Tensor) -> torch.Tensor:
    """A 0 that stays connected to the graph, so backward() works when no
    term is active (e.g. no semi-hard triplet in the batch)."""
    return (z * 0).sum()
