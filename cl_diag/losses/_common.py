"""Shared machinery of the loss library: hyper-parameter declarations, the structured option
error, input validation, and the :class:`Loss` base module.

Every named loss is a :class:`Loss` (a ``torch.nn.Module``) whose hyper-parameters are checked
**once**, when it is built (or re-built with :meth:`Loss.configure`)::

    loss = SimCLRLoss(temperature=0.2)   # checked here
    loss(z1, z2, labels=None)            # no option checks in the hot path

Hyper-parameters passed to a call (``LOSSES["simclr"](z1, z2, temperature=0.2)``) are checked
then and hold for that call only. A call checks the inputs, casts to float32, L2-normalises
each row and runs the formula with autocast off (full fp32 even inside AMP), and returns the
mean loss as a 0-dim float32 tensor. Row i of ``z1`` and ``z2`` are the two views of instance
i; every other pairing is a negative unless labels say otherwise (:mod:`.pair_masks`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from cl_diag.errors import UserError
from cl_diag.options import MULTI_VIEW_LOSSES, QUEUE_LOSSES

__all__ = [
    "MULTI_VIEW_LOSSES",
    "QUEUE_LOSSES",
    "HParam",
    "Loss",
    "LossOptionError",
    "check_inputs",
    "multi_positive",
    "normalise_pair",
]

_L = TypeVar("_L", bound="Loss")

# MULTI_VIEW_LOSSES (``multi_view``) and QUEUE_LOSSES (``takes_queue``) are named where the
# options --views and --queue are declared (cl_diag.options), so that the command line checks
# them before torch loads; a test checks them against the losses' own flags.


def multi_positive(
    z: torch.Tensor, positive: torch.Tensor, candidates: torch.Tensor, temperature: float
) -> torch.Tensor:
    """Mean over the rows a of z of -(1/|P(a)|) sum_{p in P(a)} log(e^{s_ap/t} / sum_{k in A(a)}
    e^{s_ak/t}), s = z z^T, with P(a) = ``positive[a]`` (a subset of A(a) = ``candidates[a]``).

    SupCon's L_out form (Khosla et al. 2020, Eq. 2): the multi-positive InfoNCE over stacked
    views. Every row must have a positive."""
    logits = (z @ z.T / temperature).masked_fill(~candidates, float("-inf"))
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    # where() rather than a product: log_prob is -inf outside the candidates.
    pos_sum = torch.where(positive, log_prob, torch.zeros_like(log_prob)).sum(dim=1)
    return (-pos_sum / positive.sum(dim=1)).mean()


class LossOptionError(UserError, ValueError):
    """A loss was given a hyper-parameter it does not take, or a bad value.

    ``option`` names the offending hyper-parameter (e.g. ``"temperature"``) so
    a caller can point at its own spelling of it (``--temperature``) without
    parsing the message; ``loss`` names the loss (None for a family's
    structural argument such as ``c1`` before it has a name). It is a
    :class:`~cl_diag.errors.UserError` (the CLI prints it and exits 2) and a
    ``ValueError`` (what the library raised before it had a type of its own).
    """

    def __init__(self, message: str, option: str, loss: str | None = None):
        # All three in args, so the error pickles (sweep --parallel workers) intact.
        super().__init__(message, option, loss)
        self.message, self.option, self.loss = message, option, loss

    def __str__(self) -> str:
        return self.message


class HParam(NamedTuple):
    """One hyper-parameter a loss accepts.

    ``kind`` is the Python type (float, int, bool, str); ``choices`` lists
    the allowed values of a string option; ``check`` returns an error
    fragment (e.g. ``"must be > 0"``) or None when the value is valid.
    ``default`` is the value a call uses when it passes none: the library
    default on the class, the configured value on an instance.
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

    def bad(message: str) -> LossOptionError:
        return LossOptionError(f"{loss_name}: {hp.name} {message}", option=hp.name, loss=loss_name)

    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if hp.kind is bool:
        if not isinstance(value, bool):
            raise bad(f"must be True or False, got {value!r}")
    elif hp.kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad(f"must be a number, got {value!r}")
        value = float(value)
    elif hp.kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad(f"must be an integer, got {value!r}")
    elif hp.kind is str and not isinstance(value, str):
        raise bad(f"must be a string, got {value!r}")
    if hp.choices is not None and value not in hp.choices:
        raise LossOptionError(
            f"{loss_name}: {hp.name}={value!r} is not one of {', '.join(map(repr, hp.choices))}",
            option=hp.name,
            loss=loss_name,
        )
    if hp.check is not None:
        problem = hp.check(value)
        if problem:
            raise bad(f"{problem}, got {value!r}")
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
            f"{loss_name}: a batch of {z1.shape[0]} has no negative pairs; use a batch of at "
            "least 2"
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


