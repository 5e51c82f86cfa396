"""Symmetric InfoNCE / CLIP loss: cross-view negatives only.

Oord et al. 2018 (CPC), Radford et al. 2021 (CLIP); paper Def. 3.1 with
phi(x) = exp(x/t), psi = log(1+x), (c1, c2) = (1, 0) (Lee et al., ICML 2025,
App. A.1)::

    L = -(1/2B) sum_i log( e^{u_i.v_i/t} / sum_j e^{u_i.v_j/t} )
        -(1/2B) sum_i log( e^{u_i.v_i/t} / sum_j e^{u_j.v_i/t} )

i.e. the mean of the cross-entropies of the B x B logit matrix U V^T / t and
its transpose with the diagonal as targets. With V > 2 views (``extra_views``,
``--views V``) it is the multi-positive form: every other view of the anchor's
instance is a positive and the candidates are the rows of the other views (see
:meth:`InfoNCEFamily._compute_views`).

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES
    >>> g = torch.Generator().manual_seed(0)
    >>> z1, z2 = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    >>> loss = LOSSES["infonce"](z1, z2, temperature=0.2)
    >>> loss.shape, LOSSES["infonce"].family, LOSSES["infonce"].coefficients()
    (torch.Size([]), 'info', (1.0, 0.0))
"""

from __future__ import annotations

from .families import InfoNCEFamily


class InfoNCELoss(InfoNCEFamily):
    """The ``infonce`` loss of this module's docstring as a module: InfoNCEFamily
    with (c1, c2) = (1, 0) and psi = log(1+x).

    Args:
        temperature: t > 0 dividing the similarity (checked here, once).

    Raises:
        LossOptionError: for a bad temperature (``.option == "temperature"``).

    Example::

        >>> import torch
        >>> from cl_diag.losses import LOSSES, InfoNCELoss
        >>> g = torch.Generator().manual_seed(1)
        >>> z1, z2 = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
        >>> loss = InfoNCELoss(temperature=0.3)
        >>> bool(loss(z1, z2) == LOSSES["infonce"](z1, z2, temperature=0.3))
        True
    """

    def __init__(self, temperature: float = 0.2):
        super().__init__(c1=1, c2=0, psi="log1p", temperature=temperature, name="infonce")


infonce = InfoNCELoss()
