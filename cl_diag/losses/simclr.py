"""SimCLR / NT-Xent loss: cross- and within-view negatives.

Chen et al. 2020, "A Simple Framework for Contrastive Learning of Visual
Representations"; paper Def. 3.1 with phi(x) = exp(x/t), psi = log(1+x),
(c1, c2) = (1, 1) (Lee et al., ICML 2025, App. A.1). With z = [u; v] the 2B
normalised embeddings and p(a) the other view of anchor a, the mean over all
2B anchors::

    L = (1/2B) sum_a -log( e^{z_a.z_p(a)/t} / sum_{k != a} e^{z_a.z_k/t} )

With V > 2 views (``extra_views``, ``--views V``) it is the multi-positive form: every
other view of the anchor's instance is a positive, every other row a candidate (see
:meth:`InfoNCEFamily._compute_views`).

When every similarity is equal (t -> infinity, or all 2B embeddings identical) each anchor
sees 2B - 1 equal logits and L = log(2B - 1).

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES
    >>> z = torch.eye(3)
    >>> round(float(LOSSES["simclr"](z, z, temperature=1e6)), 4)  # = log(2B - 1)
    1.6094
"""

from __future__ import annotations

from .families import InfoNCEFamily


class SimCLRLoss(InfoNCEFamily):
    """The ``simclr`` loss of this module's docstring as a module: InfoNCEFamily
    with (c1, c2) = (1, 1) and psi = log(1+x).

    Args:
        temperature: t > 0 dividing the similarity (checked here, once).

    Raises:
        LossOptionError: for a bad temperature (``.option == "temperature"``).

    Example::

        >>> import torch
        >>> from cl_diag.losses import LOSSES, SimCLRLoss
        >>> g = torch.Generator().manual_seed(1)
        >>> z1, z2 = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
        >>> loss = SimCLRLoss(temperature=0.3)
        >>> bool(loss(z1, z2) == LOSSES["simclr"](z1, z2, temperature=0.3))
        True
    """

    def __init__(self, temperature: float = 0.2):
        super().__init__(c1=1, c2=1, psi="log1p", temperature=temperature, name="simclr")


simclr = SimCLRLoss()
