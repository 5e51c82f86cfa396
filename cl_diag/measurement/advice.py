"""The sources' theory as advice before training: for a loss, its hyper-parameters and the sizes
(n training instances, batch m, dimension d, classes x instances per balanced batch), what each
source result that applies predicts, the condition it rests on and whether it holds at these
sizes, and a plain advice line where the source gives one (``cl-diag theory``).

Every number comes from the closed forms the analyses use (:mod:`cl_diag.measurement.theory`,
:mod:`cl_diag.measurement.ssem`), never a second implementation; this module only adds the
boundaries the advice names, Eq. 10's bias b* and the antipodal one from
:mod:`cl_diag.measurement.theory` (:func:`~cl_diag.measurement.theory.eq10_bias_boundary`,
:func:`~cl_diag.measurement.theory.antipodal_bias_boundary`), and here the smallest two-decimal
alpha above the SSEM's collapse threshold alpha_c.

How sure each line is: **proved** (a theorem of the source), **proved within a family** (the
optimum over a family of embeddings, the CCEM's double-constant or the SSEM's simplex-to-simplex
ones) or **numerical** (established by free optimisation, docs/ssem.md).

Example::

    >>> from cl_diag.measurement.advice import Sizes, advise
    >>> found = advise("supcl", {"alpha": 0.2, "temperature": 0.3}, Sizes(classes=10, per_class=10))
    >>> found.items[0].advice.split(":")[0]
    'alpha = 0.2 <= alpha_c = 0.2508 (tau = 0.3, 10 classes x 10 instances, variant B)'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from cl_diag.measurement.ssem import ssem_optimum, view_split_threshold
from cl_diag.measurement.theory import (
    antipodal_bias_boundary,
    delta,
    eq10_bias_boundary,
    sigmoid_eq10,
    sigmoid_eq10_lhs,
    sigmoid_optimum,
    variance_band,
)
from cl_diag.result import Ccem, Eq10, SigmoidPanel, Ssem, SsemPredicted, VarianceBand

__all__ = [
    "CERTAINTY",
    "Advice",
    "Sizes",
    "TheoryAdvice",
    "advise",
    "alpha_above",
]

#: how sure an advice line is, in words
CERTAINTY = {
    "proved": "proved (a theorem of the source)",
    "family": "proved within a family of embeddings (the optimum over that family)",
    "numerical": "numerical (free optimisation, not proved)",
}
ICML = "Lee et al. 2025 (ICML)"
CCEM = "Lee, Chang, Sohn 2024 (CCEM)"
SSEM = "the SSEM paper"
#: the largest |t| and |b| the closed forms are evaluated at (e^t overflows float64 at 709)
LARGEST = 1e4
#: the losses of the ICML paper's Def. 3.1 (InfoNCE family): Thm 5.1 (i) and Thm 5.5
INFO_NCE = ("infonce", "simclr", "dcl", "dhel")


@dataclass(frozen=True)
class Sizes:
    """The sizes the sources' results depend on: ``n`` training instances (the full batch),
    ``m`` the mini-batch size, ``d`` the embedding dimension the loss sees, and for a balanced
    supervised batch ``classes`` x ``per_class`` instances with ``views`` views each."""

    n: int | None = None
    m: int | None = None
    d: int | None = None
    classes: int | None = None
    per_class: int | None = None
    views: int = 2


@dataclass(frozen=True)
class Advice:
    """One source result applied to a setting: what it ``predicts``, the ``condition`` it
    rests on and whether it ``holds`` at these sizes (None: a size it needs is not given),
    the ``advice`` line where the source gives one, how sure it is (a :data:`CERTAINTY` key)
    and every number it used."""

    source: str
    result: str
    prediction: str
    condition: str
    holds: bool | None
    certainty: str
    advice: str | None = None
    numbers: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TheoryAdvice:
    """What the sources say about one setting: ``items`` in the order a reader needs them,
    or ``none``, the plain reason no source speaks to the loss."""

    loss: str
    settings: dict[str, Any]
    sizes: Sizes
    items: list[Advice]
    none: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Every number, machine-readably (``cl-diag theory --json``)."""
        return {
            "loss": self.loss,
            "settings": dict(self.settings),
            "sizes": asdict(self.sizes),
            "items": [asdict(item) for item in self.items],
            "none": self.none,
        }


def alpha_above(alpha_c: float) -> float:
    """The smallest two-decimal alpha strictly above ``alpha_c`` (the advice's round number)."""
    return (math.floor(alpha_c * 100 + 1e-9) + 1) / 100


def _fits(d: int | None, need: int) -> bool | None:
    return None if d is None else d >= need


def _given(holds: list[bool | None]) -> bool | None:
    """True when every part holds, False when one fails, None when one is unknown."""
    if any(h is False for h in holds):
        return False
    return None if any(h is None for h in holds) else True


