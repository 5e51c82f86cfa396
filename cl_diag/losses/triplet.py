"""Margin triplet loss on cosine distance, with three mining rules.

Schroff, Kalenichenko, Philbin 2015 (FaceNet; semi-hard mining) and Hermans,
Beyer, Leibe 2017 (batch-hard mining). With z = [u; v] the 2B normalised
embeddings (anchors from both views, candidates from their union), y the
labels repeated for both views (instance indices when labels is None),
d_ab = 1 - z_a.z_b, P(a) = {p != a : y_p = y_a}, N(a) = {n : y_n != y_a}::

    l(a, p, n) = max(0, d_ap - d_an + margin)

``mining`` names the strategy object (a :class:`TripletMiner` in ``MINERS``)
that chooses the triplets; the loss averages l over them:

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

from collections.abc import Iterator
from typing import ClassVar

import torch

from ._common import HParam, Loss, non_negative, zero_like_graph
from .pair_masks import Pairs

__all__ = [
    "MINERS",
    "MINING",
    "AllTriplets",
    "BatchHardTriplets",
    "SemiHardTriplets",
    "TripletLoss",
    "TripletMiner",
]

# Anchors per chunk of the O(B^3) rules: about this many (a, p, n) elements at once.
_CHUNK_ELEMENTS = 1 << 24

# (d_ap, d_an, chosen): broadcastable distances and a mask of the chosen triplets
# (None: every entry is chosen).
Triplets = tuple[torch.Tensor, torch.Tensor, "torch.Tensor | None"]


class TripletMiner:
    """A mining rule: which (anchor, positive, negative) triplets count.

    Kept apart from the loss (as pytorch-metric-learning keeps miners apart
    from losses): :meth:`mine` yields blocks of chosen triplets from the
    cosine-distance matrix of the stacked views and the pair masks; the loss
    applies the hinge and averages over every chosen triplet.
    """

    name: ClassVar[str]

    def mine(self, dist: torch.Tensor, pairs: Pairs, margin: float) -> Iterator[Triplets]:
        raise NotImplementedError  # pragma: no cover


class AllTriplets(TripletMiner):
    """Every triplet a, p in P(a), n in N(a), zero-loss ones included.
    Anchors are streamed in chunks of about ``_CHUNK_ELEMENTS`` triplets."""

    name = "all"

    def keep(
        self, d_ap: torch.Tensor, d_an: torch.Tensor, margin: float, valid: torch.Tensor
    ) -> torch.Tensor:
        """The chosen subset of the ``valid`` triplets of one chunk."""
        return valid

    def mine(self, dist: torch.Tensor, pairs: Pairs, margin: float) -> Iterator[Triplets]:
        n = dist.shape[0]
        pos, neg = pairs.positive, pairs.negative
        chunk = max(1, _CHUNK_ELEMENTS // (n * n))  # read at call time (tests shrink it)
        for start in range(0, n, chunk):
            d = dist[start : start + chunk]
            d_ap, d_an = d[:, :, None], d[:, None, :]
            valid = pos[start : start + chunk, :, None] & neg[start : start + chunk, None, :]
            yield d_ap, d_an, self.keep(d_ap, d_an, margin, valid)


class SemiHardTriplets(AllTriplets):
    """FaceNet's semi-hard set: d_ap < d_an < d_ap + margin (all of them, not
    one per pair)."""

    name = "semi-hard"

    def keep(self, d_ap, d_an, margin, valid):
        return valid & (d_an > d_ap) & (d_an < d_ap + margin)


class BatchHardTriplets(TripletMiner):
    """Per anchor with a positive and a negative, the farthest positive and
    the nearest negative (Hermans et al. 2017)."""

    name = "batch-hard"

    def mine(self, dist: torch.Tensor, pairs: Pairs, margin: float) -> Iterator[Triplets]:
        pos, neg = pairs.positive, pairs.negative
        hardest_pos = dist.masked_fill(~pos, float("-inf")).amax(dim=1)
        hardest_neg = dist.masked_fill(~neg, float("inf")).amin(dim=1)
        ok = pos.any(dim=1) & neg.any(dim=1)
        yield hardest_pos[ok], hardest_neg[ok], None


MINERS: dict[str, TripletMiner] = {
    m.name: m for m in (AllTriplets(), SemiHardTriplets(), BatchHardTriplets())
}
MINING = tuple(MINERS)


class TripletLoss(Loss):
    """The margin triplet loss of this module's docstring as a module.

    Args:
        margin: on cosine distance, >= 0 (default 0.2).
        mining: ``"all"``, ``"semi-hard"`` or ``"batch-hard"``: the
            :class:`TripletMiner` of ``MINERS`` that chooses the triplets.

    ``forward(z1, z2, labels)``: labels (B,) integers; None makes the other
    view the only positive.

    Raises:
        LossOptionError: for a negative margin or an unknown mining rule.

    Example::

        >>> import torch
        >>> from cl_diag.losses import TripletLoss
        >>> z = torch.eye(3)
        >>> loss = TripletLoss(margin=1.5, mining="batch-hard")
        >>> float(loss(z, z))   # d_ap = 0, d_an = 1: 0 - 1 + 1.5
        0.5
    """

    name = "triplet"
    family = None
    negatives = "labels"
    uses_labels = True
    hyperparameters = (
        HParam("margin", 0.2, float, "margin on cosine distance", check=non_negative),
        HParam("mining", "all", str, "which triplets count", choices=MINING),
    )

    def __init__(self, margin: float = 0.2, mining: str = "all"):
        super().__init__()
        self._configure(margin=margin, mining=mining)

    def _compute(self, u, v, labels, *, margin, mining):
        pairs = Pairs.of_views(u.shape[0], labels, device=u.device)
        z = torch.cat([u, v])
        dist = 1.0 - z @ z.T
        total = zero_like_graph(dist)
        count = 0
        for d_ap, d_an, chosen in MINERS[mining].mine(dist, pairs, margin):
            viol = torch.relu(d_ap - d_an + margin)
            if chosen is None:
                total = total + viol.sum()
                count += viol.numel()
            else:
                total = total + torch.where(chosen, viol, torch.zeros_like(viol)).sum()
                count += int(chosen.sum())
        # A batch with no chosen triplet gives 0, still attached to the graph.
        return total / count if count else total


triplet = TripletLoss()
