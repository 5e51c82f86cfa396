"""Spectral contrastive loss, the paper's instance of Def. 3.2.

HaoChen et al. 2021, "Provable Guarantees for Self-Supervised Deep Learning
with Spectral Contrastive Loss"; cast by Lee et al. (ICML 2025, App. A.1) as
Def. 3.2 with phi(x) = x, psi(x) = x^2, (c1, c2) = (1, 0)::

    L = -(1/B) sum_i u_i.v_i + (1/(B(B-1))) sum_{i != j} (u_i.v_j)^2

(the paper prints u_i.v_j in the first sum, a typo for u_i.v_i). HaoChen et
al.'s own form weights the positive term by 2 and uses unnormalised
embeddings; this is the paper's normalised instance. No hyper-parameters.

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES
    >>> z = torch.eye(4)
    >>> float(LOSSES["spectral"](z, z))  # aligned, orthogonal: -1 + 0
    -1.0
"""

from __future__ import annotations

from .families import IndependentlyAdditive


def _identity(x):
    return x


def _square(x):
    return x * x


class SpectralLoss(IndependentlyAdditive):
    """The spectral contrastive loss of this module's docstring as a module:
    IndependentlyAdditive with phi(x) = x, psi(x) = x^2, (c1, c2) = (1, 0).
    It has no hyper-parameters.

    Example::

        >>> import torch
        >>> from cl_diag.losses import SpectralLoss
        >>> a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> float(SpectralLoss()(a, a.flip(0)))   # s_pos = 0, s_neg = 1: -0 + 1
        1.0
    """

    def __init__(self) -> None:
        super().__init__(phi=_identity, psi=_square, c1=1, c2=0, name="spectral")


spectral = SpectralLoss()
