"""VRN: the variance-reduction regulariser for negative-pair similarities.

Lee et al., ICML 2025, Def. 5.7 (L_VRNS), over the B(B-1) ordered cross-view
negative pairs of the batch::

    L_VRN = (1/(B(B-1))) sum_{i != j} |u_i.v_j - delta|^p

with delta = -1/(n-1), n the *training-set* size (the full-batch optimum of
Thm 5.1) and p = 2 in the paper. |.|^p equals (.)^p for even p and keeps the
loss defined for any p >= 1 (as the authors' earlier code did). Since
sum (s - delta)^2 / N = Var_batch(s) + (mean_batch(s) - delta)^2, it
penalises the in-batch variance and the offset of the mean.

``delta`` defaults to 0.0, the n -> infinity limit of -1/(n-1): the loss
cannot know the training-set size, so a trainer passes
``delta=cl_diag.measurement.theory.delta(n_train)`` (for n = 50,000 the two
differ by 2e-5). VRN is a regulariser added to a contrastive loss
(``total = L + lambda * L_VRN``, lambda = 30 in the paper), not a standalone
objective; it is outside the Def. 3.1/3.2 families (``family`` is None).
With queued keys (``queue=(K1, K2)``, ``--queue K``) the mean also runs over
the queue's cross-view similarities u_i.k2_k and v_i.k1_k::

    L_VRN = ( sum_{i != j} |u_i.v_j - delta|^p + sum_{i,k} |u_i.k2_k - delta|^p
              + sum_{i,k} |v_i.k1_k - delta|^p ) / (B(B-1) + 2BK)

With V > 2 views (``extra_views``) the mean runs over the cross-view negatives
(z^i_a, z^j_b), a != b, of every ordered pair of views i != j. Labels are ignored: a negative
is a different instance, as in the authors'
code, which marks negatives by dataset index.

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES
    >>> # a simplex ETF of 3 points in 2-D: every negative is -1/2
    >>> a = torch.tensor([0.0, 2.0943951, 4.1887902])
    >>> z = torch.stack([a.cos(), a.sin()], dim=1)
    >>> abs(float(LOSSES["vrn"](z, z, delta=-0.5, power=2))) < 1e-12
    True
"""

from __future__ import annotations

from typing import Any

import torch

from ._common import HParam, Loss


def _delta_ok(x: float) -> str | None:
    return None if -1.0 <= x <= 1.0 else "must lie in [-1, 1] (a cosine similarity)"


def _power_ok(x: float) -> str | None:
    return None if (x >= 1.0 and x < float("inf")) else "must be a finite number >= 1"


class VRNLoss(Loss):
    """The VRN regulariser of this module's docstring as a module.

    Args:
        delta: the target similarity in [-1, 1]; -1/(n_train - 1) in the
            paper (``cl_diag.measurement.theory.delta(n_train)``), default 0.0.
        power: the exponent p >= 1 (2 in the paper).

    Raises:
        LossOptionError: for a bad delta or power (``.option`` names it).

    Example::

        >>> import torch
        >>> from cl_diag.losses import LOSSES, SimCLRLoss, VRNLoss
        >>> g = torch.Generator().manual_seed(0)
        >>> z1, z2 = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
        >>> simclr, vrn = SimCLRLoss(temperature=0.2), VRNLoss(delta=-1 / 49_999)
        >>> total = simclr(z1, z2) + 30 * vrn(z1, z2)        # the paper's lambda = 30
        >>> bool(vrn(z1, z2) == LOSSES["vrn"](z1, z2, delta=-1 / 49_999))
        True
    """

    name = "vrn"
    family = None
    negatives = "cross"
    multi_view = True
    takes_queue = True
    hyperparameters = (
        HParam(
            "delta", 0.0, float, "target similarity, -1/(n_train - 1) in the paper", check=_delta_ok
        ),
        HParam("power", 2.0, float, "exponent p >= 1", check=_power_ok),
    )

    def __init__(self, delta: float = 0.0, power: float = 2.0):
        super().__init__()
        self._configure(delta=delta, power=power)

    def _compute(self, u, v, labels, *, delta, power):
        b = u.shape[0]
        dev = u @ v.T - delta
        per_pair = dev.square() if power == 2.0 else dev.abs().pow(power)
        # Sum all B^2 entries and take the B positives back out: the same value as
        # boolean-mask indexing of the off-diagonal, without its gather/scatter cost
        # (the diagonal's gradient is exactly 1 - 1 = 0).
        return (per_pair.sum() - per_pair.diagonal().sum()) / (b * (b - 1))

    def _compute_queue(
        self,
        u: torch.Tensor,
        v: torch.Tensor,
        k1: torch.Tensor,
        k2: torch.Tensor,
        labels: torch.Tensor | None,
        **hp: Any,
    ) -> torch.Tensor:
        # The queue's cross-view similarities u_i.k2_k and v_i.k1_k join the B(B-1) in-batch
        # ones, and the mean runs over all B(B-1) + 2BK of them.
        b, k = u.shape[0], k1.shape[0]
        delta, power = hp["delta"], hp["power"]

        def dev_p(s: torch.Tensor) -> torch.Tensor:
            d = s - delta
            return d.square() if power == 2.0 else d.abs().pow(power)

        batch = dev_p(u @ v.T)
        total = batch.sum() - batch.diagonal().sum()
        total = total + dev_p(u @ k2.T).sum() + dev_p(v @ k1.T).sum()
        return total / (b * (b - 1) + 2 * b * k)

    def _compute_views(self, views, labels, **hp):
        # V views: the mean over every ordered pair of different views (i, j) and of different
        # instances a != b of |z^i_a . z^j_b - delta|^p (V = 2: the two-view mean).
        total = 0.0
        for i, zi in enumerate(views):
            for j, zj in enumerate(views):
                if i != j:
                    total = total + self._compute(zi, zj, labels, **hp)
        k = len(views)
        return total / (k * (k - 1))


vrn = VRNLoss()
