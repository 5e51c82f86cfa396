"""Margin triplet loss on cosine distance, with three mining rules.

Schroff, Kalenichenko, Philbin 2015 (FaceNet; semi-hard mining) and Hermans,
Beyer, Leibe 2017 (batch-hard mining). With z = [u; v] the 2B normalised
embeddings (anchors from both views, candidates from their union), y the
labels repeated for both views (instance indices when labels is None),
d_ab = 1 - z_a.z_b, P(a) = {p != a : y_p = y_a}, N(a) = {n : y_n != y_a}::

    l(a, p, n) = max(0, d_ap - d_an + margin)

``mining``:

- ``"all"``: the mean of l over every triplet a, p in P(a), n in N(a)
  (zero-loss triplets included in the count);
- ``"semi-hard"``: the mean of l over the triplets with
  d_ap < d_an < d_ap + margin (FaceNet's semi-hard set; all of them, not one
  per pair);
- ``"batch-hard"``: the mean over anchors with a positive and a negative of
  max(0, max_{p in P(a)} d_ap - min_{n in N(a)} d_an + margin).

A batch with no qualifying triplet gives 0 (still attached to the graph).
The "all" and "semi-hard" rules visit O(B^3) triplets; anchors are streamed
in chunks so memory stays about 16M elements. Outside the paper's framework
(``family`` is None).

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES
    >>> g = torch.Generator().manual_seed(0)
    >>> z1, z2 = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    >>> LOSSES["triplet"](z1, z2, margin=0.2, mining="batch-hard").shape
    torch.Size([])
"""

from __future__ import annotations

import torch

from ._common import HParam, Loss, instance_labels, non_negative, zero_like_graph

MINING = ("all", "semi-hard", "batch-hard")
_CHUNK_ELEMENTS = 1 << 24


class TripletLoss(Loss):
    name = "triplet"
    family = None
    negatives = "labels"
    uses_labels = True
    hyperparameters = (
        HParam("margin", 0.2, float, "margin on cosine distance", check=non_negative),
        HParam("mining", "all", str, "which triplets count", choices=MINING),
    )

    def _compute(self, u, v, labels, *, margin, mining):
        b = u.shape[0]
        y = instance_labels(labels, b, u.device).repeat(2)
        z = torch.cat([u, v])
        n2 = 2 * b
        dist = 1.0 - z @ z.T
        same = y[:, None] == y[None, :]
        pos = same & ~torch.eye(n2, dtype=torch.bool, device=u.device)
        neg = ~same

        if mining == "batch-hard":
            hardest_pos = dist.masked_fill(~pos, float("-inf")).amax(dim=1)
            hardest_neg = dist.masked_fill(~neg, float("inf")).amin(dim=1)
            ok = pos.any(dim=1) & neg.any(dim=1)
            if not ok.any():
                return zero_like_graph(dist)
            return torch.relu(hardest_pos[ok] - hardest_neg[ok] + margin).mean()

        total = zero_like_graph(dist)
        count = 0
        chunk = max(1, _CHUNK_ELEMENTS // (n2 * n2))
        for start in range(0, n2, chunk):
            d = dist[start:start + chunk]
            d_ap, d_an = d[:, :, None], d[:, None, :]
            valid = pos[start:start + chunk, :, None] & neg[start:start + chunk, None, :]
            if mining == "semi-hard":
                valid = valid & (d_an > d_ap) & (d_an < d_ap + margin)
            viol = torch.relu(d_ap - d_an + margin)
            total = total + torch.where(valid, viol, torch.zeros_like(viol)).sum()
            count += int(valid.sum())
        if count == 0:
            return total
        return total / count


triplet = TripletLoss()
