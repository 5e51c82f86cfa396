"""Contrastive losses as ``torch.nn.Module`` s and as functions of two views of embeddings.

Module form (hyper-parameters checked once, at construction)::

    loss = SimCLRLoss(temperature=0.2)          # or build_loss("simclr", temperature=0.2)
    loss(z1, z2, labels=None)                   # -> 0-dim fp32 tensor

Functional form (checked on every call): ``LOSSES[name](z1, z2, labels=None, **hparams)``,
bit for bit the same. Row i of ``z1`` and ``z2`` are the two views of instance i; the loss
L2-normalises them itself, in fp32, even under autocast. Each loss reports ``.family``
("info" = paper Def. 3.1, "ind-add" = Def. 3.2, None outside the framework),
``.coefficients()``, ``.negatives`` and ``.hyperparameters`` (:class:`HParam` s); a bad
hyper-parameter raises :class:`LossOptionError` naming it.

The general families (Lee, Lim, Lee, Sohn, ICML 2025, Sec. 3) are :class:`InfoNCEFamily` and
:class:`IndependentlyAdditive`; infonce, simclr, dcl, dhel, sigmoid and spectral are presets
of them; hcl (Robinson et al. 2021) reweights SimCLR's negatives by hardness.
``RegularisedLoss(loss, VRNLoss(...), 30.0)`` gives loss + 30 VRN (``train --vrn``). Under
DDP use :func:`cl_diag.losses.distributed.global_loss`. See docs/losses.md.

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES, build_loss
    >>> g = torch.Generator().manual_seed(0)
    >>> z1, z2 = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    >>> sorted(LOSSES)  # doctest: +NORMALIZE_WHITESPACE
    ['contrastive', 'dcl', 'dhel', 'hcl', 'infonce', 'sigmoid', 'simclr', 'spectral', 'supcl',
     'supcon', 'triplet', 'vrn']
    >>> simclr = build_loss("simclr", temperature=0.2)
    >>> simclr
    SimCLRLoss(temperature=0.2)
    >>> bool(simclr(z1, z2) == LOSSES["simclr"](z1, z2, temperature=0.2))
    True
"""

from __future__ import annotations

from typing import Any

from torch import nn

from . import (
    contrastive,
    hcl,
    sigmoid,
    spectral,
    supcl,
    supcon,
    triplet,
    vrn,
)
from ._common import (
    MULTI_VIEW_LOSSES,
    QUEUE_LOSSES,
    CallableLoss,
    HParam,
    Loss,
    LossOptionError,
    UnitBatch,
)
from .contrastive import ContrastiveLoss
from .distributed import gather_batch, gather_with_grad, global_indices, global_loss
from .families import IndependentlyAdditive, InfoNCEFamily, ind_add, info_sym
from .hcl import HCLLoss
from .pair_masks import Pairs
from .presets import DCLLoss, DHELLoss, InfoNCELoss, SimCLRLoss
from .regularised import RegularisedLoss
from .sigmoid import SigmoidLoss
from .spectral import SpectralLoss
from .supcl import SupCLLoss
from .supcon import SupConLoss
from .triplet import (
    MINERS,
    AllTriplets,
    BatchHardTriplets,
    SemiHardTriplets,
    TripletLoss,
    TripletMiner,
)
from .vrn import VRNLoss

# The loss objects are reached through LOSSES (the package attributes sigmoid, hcl, ... stay
# the submodules). Each entry is a module at the library defaults: called with hyper-parameters it
# is the functional API, and build_loss() configures a copy of it.
LOSSES: dict[str, Loss] = {
    loss.name: loss
    for loss in (
        InfoNCELoss(),
        SimCLRLoss(),
        DCLLoss(),
        DHELLoss(),
        sigmoid.sigmoid,
        spectral.spectral,
        triplet.triplet,
        contrastive.contrastive,
        supcon.supcon,
        supcl.supcl,
        hcl.hcl,
        vrn.vrn,
    )
}


def build_loss(name: str, **hparams: Any) -> nn.Module:
    """The named loss as a module configured with ``hparams`` (the entry's
    defaults for the rest), checked once here; call it as ``loss(z1, z2,
    labels)``. :class:`LossOptionError` for an unknown name (option "loss"),
    an unknown hyper-parameter or a bad value. ``build_loss("sigmoid",
    learnable=True)`` learns t and b. An entry someone registered in ``LOSSES``
    as a plain ``(z1, z2, labels, **hparams)`` callable comes back wrapped in a
    module that passes it these hyper-parameters."""
    if name not in LOSSES:
        raise LossOptionError(
            f"unknown loss {name!r}; choose one of: {', '.join(sorted(LOSSES))}", option="loss"
        )
    entry = LOSSES[name]
    if isinstance(entry, Loss):
        return entry.configure(**hparams)
    return CallableLoss(entry, name, hparams)


__all__ = [
    "LOSSES",
    "MINERS",
    "MULTI_VIEW_LOSSES",
    "QUEUE_LOSSES",
    "AllTriplets",
    "BatchHardTriplets",
    "ContrastiveLoss",
    "DCLLoss",
    "DHELLoss",
    "HCLLoss",
    "HParam",
    "IndependentlyAdditive",
    "InfoNCEFamily",
    "InfoNCELoss",
    "Loss",
    "LossOptionError",
    "Pairs",
    "RegularisedLoss",
    "SemiHardTriplets",
    "SigmoidLoss",
    "SimCLRLoss",
    "SpectralLoss",
    "SupCLLoss",
    "SupConLoss",
    "TripletLoss",
    "TripletMiner",
    "UnitBatch",
    "VRNLoss",
    "build_loss",
    "gather_batch",
    "gather_with_grad",
    "global_indices",
    "global_loss",
    "ind_add",
    "info_sym",
]
