"""The paper's two general loss families (Lee, Lim, Lee, Sohn, "On the
Similarities of Embeddings in Contrastive Learning", ICML 2025, Section 3).

Def. 3.1, InfoNCE-based, with phi(x) = exp(x / t) and psi in {log(1+x), log x}::

    L_info-sym(U, V) = 1/2 L_info(U, V) + 1/2 L_info(V, U)
    L_info(U, V) = (1/B) sum_i psi( c1 sum_{j != i} exp((u_i.v_j - u_i.v_i) / t)
                                  + c2 sum_{j != i} exp((u_i.u_j - u_i.v_i) / t) )

(L_info(V, U) swaps the roles of u and v.) psi = log(1+x) with (1,0) is
InfoNCE/CLIP, with (1,1) SimCLR; psi = log x with (1,1) is DCL, with (0,1) DHEL.
The paper lists (c1, c2) in {(0,1), (1,0), (1,1)}; any c1, c2 >= 0, not both 0,
is accepted here. Computed as a log-sum-exp over the logits
(s_neg - s_pos)/t + log c, with an extra 0 logit for log(1+x).

Def. 3.2, independently additive, with user-given phi (concave, increasing)
and psi (convex, increasing)::

    L_ind-add(U, V) = -(1/B) sum_i phi(u_i.v_i)
                      + c1 / (B(B-1))  sum_{i != j} psi(u_i.v_j)
                      + c2 / (2B(B-1)) sum_{i != j} [psi(u_i.u_j) + psi(v_i.v_j)]

Example::

    >>> import torch
    >>> from cl_diag.losses.families import InfoNCEFamily, IndependentlyAdditive
    >>> z1, z2 = torch.randn(8, 16), torch.randn(8, 16)
    >>> simclr_like = InfoNCEFamily(c1=1, c2=1, psi="log1p")
    >>> float(simclr_like(z1, z2, temperature=0.2)) > 0
    True
    >>> spectral_like = IndependentlyAdditive(phi=lambda x: x, psi=lambda x: x**2, c1=1, c2=0)
    >>> spectral_like(z1, z2).shape
    torch.Size([])
    >>> module = InfoNCEFamily(c1=1, c2=0.5, psi="log", temperature=0.3)  # checked once, here
    >>> bool(module(z1, z2) == InfoNCEFamily(c1=1, c2=0.5, psi="log")(z1, z2, temperature=0.3))
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ._common import HParam, Loss, LossOptionError, multi_positive, positive
from .pair_masks import Pairs

__all__ = ["IndependentlyAdditive", "InfoNCEFamily", "ind_add", "info_sym"]

PSI_CHOICES = ("log1p", "log")


def _check_coefficients(c1: float, c2: float, loss: str | None) -> tuple[float, float]:
    """(c1, c2) as floats; :class:`LossOptionError` naming the first bad one."""
    c1, c2 = float(c1), float(c2)
    bad = [n for n, c in (("c1", c1), ("c2", c2)) if not (math.isfinite(c) and c >= 0)]
    if bad or c1 + c2 == 0:
        raise LossOptionError(
            f"(c1, c2) must be finite, >= 0 and not both 0 (the paper uses (1,0), (0,1), (1,1)); "
            f"got ({c1}, {c2})",
            option=bad[0] if bad else "c1",
            loss=loss,
        )
    return c1, c2


def _negatives(c: tuple[float, float]) -> str:
    """Which negatives a family member sees: c1 > 0 cross-view, c2 > 0 within-view."""
    return {(True, False): "cross", (False, True): "within", (True, True): "both"}[
        (c[0] > 0, c[1] > 0)
    ]


def _info_direction(
    s_cross: torch.Tensor,
    s_within: torch.Tensor,
    pos: torch.Tensor,
    c1: float,
    c2: float,
    psi: str,
    temperature: float,
    s_queue: torch.Tensor | None = None,
) -> torch.Tensor:
    """(1/B) sum_i psi(c1 sum_{j!=i} e^{(s_cross_ij - pos_i)/t}
                     + c2 sum_{j!=i} e^{(s_within_ij - pos_i)/t}),
    the sum over anchors i being the rows; s_cross, s_within are (A, B)
    similarities of A anchors to B candidates, and ``off`` masks j == i.
    ``s_queue`` (A, K): the anchors' similarities to queued keys of the other
    view, added to the sum as c1 sum_k e^{(s_queue_ik - pos_i)/t}."""
    a, b = s_cross.shape
    off = ~torch.eye(a, b, dtype=torch.bool, device=s_cross.device)
    shift = pos[:, None]
    parts = []
    neg_inf = torch.finfo(s_cross.dtype).min
    if c1 > 0:
        parts.append(((s_cross - shift) / temperature + math.log(c1)).masked_fill(~off, neg_inf))
    if c2 > 0:
        parts.append(((s_within - shift) / temperature + math.log(c2)).masked_fill(~off, neg_inf))
    if s_queue is not None:
        parts.append((s_queue - shift) / temperature + math.log(c1))
    if psi == "log1p":
        # log(1 + X) = logsumexp over the negatives' logits and a 0 logit.
        parts.append(torch.zeros(a, 1, dtype=s_cross.dtype, device=s_cross.device))
    return torch.logsumexp(torch.cat(parts, dim=1), dim=1).mean()


def info_sym(
    u: torch.Tensor, v: torch.Tensor, *, c1: float, c2: float, psi: str, temperature: float
) -> torch.Tensor:
    """Def. 3.1 symmetric loss on already-normalised fp32 rows (Eq. 2)."""
    s_uv = u @ v.T
    pos = s_uv.diagonal()
    l_uv = _info_direction(s_uv, u @ u.T, pos, c1, c2, psi, temperature)
    l_vu = _info_direction(s_uv.T, v @ v.T, pos, c1, c2, psi, temperature)
    return 0.5 * (l_uv + l_vu)


def ind_add(
    u: torch.Tensor, v: torch.Tensor, *, phi: Callable, psi: Callable, c1: float, c2: float
) -> torch.Tensor:
    """Def. 3.2 loss on already-normalised fp32 rows (Eq. 3)."""
    b = u.shape[0]
    off = ~torch.eye(b, dtype=torch.bool, device=u.device)
    s_uv = u @ v.T
    loss = -phi(s_uv.diagonal()).mean()
    if c1 > 0:
        loss = loss + c1 * psi(s_uv[off]).sum() / (b * (b - 1))
    if c2 > 0:
        within = psi((u @ u.T)[off]).sum() + psi((v @ v.T)[off]).sum()
        loss = loss + c2 * within / (2 * b * (b - 1))
    return loss


class InfoNCEFamily(Loss):
    """A Def. 3.1 (InfoNCE-based) loss with phi = exp(x/t), the given psi and
    coefficients (c1, c2): the formula of this module's docstring.

    Args:
        c1: weight of the cross-view negatives, >= 0.
        c2: weight of the within-view negatives, >= 0 (not both 0).
        psi: ``"log1p"`` for log(1+x) (the positive stays in the denominator,
            InfoNCE/SimCLR) or ``"log"`` for log x (decoupled: DCL/DHEL).
        temperature: t > 0 in phi(x) = exp(x / t), the one hyper-parameter.
        name: the loss's name in messages and reports.

    Raises:
        LossOptionError: at construction, for a bad psi, (c1, c2) or
            temperature (``.option`` names which).

    Example::

        >>> import torch
        >>> from cl_diag.losses import InfoNCEFamily
        >>> loss = InfoNCEFamily(c1=1, c2=1, psi="log1p", temperature=0.5)
        >>> z = torch.eye(3)
        >>> round(float(loss(z, z)), 4)   # each anchor: -log(e^2 / (e^2 + 4 e^0))
        0.4327
    """

    family = "info"
    hyperparameters = (
        HParam("temperature", 0.2, float, "t > 0 in phi(x) = exp(x / t)", check=positive),
    )

    def __init__(
        self,
        c1: float,
        c2: float,
        psi: str = "log1p",
        temperature: float = 0.2,
        name: str | None = None,
    ):
        super().__init__()
        if psi not in PSI_CHOICES:
            raise LossOptionError(
                f"psi must be one of {PSI_CHOICES} (log(1+x) or log x), got {psi!r}",
                option="psi",
                loss=name,
            )
        self._c = _check_coefficients(c1, c2, name)
        self.psi = psi
        self.name = name or f"info(c1={self._c[0]:g}, c2={self._c[1]:g}, psi={psi})"
        self.negatives = _negatives(self._c)
        # The multi-positive form over V > 2 views is defined for psi = log(1+x) and
        # coefficients 0 or 1 (infonce, simclr): the positives stay in the denominator.
        self.multi_view = psi == "log1p" and set(self._c) <= {0.0, 1.0}
        # Queue negatives are cross-view negatives: they need c1 > 0.
        self.takes_queue = self._c[0] > 0
        self._configure(temperature=temperature)

    def _coefficients_for(self, hp: Mapping[str, Any]) -> tuple[float, float]:
        return self._c

    def _compute(self, u, v, labels, *, temperature):
        return info_sym(u, v, c1=self._c[0], c2=self._c[1], psi=self.psi, temperature=temperature)

    def _compute_queue(self, u, v, k1, k2, labels, **hp):
        """With queued keys K1 (view 1's) and K2 (view 2's), MoCo's InfoNCE form: each direction's
        sum gains the queue as cross-view negatives of weight c1::

            L_info(U, V; K2) = (1/B) sum_i psi( c1 sum_{j != i} e^{(u_i.v_j - u_i.v_i)/t}
                                              + c1 sum_k e^{(u_i.k2_k - u_i.v_i)/t}
                                              + c2 sum_{j != i} e^{(u_i.u_j - u_i.v_i)/t} )

        and L_info(V, U; K1) likewise with the roles of u and v (and K1 for K2) swapped;
        L = (L_info(U, V; K2) + L_info(V, U; K1)) / 2. The within-view term sees no queue."""
        c1, c2 = self._c
        t = hp["temperature"]
        s_uv = u @ v.T
        pos = s_uv.diagonal()
        l_uv = _info_direction(s_uv, u @ u.T, pos, c1, c2, self.psi, t, s_queue=u @ k2.T)
        l_vu = _info_direction(s_uv.T, v @ v.T, pos, c1, c2, self.psi, t, s_queue=v @ k1.T)
        return 0.5 * (l_uv + l_vu)

    def _compute_views(self, views, labels, **hp):
        """V > 2 views, the multi-positive form: z = [z^1; ...; z^V] (VB rows), anchor a,
        positives P(a) = the other V - 1 views of a's instance, candidates A(a) = P(a) plus the
        other instances' rows in the other views (c1 = 1) and in a's view (c2 = 1)::

            L = (1/VB) sum_a -(1/(V-1)) sum_{p in P(a)} log(e^{z_a.z_p/t} / S_a)
            S_a = sum_{k in A(a)} e^{z_a.z_k/t}

        With V = 2 this is the two-view loss (simclr: A(a) = every other row; infonce: the other
        view's rows)."""
        pairs = Pairs.of_views(views[0].shape[0], views=len(views), device=views[0].device)
        c1, c2 = self._c
        others = ~pairs.same_id  # different instance (no labels: ids are instances)
        candidates = pairs.other_views.clone()
        if c1:
            candidates |= others & pairs.cross_view
        if c2:
            candidates |= others & ~pairs.cross_view
        return multi_positive(torch.cat(views), pairs.other_views, candidates, hp["temperature"])


class IndependentlyAdditive(Loss):
    """A Def. 3.2 (independently additive) loss: the formula of this module's
    docstring with user-given elementwise torch functions.

    Args:
        phi: applied to the positive similarities (concave, increasing).
        psi: applied to the negative similarities (convex, increasing).
        c1: weight of the cross-view negatives, >= 0.
        c2: weight of the within-view negatives, >= 0 (not both 0).
        name: the loss's name in messages and reports.

    No hyper-parameters: close over them in phi and psi. Subclasses (the
    sigmoid loss) override :meth:`phi_psi` when phi/psi depend on
    hyper-parameters or the batch size, and then pass no phi/psi.

    Raises:
        LossOptionError: at construction, for a bad (c1, c2) or a missing or
            non-callable phi/psi.

    Example::

        >>> import torch
        >>> from cl_diag.losses import IndependentlyAdditive
        >>> loss = IndependentlyAdditive(phi=lambda s: s, psi=lambda s: s**2, c1=1, c2=0)
        >>> z = torch.eye(4)
        >>> float(loss(z, z))   # -mean(s_pos) + mean(s_neg^2) = -1 + 0
        -1.0
    """

    family = "ind-add"

    def __init__(
        self,
        phi: Callable | None = None,
        psi: Callable | None = None,
        c1: float = 1.0,
        c2: float = 0.0,
        name: str | None = None,
    ):
        super().__init__()
        if type(self).phi_psi is IndependentlyAdditive.phi_psi:  # phi/psi come from the caller
            for what, fn in (("phi", phi), ("psi", psi)):
                if not callable(fn):
                    raise LossOptionError(
                        f"{name or 'IndependentlyAdditive'}: IndependentlyAdditive needs both "
                        f"phi and psi (elementwise torch functions); {what} is {fn!r}",
                        option=what,
                        loss=name,
                    )
        self._phi, self._psi = phi, psi
        self._c = _check_coefficients(c1, c2, name)
        self.name = name or f"ind-add(c1={self._c[0]:g}, c2={self._c[1]:g})"
        self.negatives = _negatives(self._c)
        self._configure()

    def _coefficients_for(self, hp: Mapping[str, Any]) -> tuple[float, float]:
        return self._c

    # *args and **hp typed Any: an override spells the hyper-parameters it needs
    def phi_psi(self, batch: int, *args: Any, **hp: Any) -> tuple[Callable, Callable]:
        """(phi, psi) for a batch of ``batch`` pairs at hyper-parameters ``hp``."""
        # checked callable at construction unless a subclass overrides this method
        assert self._phi is not None and self._psi is not None
        return self._phi, self._psi

    def _compute(self, u, v, labels, **hp):
        c1, c2 = self._coefficients_for(hp)
        phi, psi = self.phi_psi(u.shape[0], **hp)
        return ind_add(u, v, phi=phi, psi=psi, c1=c1, c2=c2)
