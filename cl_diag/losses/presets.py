"""The four presets of the InfoNCE family, as rows of one table (:data:`PRESETS`).

Each is paper Def. 3.1 (Lee, Lim, Lee, Sohn, ICML 2025, App. A.1) with φ(x) = exp(x/t): the
negatives it pushes are set by (c1, c2) -- c1 weighs the cross-view negatives, c2 the
within-view ones -- and the log of the denominator by ψ (``log1p``: the positive stays in it;
``log``: it is decoupled). With z = [u; v] the 2B normalised embeddings, p(a) the other view
of anchor a and N(a) the 2B − 2 embeddings of other instances:

* ``infonce`` -- symmetric InfoNCE / CLIP (Oord et al. 2018, CPC; Radford et al. 2021,
  CLIP), (1, 0), log(1+x): cross-view negatives only, the mean of the cross-entropies of the
  B x B logit matrix U Vᵀ/t and of its transpose, the diagonal as targets::

      L = -(1/2B) Σ_i log(e^{u_i.v_i/t} / Σ_j e^{u_i.v_j/t}) - (1/2B) Σ_i log(e^{u_i.v_i/t} / Σ_j e^{u_j.v_i/t})

* ``simclr`` -- SimCLR / NT-Xent (Chen et al. 2020), (1, 1), log(1+x): cross- and
  within-view negatives; when all similarities are equal, L = log(2B − 1)::

      L = (1/2B) Σ_a -log(e^{z_a.z_p(a)/t} / Σ_{k≠a} e^{z_a.z_k/t})

* ``dcl`` -- decoupled contrastive loss (Yeh et al. 2022), (1, 1), log x: SimCLR with the
  positive out of the denominator (unweighted; their von Mises-Fisher weighting is not
  used)::

      L = (1/2B) Σ_a [-z_a.z_p(a)/t + log Σ_{k∈N(a)} e^{z_a.z_k/t}]

* ``dhel`` -- decoupled hyperspherical energy loss (Koromilas et al. 2024), (0, 1), log x:
  within-view negatives only (the paper's consistent second display)::

      L = (1/2B) Σ_i [-u_i.v_i/t + log Σ_{j≠i} e^{u_i.u_j/t}]
        + (1/2B) Σ_i [-u_i.v_i/t + log Σ_{j≠i} e^{v_i.v_j/t}]

With V > 2 views (``extra_views``, ``--views V``) infonce and simclr take the multi-positive
form (:meth:`~cl_diag.losses.families.InfoNCEFamily._compute_views`). Under DDP use
:func:`cl_diag.losses.distributed.global_loss`: the masks are then built on the gathered
global batch (a published DHEL implementation masks by local position, which is wrong across
ranks).

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES, SimCLRLoss
    >>> [LOSSES[p.name].coefficients() for p in PRESETS]
    [(1.0, 0.0), (1.0, 1.0), (1.0, 1.0), (0.0, 1.0)]
    >>> z = torch.eye(3)
    >>> round(float(LOSSES["simclr"](z, z, temperature=1e6)), 4)  # = log(2B - 1)
    1.6094
    >>> g = torch.Generator().manual_seed(1)
    >>> z1, z2 = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
    >>> bool(SimCLRLoss(temperature=0.3)(z1, z2) == LOSSES["simclr"](z1, z2, temperature=0.3))
    True
"""  # noqa: E501 (the infonce display is one line)

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .families import InfoNCEFamily

__all__ = ["PRESETS", "DCLLoss", "DHELLoss", "InfoNCELoss", "Preset", "SimCLRLoss"]


@dataclass(frozen=True)
class Preset:
    """One row: the loss's name, its (c1, c2) and ψ (``"log1p"`` or ``"log"``)."""

    name: str
    c1: float
    c2: float
    psi: str


#: the presets, in the order LOSSES lists them
PRESETS = (
    Preset("infonce", 1, 0, "log1p"),
    Preset("simclr", 1, 1, "log1p"),
    Preset("dcl", 1, 1, "log"),
    Preset("dhel", 0, 1, "log"),
)
_ROW = {preset.name: preset for preset in PRESETS}


class _PresetLoss(InfoNCEFamily):
    """InfoNCEFamily fixed at one row of :data:`PRESETS`; ``temperature`` t > 0 divides the
    similarity (checked here, once: :class:`~cl_diag.losses.LossOptionError` otherwise)."""

    row: ClassVar[Preset]

    def __init__(self, temperature: float = 0.2):
        row = self.row
        super().__init__(c1=row.c1, c2=row.c2, psi=row.psi, temperature=temperature, name=row.name)


class InfoNCELoss(_PresetLoss):
    """``infonce`` (symmetric InfoNCE / CLIP) as a module: the module docstring's first row."""

    row = _ROW["infonce"]


class SimCLRLoss(_PresetLoss):
    """``simclr`` (NT-Xent) as a module: the module docstring's second row."""

    row = _ROW["simclr"]


class DCLLoss(_PresetLoss):
    """``dcl`` (decoupled contrastive loss) as a module: the module docstring's third row."""

    row = _ROW["dcl"]


class DHELLoss(_PresetLoss):
    """``dhel`` (decoupled hyperspherical energy loss) as a module: the module docstring's
    fourth row."""

    row = _ROW["dhel"]
