"""Supervised contrastive loss (SupCon), the L_out form.

Khosla et al. 2020, "Supervised Contrastive Learning", Eq. 2. With
z = [u; v] the 2B normalised embeddings, y the labels repeated for both
views, A(a) = every k != a and P(a) = {p in A(a) : y_p = y_a} (same label,
either view)::

    L = (1/2B) sum_a  -1/|P(a)| sum_{p in P(a)} log( e^{z_a.z_p/t} / sum_{k in A(a)} e^{z_a.z_k/t} )

P(a) always holds the other view of a, so every anchor counts. Without
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

from ._common import HParam, Loss, instance_labels, positive


class SupConLoss(Loss):
    name = "supcon"
    family = None
    negatives = "labels"
    uses_labels = True
    hyperparameters = (
        HParam("temperature", 0.1, float, "t > 0 dividing the similarity", check=positive),
    )

    def _compute(self, u, v, labels, *, temperature):
        b = u.shape[0]
        y = instance_labels(labels, b, u.device).repeat(2)
        z = torch.cat([u, v])
        self_mask = torch.eye(2 * b, dtype=torch.bool, device=u.device)
        logits = (z @ z.T / temperature).masked_fill(self_mask, float("-inf"))
        log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
        pos = (y[:, None] == y[None, :]) & ~self_mask
        # where() rather than a product: log_prob is -inf on the diagonal.
        pos_sum = torch.where(pos, log_prob, torch.zeros_like(log_prob)).sum(dim=1)
        return (-pos_sum / pos.sum(dim=1)).mean()


supcon = SupConLoss()
