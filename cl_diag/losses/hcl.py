"""HCL: the hard-negative contrastive loss with debiasing.

Robinson, Chuang, Sra, Jegelka, "Contrastive Learning with Hard Negative Samples", ICLR 2021,
Eq. 3-5 (the ``estimator='hard'`` form of the authors' code). SimCLR's anchors and negatives:
with z = [u; v] the 2B normalised embeddings, anchor a, its positive p(a) (the other view of the
same instance) and its N = 2B - 2 negatives k (every other row but a and p(a))::

    pos_a  = e^{z_a.z_p(a) / t}
    w_ak   = e^{beta z_a.z_k / t} / ((1/N) sum_k' e^{beta z_a.z_k' / t})   (importance weights)
    R_a    = sum_k w_ak e^{z_a.z_k / t}                                  (hardness-weighted sum)
    Ng_a   = max( (R_a - tau_plus N pos_a) / (1 - tau_plus),  N e^{-1/t} )
    L      = (1/2B) sum_a -log( pos_a / (pos_a + Ng_a) )

beta >= 0 is the concentration: beta = 0 weighs every negative equally, larger beta up-weights
the negatives closest to the anchor (the hard ones). 0 <= tau_plus < 1 is the class prior of the
debiased estimator (Chuang et al. 2020): the share of "negatives" that are really positives,
whose expected contribution (tau_plus N pos_a) is taken out; the clamp at N e^{-1/t} (the
smallest value the sum of N true negatives can take) keeps the estimate positive. The weights
are not detached, as in the authors' code.

Limits: with beta = 0 every w_ak = 1 and with tau_plus = 0 nothing is subtracted (nor clamped:
R_a >= N e^{-1/t} already), so L is SimCLR's NT-Xent over the 2B - 2 other views, and here it
equals ``LOSSES["simclr"]`` bit for bit (the same shifted logits in the same order). Outside the
paper's Def. 3.1 family in general (``family`` is None): the weights depend on the similarities.

With a queue (``queue=(K1, K2)``, ``--queue K``) the K keys of the other view join each
anchor's negatives (N = 2B - 2 + K, in the weights, R_a and the clamp alike).

Computed in log space on logits shifted by the positive, l_ak = (z_a.z_k - z_a.z_p(a)) / t, so
that a small t cannot overflow: log R_a / pos_a = logsumexp_k(l_ak + log w_ak), and
-log(pos_a / (pos_a + Ng_a)) = log(1 + Ng_a / pos_a).

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES
    >>> g = torch.Generator().manual_seed(0)
    >>> z1, z2 = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    >>> hcl = LOSSES["hcl"](z1, z2, temperature=0.5, beta=0.0, tau_plus=0.0)
    >>> bool(hcl == LOSSES["simclr"](z1, z2, temperature=0.5))
    True
    >>> bool(LOSSES["hcl"](z1, z2, temperature=0.5, beta=1.0, tau_plus=0.1) > 0)
    True
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ._common import HParam, Loss, non_negative, positive

__all__ = ["HCLLoss", "hcl"]


def _prior_ok(x: float) -> str | None:
    return None if (math.isfinite(x) and 0.0 <= x < 1.0) else "must lie in [0, 1)"


def hcl_direction(
    s_cross: torch.Tensor,
    s_within: torch.Tensor,
    pos: torch.Tensor,
    *,
    temperature: float,
    beta: float,
    tau_plus: float,
    s_queue: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean over the A anchors (rows) of log(1 + Ng_a / pos_a), the module docstring's terms.

    ``s_cross`` (A, B) are the anchors' similarities to the other view's rows and ``s_within``
    (A, B) to their own view's rows; entry (i, i) of each is excluded (the positive and the
    anchor itself), leaving N = 2B - 2 negatives. The layout (cross then within, masked entries
    at the dtype's minimum, a trailing 0 logit) is that of the InfoNCE family's, so that
    beta = tau_plus = 0 gives SimCLR's bits. ``s_queue`` (A, K): similarities to queued keys,
    K more negatives of every anchor (N = 2B - 2 + K).
    """
    a, b = s_cross.shape
    off = ~torch.eye(a, b, dtype=torch.bool, device=s_cross.device)
    keep = torch.cat([off, off], dim=1)
    shift = pos[:, None]
    neg_inf = torch.finfo(s_cross.dtype).min
    logits = torch.cat([(s_cross - shift) / temperature, (s_within - shift) / temperature], dim=1)
    n = 2 * b - 2
    if s_queue is not None:
        logits = torch.cat([logits, (s_queue - shift) / temperature], dim=1)
        keep = torch.cat([keep, torch.ones_like(s_queue, dtype=torch.bool)], dim=1)
        n += s_queue.shape[1]
    if beta != 0.0:
        # log w_ak = beta l_ak - log mean_k e^{beta l_ak}: the shift by the positive cancels.
        scaled = (beta * logits).masked_fill(~keep, neg_inf)
        log_w = scaled - (torch.logsumexp(scaled, dim=1, keepdim=True) - math.log(n))
        logits = logits + log_w
    logits = logits.masked_fill(~keep, neg_inf)
    if tau_plus == 0.0:
        # log(1 + R_a / pos_a) as one logsumexp with a 0 logit (InfoNCE family's form).
        zero = torch.zeros(a, 1, dtype=logits.dtype, device=logits.device)
        return torch.logsumexp(torch.cat([logits, zero], dim=1), dim=1).mean()
    log_r = torch.logsumexp(logits, dim=1)  # log(R_a / pos_a)
    # log(Ng_a / pos_a) = log R' + log(1 - tau_plus N / R') - log(1 - tau_plus), clamped below
    # at log(N e^{-1/t} / pos_a); where the debiased sum is <= 0 the clamp decides.
    inner = 1.0 - tau_plus * n * torch.exp(-log_r)
    debiased = log_r + torch.log(inner.clamp_min(torch.finfo(inner.dtype).tiny))
    debiased = debiased - math.log1p(-tau_plus)
    floor = math.log(n) + (-1.0 - pos) / temperature
    log_ng = torch.where(inner > 0, torch.maximum(debiased, floor), floor)
    return torch.nn.functional.softplus(log_ng).mean()


