"""Decoupled hyperspherical energy loss (DHEL): within-view negatives only.

Koromilas et al. 2024, "Bridging Mini-Batch and Asymptotic Analysis in
Contrastive Learning: From InfoNCE to Kernel-Based Losses"; paper Def. 3.1
with phi(x) = exp(x/t), psi = log x, (c1, c2) = (0, 1) (Lee et al., ICML
2025, App. A.1, using the consistent second display)::

    L = (1/2B) sum_i [ -u_i.v_i/t + log sum_{j != i} e^{u_i.u_j/t} ]
      + (1/2B) sum_i [ -u_i.v_i/t + log sum_{j != i} e^{v_i.v_j/t} ]

Under DDP, use :func:`cl_diag.losses.distributed.global_loss`: the masks are
then built on the gathered global batch (a published DHEL implementation
masks by local position, which is wrong across ranks).

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES
    >>> g = torch.Generator().manual_seed(0)
    >>> z1, z2 = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    >>> LOSSES["dhel"].coefficients()
    (0.0, 1.0)
"""

from __future__ import annotations

from .families import InfoNCEFamily


class DHELLoss(InfoNCEFamily):
    """The ``dhel`` loss of this module's docstring as a module: InfoNCEFamily
    with (c1, c2) = (0, 1) and psi = log x.

    Args:
        temperature: t > 0 dividing the similarity (checked here, once).

    Raises:
        LossOptionError: for a bad temperature (``.option == "temperature"``).

    Example::

        >>> import torch
        >>> from cl_diag.losses import LOSSES, DHELLoss
        >>> g = torch.Generator().manual_seed(1)
        >>> z1, z2 = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
        >>> loss = DHELLoss(temperature=0.3)
        >>> bool(loss(z1, z2) == LOSSES["dhel"](z1, z2, temperature=0.3))
        True
    """

    def __init__(self, temperature: float = 0.2):
        super().__init__(c1=0, c2=1, psi="log", temperature=temperature, name="dhel")


dhel = DHELLoss()
