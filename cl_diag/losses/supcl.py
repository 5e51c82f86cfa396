"""Supervised contrastive loss with a self-supervised share (``supcl``).

The convex combination of a supervised and a self-supervised contrastive loss whose
class-collapse threshold Lee, Oh, Lee et al. derive with the simplex-to-simplex embedding
model (SSEM; paper-notes 11.3, "variant B", the rows of their ImageNet code)::

    L = (1 - alpha) L_sup + alpha L_self

With z = [u; v] the 2B normalised embeddings, t the temperature and, for anchor a,

    log p(a, k) = z_a.z_k / t - log sum_{j != a} e^{z_a.z_j / t}     (self excluded)
    S(a) = the other views of a's instance                           (L_self positives)
    P(a) = views of *other* instances with a's label                  (L_sup positives)

each anchor contributes

    l(a) = (1 - alpha) * (-1/|P(a)|) sum_{k in P(a)} log p(a, k)
         +      alpha  * (-1/|S(a)|) sum_{k in S(a)} log p(a, k)

and L is the mean of l(a) over the 2B anchors. Same-instance views are never L_sup
positives; every other view sits in every denominator. An anchor whose class has no other
instance in the batch (P(a) empty) has no supervised term: it contributes its L_self term
alone, with weight 1 (as SupCon treats such an anchor). Balanced batches
(``cl-diag train --balanced-batch``) give every anchor P(a) of size p (n - 1) with p views
and n instances per class.

With V > 2 views (``extra_views``, ``--views V``) z stacks all VB rows, S(a) holds the
V - 1 other views of a's instance and P(a) every view of the other instances of a's class
(SupCon's multi-view form, split as above); the sum over j != a runs over all VB - 1 rows.

Limits, tested in tests/test_supcl.py:

* alpha = 1 is ``simclr`` (NT-Xent): S(a) is the one other view, to float rounding;
* alpha = 0 is SupCon without same-instance positives. ``supcon`` (Khosla et al. 2020,
  L_out) instead averages over S(a) and P(a) together, so in a batch where every class has
  n instances it equals ``supcl`` at alpha = |S| / (|S| + |P|) = 1 / (2n - 1), not at 0;
* with V views, alpha = 1 is the multi-positive ``simclr``, and ``supcon`` equals ``supcl``
  at alpha = |S| / (|S| + |P|) = (V - 1) / (V n - 1) (n instances per class);
* without labels every instance is its own class, P(a) is empty and ``supcl`` equals
  ``simclr`` for every alpha (as ``supcon`` does).

Outside the paper's Def. 3.1 / 3.2 framework (``family`` is None); the theory panel shows
the SSEM collapse threshold alpha_c and optimum beta* for it
(:func:`cl_diag.measurement.ssem.collapse_threshold`).

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES
    >>> g = torch.Generator().manual_seed(0)
    >>> z1, z2 = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    >>> y = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    >>> float(LOSSES["supcl"](z1, z2, labels=y, temperature=0.1, alpha=0.5)) > 0
    True
    >>> one = LOSSES["supcl"](z1, z2, labels=y, temperature=0.2, alpha=1.0)
    >>> abs(float(one - LOSSES["simclr"](z1, z2, temperature=0.2))) < 1e-5
    True
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ._common import HParam, Loss, positive
from .pair_masks import Pairs

__all__ = ["SupCLLoss", "supcl"]


def _unit_interval(x: float) -> str | None:
    return None if (math.isfinite(x) and 0.0 <= x <= 1.0) else "must lie in [0, 1]"


class SupCLLoss(Loss):
    """The ``supcl`` loss of this module's docstring as a module.

    Args:
        temperature: t > 0 dividing the similarity (default 0.1).
        alpha: the self-supervised share in [0, 1] (default 0.5): 0 is supervised only
            (without same-instance positives), 1 is SimCLR.

    ``forward(z1, z2, labels)``: labels (B,) integers; None makes each instance its own
    class (then equal to ``simclr``).

    Raises:
        LossOptionError: for a bad temperature or alpha (``.option`` names it).

    Example::

        >>> import torch
        >>> from cl_diag.losses import SupCLLoss
        >>> g = torch.Generator().manual_seed(0)
        >>> z1, z2 = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
        >>> loss = SupCLLoss(temperature=0.5, alpha=0.25)
        >>> loss
        SupCLLoss(temperature=0.5, alpha=0.25)
        >>> bool(loss(z1, z2, torch.tensor([0, 0, 1, 1, 2, 2])) > 0)
        True
    """

    name = "supcl"
    family = None
    negatives = "labels"
    uses_labels = True
    multi_view = True
    hyperparameters = (
        HParam("temperature", 0.1, float, "t > 0 dividing the similarity", check=positive),
        HParam(
            "alpha",
            0.5,
            float,
            "self-supervised share in [0, 1]: (1 - alpha) L_sup + alpha L_self",
            check=_unit_interval,
        ),
    )

    def __init__(self, temperature: float = 0.1, alpha: float = 0.5):
        super().__init__()
        self._configure(temperature=temperature, alpha=alpha)

    def _compute(
        self, u: torch.Tensor, v: torch.Tensor, labels: torch.Tensor | None, **hp: Any
    ) -> torch.Tensor:
        return self._views_loss([u, v], labels, **hp)

    def _compute_views(
        self, views: list[torch.Tensor], labels: torch.Tensor | None, **hp: Any
    ) -> torch.Tensor:
        # V views: z = [z^1; ...; z^V]; S(a) = the V - 1 other views of a's instance.
        return self._views_loss(views, labels, **hp)

    @staticmethod
    def _views_loss(
        views: list[torch.Tensor],
        labels: torch.Tensor | None,
        *,
        temperature: float,
        alpha: float,
    ) -> torch.Tensor:
        b = views[0].shape[0]
        pairs = Pairs.of_views(b, labels, views=len(views), device=views[0].device)
        z = torch.cat(views)
        logits = (z @ z.T / temperature).masked_fill(pairs.self_mask, float("-inf"))
        log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
        zero = torch.zeros_like(log_prob)
        # where() rather than a product: log_prob is -inf on the diagonal.
        own = pairs.other_views
        self_term = -torch.where(own, log_prob, zero).sum(dim=1) / own.sum(dim=1)
        sup = pairs.positive & ~own  # same class, another instance
        count = sup.sum(dim=1)
        sup_term = -torch.where(sup, log_prob, zero).sum(dim=1) / count.clamp(min=1)
        # An anchor without a class mate in the batch keeps its L_self term alone.
        has_mate = count > 0
        w_sup = torch.where(has_mate, 1.0 - alpha, 0.0)
        w_self = torch.where(has_mate, alpha, 1.0)
        return (w_sup * sup_term + w_self * self_term).mean()


supcl = SupCLLoss()
