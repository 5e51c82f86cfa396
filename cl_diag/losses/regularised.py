"""A contrastive loss plus a weighted regulariser on one preparation of the batch.

    total = L(u, v) + lambda * R(u, v)

e.g. ``RegularisedLoss(SimCLRLoss(temperature=0.2), VRNLoss(delta=-1/49_999), 30.0)``, the
paper's SimCLR + VRN (Lee et al., ICML 2025, Sec. 5.3: lambda = 30). Both terms are computed on
the same rows, normalised once (:meth:`Loss.prepare`): the value of each term is bit for bit
what the module alone gives, and backward runs through one normalisation instead of two (the
same gradient up to rounding; on a small encoder the second normalisation's forward and backward
cost about as much as the VRN term itself). ``cl-diag train --vrn LAMBDA`` trains with it.

Example::

    >>> import torch
    >>> from cl_diag.losses import RegularisedLoss, SimCLRLoss, VRNLoss
    >>> g = torch.Generator().manual_seed(0)
    >>> z1, z2 = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    >>> simclr, vrn = SimCLRLoss(temperature=0.2), VRNLoss(delta=-1 / 49_999)
    >>> total, main, reg = RegularisedLoss(simclr, vrn, 30.0)(z1, z2)
    >>> bool(main == simclr(z1, z2)) and bool(reg == vrn(z1, z2))
    True
    >>> bool(total == main + 30.0 * reg)
    True
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ._common import Loss, LossOptionError


class RegularisedLoss(nn.Module):
    """``loss + weight * regulariser``; returns ``(total, loss term, regulariser term)``.

    Args:
        loss: the contrastive loss, a module from ``build_loss`` (a :class:`Loss`; any other
            module, e.g. a plain callable registered in ``LOSSES``, is called as it is).
        regulariser: a module that takes the same batch (e.g. ``VRNLoss``).
        weight: lambda >= 0, finite.

    Raises:
        LossOptionError: for a weight that is negative or not finite (``.option`` is
            "weight").
    """

    def __init__(self, loss: nn.Module, regulariser: nn.Module, weight: float):
        super().__init__()
        weight = float(weight)
        if not (math.isfinite(weight) and weight >= 0):
            raise LossOptionError(
                f"RegularisedLoss: the weight must be a finite number >= 0, got {weight!r}",
                option="weight",
            )
        self.loss, self.regulariser, self.weight = loss, regulariser, weight

    def forward(
        self,
        z1: torch.Tensor,
        z2: torch.Tensor,
        labels: Any = None,
        **batch_args: Any,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``batch_args``: ``extra_views`` and ``queue``, as :meth:`Loss.forward` takes them."""
        if isinstance(self.loss, Loss) and isinstance(self.regulariser, Loss):
            batch = self.loss.prepare(z1, z2, labels, **batch_args)
            main, reg = self.loss.on_unit(batch), self.regulariser.on_unit(batch)
        else:  # each normalises for itself
            main = self.loss(z1, z2, labels, **batch_args)
            reg = self.regulariser(z1, z2, labels, **batch_args)
        return main + self.weight * reg, main, reg

    def extra_repr(self) -> str:
        return f"weight={self.weight!r}"
