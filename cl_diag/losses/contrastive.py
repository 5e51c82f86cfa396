"""Siamese contrastive (margin) loss on cosine distance.

After Hadsell, Chopra, LeCun 2006, "Dimensionality Reduction by Learning an
Invariant Mapping", in the unsquared form common in metric learning (e.g.
pytorch-metric-learning's ContrastiveLoss). With z = [u; v] the 2B
normalised embeddings, y the labels repeated for both views (instance
indices when labels is None), d_ab = 1 - z_a.z_b the cosine distance in
[0, 2], P = {(a, b) : a != b, y_a = y_b} and N = {(a, b) : y_a != y_b}::

    L = (1/|P|) sum_{(a,b) in P} d_ab + (1/|N|) sum_{(a,b) in N} max(0, margin - d_ab)

Positives are pulled together; negatives are pushed until their distance
exceeds ``margin`` (margin = 1 means similarity <= 0). A term with no pairs
(N is empty when every label is equal) contributes 0. Hadsell et al. square
both terms and use Euclidean distance; this form is linear in d.
Outside the paper's framework (``family`` is None).

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES
    >>> z = torch.eye(3)
    >>> float(LOSSES["contrastive"](z, z, margin=1.0))  # aligned, orthogonal
    0.0
"""

from __future__ import annotations

import torch

from ._common import HParam, Loss, non_negative, zero_like_graph
from .pair_masks import Pairs


class ContrastiveLoss(Loss):
    """The margin contrastive loss of this module's docstring as a module.

    Args:
        margin: push negatives to cosine distance >= margin, >= 0 (default 1.0).

    ``forward(z1, z2, labels)``: labels (B,) integers; None makes the other
    view the only positive.

    Raises:
        LossOptionError: for a negative or non-finite margin.

    Example::

        >>> import torch
        >>> from cl_diag.losses import ContrastiveLoss
        >>> z = torch.eye(3)
        >>> float(ContrastiveLoss(margin=1.5)(z, z))   # negatives at d = 1: 0 + (1.5 - 1)
        0.5
    """

    name = "contrastive"
    family = None
    negatives = "labels"
    uses_labels = True
    hyperparameters = (
        HParam(
            "margin",
            1.0,
            float,
            "push negatives to cosine distance >= margin (in [0, 2])",
            check=non_negative,
        ),
    )

    def __init__(self, margin: float = 1.0):
        super().__init__()
        self._configure(margin=margin)

    def _compute(self, u, v, labels, *, margin):
        pairs = Pairs.of_views(u.shape[0], labels, device=u.device)
        z = torch.cat([u, v])
        dist = 1.0 - z @ z.T
        pos, neg = pairs.positive, pairs.negative
        loss = zero_like_graph(dist)
        if pos.any():
            loss = loss + dist[pos].mean()
        if neg.any():
            loss = loss + torch.relu(margin - dist[neg]).mean()
        return loss


contrastive = ContrastiveLoss()