class UnitBatch(NamedTuple):
    """A batch as the losses compute on it (:meth:`Loss.prepare`): the two views ``u``, ``v``
    and any further views L2-normalised in fp32, the labels as int64 (or None) and the queued
    keys of view 1 and view 2, normalised (or None)."""

    u: torch.Tensor
    v: torch.Tensor
    labels: torch.Tensor | None
    extra_views: list[torch.Tensor]
    keys: tuple[torch.Tensor, torch.Tensor] | None


class Loss(nn.Module):
    """Base module of every named loss: options checked once, fp32, normalisation.

    Subclasses set ``name``, ``family`` ("info", "ind-add" or None),
    ``negatives`` ("cross", "within", "both" or "labels") and the class-level
    ``hyperparameters`` (with the library defaults), call
    :meth:`_configure` with the given values at the end of ``__init__``, and
    implement ``_compute(u, v, labels, **hp)`` on normalised fp32 rows.

    On an instance, ``hyperparameters`` carries the configured values as
    defaults, :attr:`hparams` (alias :attr:`defaults`) is the dict of them,
    and :meth:`resolve` overlays a call's overrides on them.
    """

    name: str = "loss"
    family: str | None = None
    negatives: str = "both"
    uses_labels: bool = False
    #: True when the loss takes views 3..V (``extra_views``, ``--views``): see MULTI_VIEW_LOSSES.
    multi_view: bool = False
    #: True when the loss takes queue negatives (``queue``, ``--queue``): see QUEUE_LOSSES.
    takes_queue: bool = False
    hyperparameters: tuple[HParam, ...] = ()

    def __init__(self) -> None:
        super().__init__()
        self._hp: dict[str, Any] = {}

    # ------------------------------------------------------------- options, checked once
    def _configure(self, **given: Any) -> None:
        """Check ``given`` against the class's declared hyper-parameters (the
        library default for any not given) and store them. The one place an
        instance's options are validated."""
        declared = type(self).hyperparameters
        self._reject_unknown(given, declared)
        hp = {h.name: _coerce(h, given.get(h.name, h.default), self.name) for h in declared}
        self._hp = hp
        self.hyperparameters = tuple(h._replace(default=hp[h.name]) for h in declared)

    def _reject_unknown(self, given: Mapping[str, Any], declared: tuple[HParam, ...]) -> None:
        names = [h.name for h in declared]
        unknown = sorted(set(given) - set(names))
        if unknown:
            accepted = ", ".join(names) if names else "none"
            raise LossOptionError(
                f"{self.name} does not take {', '.join(unknown)}; "
                f"its hyper-parameters are: {accepted}",
                option=unknown[0],
                loss=self.name,
            )

    def configure(self: _L, **hparams: Any) -> _L:
        """A new module of the same loss with ``hparams`` overlaid on this one's
        values, checked once here (the structure, e.g. (c1, c2) or phi/psi,
        and any learned parameters are copied)."""
        new = copy.deepcopy(self)
        new._configure(**{**self.hparams, **hparams})
        return new

    @property
    def hparams(self) -> dict[str, Any]:
        """The configured hyper-parameters: what a call that passes none uses."""
        return dict(self._hp)

    @property
    def defaults(self) -> dict[str, Any]:
        """Same as :attr:`hparams` (the name of the functional API)."""
        return self.hparams

    @property
    def hyperparameter_names(self) -> tuple[str, ...]:
        return tuple(h.name for h in self.hyperparameters)

    def resolve(self, **hparams: Any) -> dict[str, Any]:
        """This module's values overlaid with ``hparams``, each checked;
        :class:`LossOptionError` on an unknown name or a bad value."""
        self._reject_unknown(hparams, self.hyperparameters)
        out = dict(self._hp)
        for h in self.hyperparameters:  # declared order: the first bad option is reported
            if h.name in hparams:
                out[h.name] = _coerce(h, hparams[h.name], self.name)
        return out

    def _hparams_for_call(self, overrides: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments of ``_compute``: the stored dict when the call
        passes no overrides (no checks), else the checked overlay."""
        return self.resolve(**overrides) if overrides else self._hp

    # ------------------------------------------------------------- paper framework
    def _coefficients_for(self, hp: Mapping[str, Any]) -> tuple[float, float] | None:
        return None

    def coefficients(self, **hparams: Any) -> tuple[float, float] | None:
        """(c1, c2) of the paper's framework at these hyper-parameters; None
        outside it. Checks ``hparams`` like a call does."""
        return self._coefficients_for(self.resolve(**hparams) if hparams else self._hp)

    @property
    def c1(self) -> float | None:
        c = self.coefficients()
        return None if c is None else c[0]

    @property
    def c2(self) -> float | None:
        c = self.coefficients()
        return None if c is None else c[1]

    # ------------------------------------------------------------- the forward pass
    def forward(
        self,
        z1: torch.Tensor,
        z2: torch.Tensor,
        labels: Any = None,
        *,
        extra_views: Sequence[torch.Tensor] = (),
        queue: tuple[torch.Tensor, torch.Tensor] | None = None,
        **hparams: Any,
    ) -> torch.Tensor:
        """The mean loss of the batch as a 0-dim fp32 tensor. ``hparams``
        (optional) override the configured values for this call only.

        ``extra_views`` are views 3..V of the same B instances (row i of each is
        instance i), for the losses with ``multi_view`` (the multi-positive form:
        every other view of the same instance is a positive); none is the
        two-view loss, computed exactly as without the argument.

        ``queue`` = (K1, K2), (K, d) each: stored keys of view 1 and of view 2 of
        earlier instances (MoCo's memory bank), for the losses with ``takes_queue``.
        They are extra cross-view negatives: anchors of view 1 (rows of z1) see K2,
        anchors of view 2 see K1 (each loss's docstring says in which terms). None
        is the loss without a queue, computed exactly as without the argument."""
        hp = self._hparams_for_call(hparams)
        return self._on_unit(self.prepare(z1, z2, labels, extra_views=extra_views, queue=queue), hp)

    def prepare(
        self,
        z1: torch.Tensor,
        z2: torch.Tensor,
        labels: Any = None,
        *,
        extra_views: Sequence[torch.Tensor] = (),
        queue: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> UnitBatch:
        """The checks and the normalisation of :meth:`forward`: the batch as this loss computes
        on it (rows L2-normalised in fp32). :meth:`on_unit` of it is :meth:`forward`'s value,
        bit for bit; losses that take the same batch can share one preparation
        (:class:`~cl_diag.losses.RegularisedLoss`)."""
        labels = check_inputs(z1, z2, labels, self.name)
        if extra_views:
            self._check_extra_views(z1, extra_views)
        if queue is not None:
            self._check_queue(z1, queue, extra_views)
        # fp32 regardless of an enclosing autocast region: similarities near
        # delta(n) and exp(s/t) at small t do not survive half precision.
        with torch.autocast(device_type=z1.device.type, enabled=False):
            u, v = normalise_pair(z1, z2)
            keys = normalise_pair(queue[0], queue[1]) if queue is not None else None
            rest = [F.normalize(z.float(), dim=1) for z in extra_views]
        return UnitBatch(u, v, labels, rest, keys)

    def on_unit(self, batch: UnitBatch, **hparams: Any) -> torch.Tensor:
        """The loss of a batch :meth:`prepare` made (``hparams`` override as in :meth:`forward`)."""
        return self._on_unit(batch, self._hparams_for_call(hparams))

    def _on_unit(self, batch: UnitBatch, hp: Mapping[str, Any]) -> torch.Tensor:
        if batch.keys is not None and not self.takes_queue:
            self._check_queue(batch.u, batch.keys, batch.extra_views)
        if batch.extra_views and not self.multi_view:
            self._check_extra_views(batch.u, batch.extra_views)
        u, v, labels = batch.u, batch.v, batch.labels
        with torch.autocast(device_type=u.device.type, enabled=False):
            if batch.keys is not None:
                return self._compute_queue(u, v, batch.keys[0], batch.keys[1], labels, **hp)
            if batch.extra_views:
                return self._compute_views([u, v, *batch.extra_views], labels, **hp)
            return self._compute(u, v, labels, **hp)

    def _check_extra_views(self, z1: torch.Tensor, extra: Sequence[torch.Tensor]) -> None:
        if not self.multi_view:
            raise LossOptionError(
                f"{self.name} takes two views; more than two views (--views) work with: "
                f"{', '.join(MULTI_VIEW_LOSSES)}",
                option="views",
                loss=self.name,
            )
        for k, z in enumerate(extra, start=3):
            if not isinstance(z, torch.Tensor) or z.shape != z1.shape or not z.is_floating_point():
                shape = tuple(z.shape) if isinstance(z, torch.Tensor) else type(z).__name__
                raise ValueError(
                    f"{self.name}: view {k} must be a floating-point tensor shaped like z1 "
                    f"{tuple(z1.shape)}, got {shape}"
                )

    def _check_queue(self, z1: torch.Tensor, queue: Any, extra: Sequence[torch.Tensor]) -> None:
        if not self.takes_queue:
            raise LossOptionError(
                f"{self.name} has no cross-view negatives a queue could add to; queue negatives "
                f"(--queue) work with: {', '.join(QUEUE_LOSSES)}",
                option="queue",
                loss=self.name,
            )
        if extra:
            raise LossOptionError(
                f"{self.name}: queue negatives are defined for two views; drop the extra views "
                "or the queue",
                option="queue",
                loss=self.name,
            )
        ok = (
            isinstance(queue, (tuple, list))
            and len(queue) == 2
            and all(isinstance(k, torch.Tensor) and k.is_floating_point() for k in queue)
            and queue[0].shape == queue[1].shape
            and queue[0].dim() == 2
            and queue[0].shape[0] >= 1
            and queue[0].shape[1] == z1.shape[1]
        )
        if not ok:
            raise ValueError(
                f"{self.name}: queue must be two floating-point tensors (K, {z1.shape[1]}) of "
                "the same shape, the keys of view 1 and of view 2, K >= 1"
            )

    # *args and **hp typed Any: each loss spells its own hyper-parameters as keyword-only
    # arguments (mypy accepts any override of this gradual signature)
    def _compute(self, u, v, labels, *args: Any, **hp: Any) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def _compute_queue(
        self,
        u: torch.Tensor,
        v: torch.Tensor,
        k1: torch.Tensor,
        k2: torch.Tensor,
        labels: torch.Tensor | None,
        **hp: Any,
    ) -> torch.Tensor:  # pragma: no cover
        """The loss with the unit keys k1 (view 1's) and k2 (view 2's) as extra negatives."""
        raise NotImplementedError

    def _compute_views(
        self, views: list[torch.Tensor], labels: torch.Tensor | None, **hp: Any
    ) -> torch.Tensor:  # pragma: no cover
        """The loss of V >= 3 normalised fp32 views (losses with ``multi_view``)."""
        raise NotImplementedError

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.hparams.items())


class CallableLoss(nn.Module):
    """A plain ``(z1, z2, labels=None, **hparams)`` callable registered in
    ``LOSSES`` (not a :class:`Loss`), bound to fixed hyper-parameters so that
    :func:`cl_diag.losses.build_loss` returns a module for every entry. The
    hyper-parameters are checked once here when the callable has ``resolve``."""

    def __init__(self, fn: Callable[..., torch.Tensor], name: str, hparams: dict[str, Any]):
        super().__init__()
        if hasattr(fn, "resolve"):
            fn.resolve(**hparams)
        self.fn, self.name, self._hp = fn, name, dict(hparams)

    @property
    def hparams(self) -> dict[str, Any]:
        return dict(self._hp)

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, labels: Any = None) -> torch.Tensor:
        return self.fn(z1, z2, labels, **self._hp)


def zero_like_graph(z: torch.Tensor) -> torch.Tensor:
    """A 0 that stays connected to the graph, so backward() works when no
    term is active (e.g. no semi-hard triplet in the batch)."""
    return (z * 0).sum()