class HCLLoss(Loss):
    """The HCL loss of this module's docstring as a module.

    Args:
        temperature: t > 0 dividing the similarity (default 0.5, the paper's).
        beta: concentration beta >= 0 of the hardness weights (default 1.0; 0: uniform).
        tau_plus: class prior 0 <= tau_plus < 1 of the debiasing (default 0.1; 0: none).

    Raises:
        LossOptionError: for a bad temperature, beta or tau_plus (``.option`` names it).

    Example::

        >>> import torch
        >>> from cl_diag.losses import HCLLoss, LOSSES
        >>> g = torch.Generator().manual_seed(1)
        >>> z1, z2 = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
        >>> loss = HCLLoss(temperature=0.5, beta=1.0, tau_plus=0.1)
        >>> bool(loss(z1, z2) == LOSSES["hcl"](z1, z2, temperature=0.5, beta=1.0, tau_plus=0.1))
        True
    """

    name = "hcl"
    family = None
    negatives = "both"
    takes_queue = True
    hyperparameters = (
        HParam("temperature", 0.5, float, "t > 0 dividing the similarity", check=positive),
        HParam(
            "beta",
            1.0,
            float,
            "concentration >= 0 on hard negatives (0: uniform)",
            check=non_negative,
        ),
        HParam(
            "tau_plus",
            0.1,
            float,
            "class prior in [0, 1) of the debiasing (0: none)",
            check=_prior_ok,
        ),
    )

    def __init__(self, temperature: float = 0.5, beta: float = 1.0, tau_plus: float = 0.1):
        super().__init__()
        self._configure(temperature=temperature, beta=beta, tau_plus=tau_plus)

    def _compute(
        self, u: torch.Tensor, v: torch.Tensor, labels: torch.Tensor | None, **hp: Any
    ) -> torch.Tensor:
        s_uv = u @ v.T
        pos = s_uv.diagonal()
        l_uv = hcl_direction(s_uv, u @ u.T, pos, **hp)
        l_vu = hcl_direction(s_uv.T, v @ v.T, pos, **hp)
        return 0.5 * (l_uv + l_vu)

    def _compute_queue(self, u, v, k1, k2, labels, **hp):
        # Anchors of view 1 see view 2's queued keys and the reverse: N = 2B - 2 + K negatives.
        s_uv = u @ v.T
        pos = s_uv.diagonal()
        l_uv = hcl_direction(s_uv, u @ u.T, pos, s_queue=u @ k2.T, **hp)
        l_vu = hcl_direction(s_uv.T, v @ v.T, pos, s_queue=v @ k1.T, **hp)
        return 0.5 * (l_uv + l_vu)


hcl = HCLLoss()
