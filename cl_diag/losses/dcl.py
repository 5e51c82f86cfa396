"""Decoupled contrastive loss (DCL): SimCLR with the positive removed from
the denominator.

Yeh et al. 2022, "Decoupled Contrastive Learning"; paper Def. 3.1 with
phi(x) = exp(x/t), psi = log x, (c1, c2) = (1, 1) (Lee et al., ICML 2025,
App. A.1). With z = [u; v], p(a) the other view of anchor a and N(a) the
2B - 2 embeddings of other instances::

    L = (1/2B) sum_a [ -z_a.z_p(a)/t + log sum_{k in N(a)} e^{z_a.z_k/t} ]

(the unweighted DCL; Yeh et al.'s von Mises-Fisher weighting is not used).

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES
    >>> g = torch.Generator().manual_seed(0)
    >>> z1, z2 = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    >>> LOSSES["dcl"](z1, z2, temperature=0.2).shape
    torch.Size([])
"""

from __future__ import annotations

from .families import InfoNCEFamily


class DCLLoss(InfoNCEFamily):
    """The ``dcl`` loss of this module's docstring as a module: InfoNCEFamily
    with (c1, c2) = (1, 1) and psi = log x.

    Args:
        temperature: t > 0 dividing the similarity (checked here, once).

    Raises:
        LossOptionError: for a bad temperature (``.option == "temperature"``).

    Example::

        >>> import torch
        >>> from cl_diag.losses import LOSSES, DCLLoss
        >>> g = torch.Generator().manual_seed(1)
        >>> z1, z2 = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
        >>> loss = DCLLoss(temperature=0.3)
        >>> bool(loss(z1, z2) == LOSSES["dcl"](z1, z2, temperature=0.3))
        True
    """

    def __init__(self, temperature: float = 0.2):
        super().__init__(c1=1, c2=1, psi="log", temperature=temperature, name="dcl")


dcl = DCLLoss()
