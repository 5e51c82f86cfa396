"""Pairwise sigmoid loss (SigLIP-style), in the paper's sign convention.

Zhai et al. 2023, "Sigmoid Loss for Language Image Pre-Training"; paper Eq. 9
and Def. 3.2 with phi(x) = -log(1 + e^{-t x + b}),
psi(x) = (B-1) log(1 + e^{t x - b}) (Lee et al., ICML 2025, Ex. 5.4)::

    L = (1/B) sum_i softplus(b - t u_i.v_i) + (1/B) sum_{i != j} softplus(t u_i.v_j - b)
        [ + (1/2B) sum_{i != j} ( softplus(t u_i.u_j - b) + softplus(t v_i.v_j - b) ) ]

The bracketed within-view term is added with ``within_view=True``, giving
(c1, c2) = (1, 1) instead of (1, 0) (Def. 3.2 with c2 = 1 and the same psi).
Note the conventions: ``temperature`` t *multiplies* the similarity (SigLIP's
t = exp(t')), and ``bias`` b is the negative of SigLIP's bias (their logit is
t x + b_SigLIP), so SigLIP's initialisation t = 10, b_SigLIP = -10 is
``temperature=10, bias=10`` here. The negative sum is divided by B, not
B(B-1), exactly as Eq. 9 (and SigLIP, which divides by the batch size).

``SigmoidLoss(learnable=True)`` learns t and b as SigLIP does (Zhai et al.
2023, Sec. 3.2 and Alg. 1): t = exp(t') with the parameter t' initialised to
log 10, and b initialised to -10 in SigLIP's sign, i.e. +10 in this (the
paper's Eq. 9) sign; pass ``temperature=`` / ``bias=`` to start elsewhere.

Example::

    >>> import torch
    >>> from cl_diag.losses import LOSSES
    >>> g = torch.Generator().manual_seed(0)
    >>> z1, z2 = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    >>> LOSSES["sigmoid"](z1, z2, temperature=1.0, bias=-1.0, within_view=False).shape
    torch.Size([])
    >>> LOSSES["sigmoid"].coefficients(within_view=True)
    (1.0, 1.0)
    >>> learned = SigmoidLoss(learnable=True)        # SigLIP's t = 10, b_SigLIP = -10
    >>> sorted(name for name, _ in learned.named_parameters())
    ['bias', 'log_temperature']
    >>> round(learned.hparams["temperature"], 6), learned.hparams["bias"]
    (10.0, 10.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ._common import HParam, LossOptionError, finite, positive
from .families import IndependentlyAdditive

# SigLIP's initialisation (Zhai et al. 2023, Sec. 3.2): t' = log 10, b_SigLIP = -10.
SIGLIP_TEMPERATURE = 10.0
SIGLIP_BIAS = 10.0  # in the paper's Eq. 9 sign, b = -b_SigLIP


class SigmoidLoss(IndependentlyAdditive):
    """The pairwise sigmoid loss of this module's docstring as a module.

    Args:
        temperature: t > 0, multiplies the similarity (default 1.0; with
            ``learnable``, the initial value, default 10 as SigLIP).
        bias: b in softplus(t*s - b), paper sign b = -b_SigLIP (default -1.0;
            with ``learnable``, the initial value, default +10 = SigLIP's -10).
        within_view: also push within-view negatives, (c1, c2) = (1, 1).
        learnable: learn t (as t = exp(t'), parameter ``log_temperature``) and
            b (parameter ``bias``) with the encoder; hand ``loss.parameters()``
            to the optimiser and move the module to the embeddings' device.
            A call may then not pass ``temperature`` or ``bias``.

    Raises:
        LossOptionError: at construction, for a bad value (``.option`` names it).

    Example::

        >>> import torch
        >>> from cl_diag.losses import SigmoidLoss
        >>> g = torch.Generator().manual_seed(0)
        >>> z1, z2 = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
        >>> loss = SigmoidLoss(learnable=True)
        >>> opt = torch.optim.SGD(loss.parameters(), lr=0.1)
        >>> loss(z1, z2).backward(); opt.step()
        >>> loss.hparams["bias"] != 10.0     # b moved
        True
    """

    name = "sigmoid"
    hyperparameters = (
        HParam(
            "temperature",
            1.0,
            float,
            "t > 0; multiplies the similarity (paper Eq. 9)",
            check=positive,
        ),
        HParam(
            "bias",
            -1.0,
            float,
            "b in softplus(t*s - b); paper convention, b = -b_SigLIP",
            check=finite,
        ),
        HParam("within_view", False, bool, "also push within-view negatives, (c1,c2) = (1,1)"),
    )

    def __init__(
        self,
        temperature: float | None = None,
        bias: float | None = None,
        within_view: bool = False,
        learnable: bool = False,
    ):
        if not isinstance(learnable, bool):
            raise LossOptionError(
                f"sigmoid: learnable must be True or False, got {learnable!r}",
                option="learnable",
                loss="sigmoid",
            )
        self.learnable = learnable
        super().__init__(c1=1, c2=0, name="sigmoid")
        start_t, start_b = (SIGLIP_TEMPERATURE, SIGLIP_BIAS) if learnable else (1.0, -1.0)
        self._configure(
            temperature=start_t if temperature is None else temperature,
            bias=start_b if bias is None else bias,
            within_view=within_view,
        )

    def _configure(self, **given: Any) -> None:
        super()._configure(**given)
        self.negatives = "both" if self._hp["within_view"] else "cross"
        if self.learnable:
            # fp32 parameters: the loss runs in fp32 even under autocast.
            t, b = self._hp["temperature"], self._hp["bias"]
            self.log_temperature = nn.Parameter(torch.tensor(math.log(t), dtype=torch.float32))
            self.bias = nn.Parameter(torch.tensor(b, dtype=torch.float32))

    def configure(self, *, learnable: bool | None = None, **hparams: Any) -> SigmoidLoss:
        """As :meth:`Loss.configure`; ``learnable`` switches between fixed and
        learned t, b (a switch starts from that mode's defaults unless
        ``temperature`` / ``bias`` are given)."""
        if learnable is None or learnable is self.learnable:
            return super().configure(**hparams)
        self._reject_unknown(hparams, self.hyperparameters)
        given = {"within_view": self._hp["within_view"], **hparams}
        return SigmoidLoss(learnable=learnable, **given)

    @property
    def hparams(self) -> dict[str, Any]:
        hp = dict(self._hp)
        if self.learnable:  # the current learned values (reading them syncs with the device)
            hp["temperature"] = float(self.log_temperature.detach().exp())
            hp["bias"] = float(self.bias.detach())
        return hp

    def _hparams_for_call(self, overrides: dict[str, Any]) -> dict[str, Any]:
        if not self.learnable:
            return super()._hparams_for_call(overrides)
        fixed = sorted({"temperature", "bias"} & set(overrides))
        if fixed:
            raise LossOptionError(
                f"sigmoid: {', '.join(fixed)} {'is' if len(fixed) == 1 else 'are'} learned "
                f"(learnable=True) and cannot be passed per call; build a SigmoidLoss with "
                f"learnable=False to fix {'it' if len(fixed) == 1 else 'them'}",
                option=fixed[0],
                loss=self.name,
            )
        hp = super()._hparams_for_call(overrides)
        # Tensors, so the gradient reaches t' and b; .float() keeps fp32 after a .half().
        return {**hp, "temperature": self.log_temperature.float().exp(), "bias": self.bias.float()}

    def _coefficients_for(self, hp: Mapping[str, Any]) -> tuple[float, float]:
        return (1.0, 1.0) if hp["within_view"] else (1.0, 0.0)

    def phi_psi(
        self, batch: int, *, temperature: Any, bias: Any, within_view: bool
    ) -> tuple[Callable, Callable]:
        """phi(x) = -softplus(b - t x), psi(x) = (B-1) softplus(t x - b); t and b
        are floats or (learnable) 0-dim tensors."""
        t, b = temperature, bias

        def phi(x):
            return -F.softplus(b - t * x)

        def psi(x):
            return (batch - 1) * F.softplus(t * x - b)

        return phi, psi

    def extra_repr(self) -> str:
        return super().extra_repr() + (", learnable=True" if self.learnable else "")


sigmoid = SigmoidLoss()
