"""Supervised contrastive loss (SupCon), the L_out form.

Khosla et al. 2020, "Supervised Contrastive Learning", Eq. 2. With
z = [u; v] the 2B normalised embeddings, y the labels repeated for both
views, A(a) = every k != a and P(a) = {p in A(a) : y_p = y_a} (same label,
either view)::

    L = (1/2B) sum_a  -1/|P(a)| sum_{p in P(a)} log( e^{z_a.z_p/t} / sum_{k in A(a)} e^{z_a.z_k/t} )

P(a) always holds the other view of a, so every anchor counts. With V > 2 views
(``extra_views``, ``--views V``) z stacks all VB rows and P(a) holds every other view of a's
instance and every view of its classmates: the same formula. Without
labels each pair is its own class, P(a) = {other view}, and the loss equals
``simclr`` exactly. Khosla et al.'s code also multiplies by t / t_base
(t_base = 0.07); that constant factor is not applied here. Outside the
paper's framework (``family`` is None).

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES
    >>> g = torch.Generator().manual_seed(0)
    >>> z1, z2 = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    >>> y = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    >>> LOSSES["supcon"](z1, z2, labels=y, temperature=0.1).shape
    torch.Size([])
"""

from __future__ import annotations

import torch

from ._common import HParam, Loss, multi_positive, positive
from .pair_masks import Pairs


class SupConLoss(Loss):
    """The SupCon loss (L_out) of this module's docstring as a module.

    Args:
        temperature: t > 0 dividing the similarity (default 0.1).

    ``forward(z1, z2, labels)``: labels (B,) integers; None makes each
    instance its own class (then equal to ``simclr``).

    Raises:
        LossOptionError: for a bad temperature.

    Example::

        >>> import torch
        >>> from cl_diag.losses import SimCLRLoss, SupConLoss
        >>> g = torch.Generator().manual_seed(0)
        >>> z1, z2 = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
        >>> supcon = SupConLoss(temperature=0.5)
        >>> y = torch.tensor([0, 0, 1, 1, 2, 2])
        >>> bool(supcon(z1, z2, y) > 0)
        True
        >>> abs(float(supcon(z1, z2) - SimCLRLoss(temperature=0.5)(z1, z2))) < 1e-6
        True
    """

    name = "supcon"
    family = None
    negatives = "labels"
    uses_labels = True
    multi_view = True
    hyperparameters = (
        HParam("temperature", 0.1, float, "t > 0 dividing the similarity", check=positive),
    )

    def __init__(self, temperature: float = 0.1):
        super().__init__()
        self._configure(temperature=temperature)

    def _compute(self, u, v, labels, *, temperature):
        pairs = Pairs.of_views(u.shape[0], labels, device=u.device)
        z = torch.cat([u, v])
        logits = (z @ z.T / temperature).masked_fill(pairs.self_mask, float("-inf"))
        log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
        pos = pairs.positive
        # where() rather than a product: log_prob is -inf on the diagonal.
        pos_sum = torch.where(pos, log_prob, torch.zeros_like(log_prob)).sum(dim=1)
        return (-pos_sum / pos.sum(dim=1)).mean()

    def _compute_views(self, views, labels, **hp):
        # V views: z = [z^1; ...; z^V], P(a) = every other row of a's label (or instance).
        pairs = Pairs.of_views(views[0].shape[0], labels, views=len(views), device=views[0].device)
        return multi_positive(torch.cat(views), pairs.positive, ~pairs.self_mask, hp["temperature"])


supcon = SupConLoss()
