"""Pairwise sigmoid loss (SigLIP-style), in the paper's sign convention.

Zhai et al. 2023, "Sigmoid Loss for Language Image Pre-Training"; paper Eq. 9
and Def. 3.2 with phi(x) = -log(1 + e^{-t x + b}),
psi(x) = (B-1) log(1 + e^{t x - b}) (Lee et al., ICML 2025, Ex. 5.4)::

    L = (1/B) sum_i softplus(b - t u_i.v_i) + (1/B) sum_{i != j} softplus(t u_i.v_j - b)
        [ + (1/2B) sum_{i != j} ( softplus(t u_i.u_j - b) + softplus(t v_i.v_j - b) ) ]

The bracketed within-view term is added with ``within_view=True``, giving
(c1, c2) = (1, 1) instead of (1, 0) (Def. 3.2 with c2 = 1 and the same psi).
Note the conventions: ``temperature`` t *multiplies* the similarity (SigLIP's
t'), and ``bias`` b is the negative of SigLIP's bias (their logit is
t x + b_SigLIP), so SigLIP's initialisation t = 10, b_SigLIP = -10 is
``temperature=10, bias=10`` here. The negative sum is divided by B, not
B(B-1), exactly as Eq. 9.

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES
    >>> g = torch.Generator().manual_seed(0)
    >>> z1, z2 = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    >>> LOSSES["sigmoid"](z1, z2, temperature=1.0, bias=-1.0, within_view=False).shape
    torch.Size([])
    >>> LOSSES["sigmoid"].coefficients(within_view=True)
    (1.0, 1.0)
"""

from __future__ import annotations

import torch.nn.functional as F

from ._common import HParam, finite, positive
from .families import IndependentlyAdditive


class SigmoidLoss(IndependentlyAdditive):
    def __init__(self):
        super().__init__(c1=1, c2=0, name="sigmoid")
        self.negatives = "cross"
        self.hyperparameters = (
            HParam("temperature", 1.0, float,
                   "t > 0; multiplies the similarity (paper Eq. 9)", check=positive),
            HParam("bias", -1.0, float,
                   "b in softplus(t*s - b); paper convention, b = -b_SigLIP", check=finite),
            HParam("within_view", False, bool,
                   "also push within-view negatives, (c1,c2) = (1,1)"),
        )

    def coefficients(self, **hparams) -> tuple[float, float]:
        hp = self.resolve(**hparams)
        return (1.0, 1.0) if hp["within_view"] else (1.0, 0.0)

    def phi_psi(self, batch: int, *, temperature: float, bias: float, within_view: bool):
        t, b = temperature, bias

        def phi(x):
            return -F.softplus(b - t * x)

        def psi(x):
            return (batch - 1) * F.softplus(t * x - b)

        return phi, psi


sigmoid = SigmoidLoss()