def _simplex_items(sizes: Sizes, vrn: float) -> list[Advice]:
    """Thm 5.1 (i) and, with mini-batches, Thm 5.5 for a loss of the InfoNCE family."""
    n, m, d = sizes.n, sizes.m, sizes.d
    items = []
    if n is not None:
        dn = delta(n)
        items.append(
            Advice(
                source=f"{ICML}, Thm 5.1 (i)",
                result="full-batch optimum",
                prediction=(
                    f"positives align (s_pos = 1) and every negative sits at delta = "
                    f"-1/(n-1) = {dn:.4g}: the simplex ETF of n = {n} points"
                ),
                condition=f"the full batch (N = n) and d >= n - 1 = {n - 1}",
                holds=_fits(d, n - 1),
                certainty="proved",
                numbers={"s_pos": 1.0, "s_neg": dn, "delta": dn},
            )
        )
    if n is not None and m is not None and 2 <= m < n:
        lo, hi = variance_band(n, m)
        within = delta(m)
        wider = 4 * m
        larger = (
            f"m = {wider} narrows it to [{variance_band(n, wider)[0]:.3g}, "
            f"{variance_band(n, wider)[1]:.3g}]"
            if wider < n
            else f"the full batch (m = n = {n}) removes it (the ETF, variance 0)"
        )
        divides = n % m == 0
        advice = (
            f"m = {m} < n = {n}: at the fixed-batch optimum every within-batch negative sits at "
            f"-1/(m-1) = {within:.4g}, below delta = {delta(n):.4g} (excessive separation), and "
            f"the negatives' variance lies in [{lo:.3g}, {hi:.3g}] (Eq. 11); {larger}"
            + (
                f"; VRN (lambda = {vrn:g}) shrinks it, and the band is the prediction without it"
                if vrn > 0
                else "; or add VRN (--vrn, Def. 5.7), which penalises it"
            )
        )
        items.append(
            Advice(
                source=f"{ICML}, Thm 5.5 (Eq. 11)",
                result="fixed mini-batches",
                prediction=(
                    f"each batch is its own simplex at -1/(m-1) = {within:.4g}; the negative "
                    f"variance over all pairs lies in [{lo:.4g}, {hi:.4g}]"
                ),
                condition=(
                    f"fixed mini-batches with m | n ({'holds' if divides else 'fails'}: "
                    f"n mod m = {n % m}), d >= m - 1 = {m - 1}, without VRN"
                ),
                holds=_given([divides, _fits(d, m - 1), vrn == 0]),
                certainty="proved",
                advice=advice,
                # the theory panel's band (result.json's theory.variance_band) and its
                # within-batch optimum
                numbers={
                    **VarianceBand(n=n, m=m, lo=lo, hi=hi).to_dict(),
                    "within_batch_optimum": within,
                },
            )
        )
    return items


def _sigmoid_items(t: float, b: float, within_view: bool, sizes: Sizes) -> list[Advice]:
    """Example 5.4 (Eq. 10) and the CCEM optimum, at N = m (one fixed batch) and N = n."""
    if within_view:
        return [
            Advice(
                source=f"{ICML}, Thm 5.1 (ii)",
                result="within-view negatives",
                prediction=(
                    "with within-view negatives ((c1, c2) = (1, 1)) the optimum is the simplex "
                    "ETF for any t and b: no excessive separation"
                ),
                condition="an increasing psi (the sigmoid's is); d >= N - 1",
                holds=_fits(sizes.d, (sizes.m or sizes.n or 2) - 1),
                certainty="proved",
                advice=None,
                numbers={},
            )
        ]
    sizes_n = [(sizes.m, "one fixed mini-batch, N = m")] if sizes.m else []
    if sizes.n is not None and sizes.n != sizes.m:
        sizes_n.append((sizes.n, "the full batch, N = n"))
    items = []
    for big_n, where in sizes_n:
        if big_n is None or big_n < 3:
            continue
        holds = sigmoid_eq10(t, b, big_n)
        opt = sigmoid_optimum(t, b, big_n)
        b_star = eq10_bias_boundary(t, big_n)
        b_anti = antipodal_bias_boundary(t, big_n)
        dn = delta(big_n)
        if holds:
            advice = (
                f"Eq. 10 holds at N = {big_n} (Thm 5.3, proved): the cross-view-only sigmoid "
                "loss over-separates "
                f"negatives (s_neg* = {opt.s_neg:.4g} < delta = {dn:.4g}, s_pos* = "
                f"{opt.s_pos:.4g}); adding within-view negatives (--within-view) or b >= "
                f"{b_star:.3g} removes it"
                + (
                    f"; at b <= {b_anti:.3g} (here) every similarity is -1 (antipodal)"
                    if opt.regime == "antipodal"
                    else ""
                )
            )
        else:
            advice = (
                f"Eq. 10 fails at N = {big_n}: the optimum is the simplex ETF (s_neg* = delta = "
                f"{dn:.4g}); b < {b_star:.3g} would over-separate the negatives"
            )
        items.append(
            Advice(
                source=f"{ICML}, Example 5.4 (Eq. 10); {CCEM}",
                result=f"sigmoid optimum ({where})",
                prediction=(
                    f"regime {opt.regime}: x* = {opt.x:.4g}, s_pos* = {opt.s_pos:.4g}, "
                    f"s_neg* = {opt.s_neg:.4g} (delta = {dn:.4g})"
                ),
                condition=f"cross-view negatives only, {where}, d >= N = {big_n}",
                holds=_fits(sizes.d, big_n),
                # the ETF and Eq. 10's over-separation are theorems; x* below the ETF is the
                # optimum over the CCEM's double-constant family (paper-notes 11.1)
                certainty="proved" if opt.regime == "etf" else "family",
                advice=advice,
                # the theory panel's sigmoid block (result.json's theory.sigmoid), and the two
                # boundaries of b at this t
                numbers={
                    **SigmoidPanel(
                        t=t,
                        b=b,
                        eq10=Eq10(
                            N=big_n,
                            lhs=sigmoid_eq10_lhs(t, b, big_n),
                            rhs=(big_n - 2) / 2,
                            holds=holds,
                        ),
                        ccem=Ccem(
                            N=big_n,
                            x_star=opt.x,
                            s_pos=opt.s_pos,
                            s_neg=opt.s_neg,
                            regime=opt.regime,
                        ),
                    ).to_dict(),
                    "b_eq10": b_star,
                    "b_antipodal": b_anti,
                },
            )
        )
    return items


