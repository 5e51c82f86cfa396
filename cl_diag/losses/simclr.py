"""SimCLR / NT-Xent loss: cross- and within-view negatives.

Chen et al. 2020, "A Simple Framework for Contrastive Learning of Visual
Representations"; paper Def. 3.1 with phi(x) = exp(x/t), psi = log(1+x),
(c1, c2) = (1, 1) (Lee et al., ICML 2025, App. A.1). With z = [u; v] the 2B
normalised embeddings and p(a) the other view of anchor a, the mean over all
2B anchors::

    L = (1/2B) sum_a -log( e^{z_a.z_p(a)/t} / sum_{k != a} e^{z_a.z_k/t} )

When every similarity is equal (t -> infinity, or all 2B embeddings
identical) each anchor sees 2B - 1 equal logits and L = log(2B - 1).

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES
    >>> z = torch.eye(3)
    >>> round(float(LOSSES["simclr"](z, z, temperature=1e6)), 4)  # = log(2B - 1)
    1.6094
"""

from .families import InfoNCEFamily

simclr = InfoNCEFamily(c1=1, c2=1, psi="log1p", temperature=0.2, name="simclr")
