"""Contrastive losses as pure functions of two views of embeddings.

``LOSSES[name](z1, z2, labels=None, **hparams)`` returns the mean loss as a
0-dim fp32 tensor. Row i of ``z1`` and ``z2`` are the two views of
instance i; the loss L2-normalises them itself, in fp32, even under autocast.
Each entry reports ``.family`` ("info" = paper Def. 3.1, "ind-add" =
Def. 3.2, None = outside the framework), ``.coefficients(**hparams)`` /
``.c1`` / ``.c2`` (None outside the framework), ``.negatives`` ("cross",
"within", "both", or "labels") and ``.hyperparameters`` (a tuple of
:class:`HParam` with name, default, type, help, choices). An unknown or bad
hyper-parameter raises ``ValueError``.

The general families (Lee, Lim, Lee, Sohn, ICML 2025, Section 3) are
:class:`InfoNCEFamily` and :class:`IndependentlyAdditive`; infonce, simclr,
dcl, dhel, sigmoid and spectral are presets of them. Under DDP use
:func:`cl_diag.losses.distributed.global_loss`. See docs/losses.md.

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES
    >>> g = torch.Generator().manual_seed(0)
    >>> z1, z2 = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    >>> sorted(LOSSES)
    ['contrastive', 'dcl', 'dhel', 'infonce', 'sigmoid', 'simclr', 'spectral', 'supcon', 'triplet', 'vrn']
    >>> total = LOSSES["simclr"](z1, z2, temperature=0.2) + 30 * LOSSES["vrn"](z1, z2, delta=-1/49999)
"""

from . import (
    contrastive,
    dcl,
    dhel,
    distributed,
    families,
    infonce,
    sigmoid,
    simclr,
    spectral,
    supcon,
    triplet,
    vrn,
)
from ._common import HParam, Loss
from .distributed import gather_batch, gather_with_grad, global_indices, global_loss
from .families import IndependentlyAdditive, InfoNCEFamily, ind_add, info_sym

# The package attributes simclr, dhel, ... stay the submodules; the loss
# objects are reached through LOSSES (or e.g. cl_diag.losses.simclr.simclr).
LOSSES: dict[str, Loss] = {
    loss.name: loss
    for loss in (
        infonce.infonce, simclr.simclr, dcl.dcl, dhel.dhel, sigmoid.sigmoid,
        spectral.spectral, triplet.triplet, contrastive.contrastive, supcon.supcon, vrn.vrn,
    )
}

__all__ = [
    "LOSSES",
    "Loss",
    "HParam",
    "InfoNCEFamily",
    "IndependentlyAdditive",
    "info_sym",
    "ind_add",
    "gather_batch",
    "gather_with_grad",
    "global_indices",
    "global_loss",
]