def _ssem_items(alpha: float, tau: float, sizes: Sizes) -> list[Advice]:
    """The SSEM's collapse threshold alpha_c (both variants), beta* and the region alpha_s."""
    m, n, p, d = sizes.classes, sizes.per_class, sizes.views, sizes.d
    assert m is not None and n is not None
    opt = ssem_optimum(alpha, tau, m, n, p)
    other = ssem_optimum(alpha, tau, m, n, p, variant="A")
    alpha_s = view_split_threshold(tau, m, n, p)
    outside = alpha < alpha_s
    setting = f"tau = {tau:g}, {m} classes x {n} instances, variant B"
    if opt.regime == "collapse":
        advice = (
            f"alpha = {alpha:g} <= alpha_c = {opt.alpha_c:.4g} ({setting}): the optimum "
            f"collapses every class (within-class variance 0); alpha >= "
            f"{alpha_above(opt.alpha_c):g} keeps instances apart (variant A, the self pair "
            f"kept: alpha_c = {other.alpha_c:.4g})"
        )
    else:
        advice = (
            f"alpha = {alpha:g} > alpha_c = {opt.alpha_c:.4g} ({setting}): instances stay apart "
            f"within a class, within-class variance 1 - beta* = {opt.within_class_variance:.4g}; "
            f"alpha <= {opt.alpha_c:.4g} would collapse every class"
        )
    items = [
        Advice(
            source=f"{SSEM} (paper-notes 11.3)",
            result="class collapse (SSEM)",
            prediction=(
                f"beta* = {opt.beta:.4g} ({opt.regime}), s_w = {opt.s_w:.4g}, s_b = "
                f"{opt.s_b:.4g}, within-class variance 1 - beta* = "
                f"{opt.within_class_variance:.4g}; alpha_c = {opt.alpha_c:.4g} (variant B), "
                f"{other.alpha_c:.4g} (variant A)"
            ),
            condition=(
                f"balanced batches of {m} classes x {n} instances x {p} views, d >= mn - 1 = "
                f"{m * n - 1}"
            ),
            holds=_fits(d, m * n - 1),
            certainty="family",
            advice=advice,
            # the theory panel's SSEM block (result.json's theory.ssem), and variant A beside it
            numbers={
                **Ssem(
                    alpha=alpha,
                    tau=tau,
                    m=m,
                    n=n,
                    p=p,
                    variant="B",
                    alpha_c=opt.alpha_c,
                    beta_star=opt.beta,
                    regime=opt.regime,
                    predicted=SsemPredicted(
                        s_w=opt.s_w, s_b=opt.s_b, within_class_variance=opt.within_class_variance
                    ),
                    d_below_mn_minus_1=d is not None and d < m * n - 1,
                    alpha_split=alpha_s,
                    outside_ssem_region=outside,
                ).to_dict(),
                "variant_a": {
                    "alpha_c": other.alpha_c,
                    "beta_star": other.beta,
                    "within_class_variance": other.within_class_variance,
                },
            },
        )
    ]
    items.append(
        Advice(
            source=f"{SSEM}; docs/ssem.md (the split-view family)",
            result="where the SSEM is the optimum",
            prediction=(
                f"the SSEM is the optimum for alpha >= alpha_s = {alpha_s:.4g}"
                + (
                    " (every alpha: tau >= m / ((m-1) log(m n p)))"
                    if alpha_s <= 0
                    else "; below, the optimum parts the two views of an instance"
                )
            ),
            condition=f"variant B, {m} classes x {n} instances x {p} views",
            holds=not outside,
            certainty="numerical",
            advice=(
                f"alpha = {alpha:g} < alpha_s = {alpha_s:.4g}: outside the SSEM's region, the "
                "optimum parts the views of an instance and the prediction above does not "
                "describe it"
                if outside
                else None
            ),
            numbers={},  # alpha_split and outside_ssem_region: the SSEM block above
        )
    )
    return items


def advise(
    loss: str, settings: Mapping[str, Any], sizes: Sizes, *, vrn: float = 0.0
) -> TheoryAdvice:
    """What the sources predict for ``loss`` with its hyper-parameters ``settings``
    (``temperature``, ``bias``, ``within_view``, ``alpha``: the loss's own names; missing ones
    take the loss's defaults) at ``sizes``, with VRN weight ``vrn`` (0: off).

    Raises ``ValueError`` naming the problem for an unknown loss, an impossible size or a
    hyper-parameter out of its range (the loss's own checks)."""
    from cl_diag.losses import LOSSES

    if loss not in LOSSES or loss == "vrn":
        known = ", ".join(k for k in LOSSES if k != "vrn")
        raise ValueError(f"unknown loss {loss!r}; one of: {known}")
    for name in ("n", "m", "d", "classes", "per_class", "views"):
        value = getattr(sizes, name)
        least = 1 if name == "d" else 2
        if value is not None and (isinstance(value, bool) or value < least):
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    if sizes.n is not None and sizes.m is not None and sizes.m > sizes.n:
        raise ValueError(f"the batch size m = {sizes.m} exceeds the n = {sizes.n} instances")
    if not (isinstance(vrn, (int, float)) and math.isfinite(vrn) and vrn >= 0):
        raise ValueError(f"the VRN weight must be a finite number >= 0, got {vrn!r}")
    spec = LOSSES[loss]
    given = {k: v for k, v in settings.items() if k in spec.hyperparameter_names}
    hp = spec.resolve(**given)  # the loss's own range checks (tau <= 0, alpha outside [0, 1])
    for name in ("temperature", "bias"):  # beyond these the closed forms overflow
        value = hp.get(name)
        if isinstance(value, float) and abs(value) > LARGEST:
            raise ValueError(
                f"{name} = {value:g} is beyond what the closed forms evaluate "
                f"(|{name}| <= {LARGEST:g})"
            )
    items: list[Advice] = []
    none = None
    if loss in INFO_NCE:
        items = _simplex_items(sizes, vrn)
        if not items:
            none = "give the training-set size n (and the batch size m) for a prediction"
    elif loss == "sigmoid":
        items = _sigmoid_items(
            float(hp["temperature"]), float(hp["bias"]), bool(hp["within_view"]), sizes
        )
        if not items:
            none = "give the batch size m (or the training-set size n), at least 3"
    elif loss == "supcl":
        if sizes.classes is None or sizes.per_class is None:
            none = (
                "the SSEM needs balanced batches: give --classes (m classes per batch) and "
                "--per-class (n instances of each)"
            )
        else:
            items = _ssem_items(float(hp["alpha"]), float(hp["temperature"]), sizes)
    else:
        none = (
            f"the sources make no prediction about the optimum of {loss}: it is not cast into "
            "the ICML paper's framework (Def. 3.1 / 3.2), and neither the CCEM nor the SSEM "
            "covers it"
            + {
                "spectral": " (spectral's psi is not increasing, so Thms 5.1 and 5.3 do not apply)",
                "supcon": (
                    "; the SSEM covers supcl (SupCon-style rows with a self-supervised share "
                    "alpha), not supcon's same-instance positives: try --loss supcl"
                ),
            }.get(loss, "")
        )
    if vrn > 0 and loss not in INFO_NCE:
        items.append(
            Advice(
                source=f"{ICML}, Def. 5.7",
                result="VRN",
                prediction=(
                    f"VRN (lambda = {vrn:g}) penalises the squared distance of cross-view "
                    "negatives from delta, lowering their variance"
                ),
                condition="any loss (a regulariser added to it)",
                holds=True,
                certainty="proved",
                numbers={"vrn": vrn},
            )
        )
    shown = {k: hp[k] for k in spec.hyperparameter_names}
    return TheoryAdvice(loss=loss, settings=shown, sizes=sizes, items=items, none=none)
