"""Closed forms from "On the Similarities of Embeddings in Contrastive Learning" (Lee, Lim, Lee,
Sohn, ICML 2025) and the sigmoid-loss optimum of Lee, Chang, Sohn (2024), and the theory panel
they make for a run. n is the number of training instances (full batch), m a mini-batch size:
:func:`delta` -1/(n-1) (Thm 5.1), :func:`alignment_ceiling` (Thm 5.2), :func:`variance_band`
(Thm 5.5), :func:`additive_cross_only_condition` (Thm 5.1 (iii) vs 5.3), :func:`sigmoid_eq10`
(Example 5.4, Eq. 10), :func:`sigmoid_optimum` (the CCEM optimum), :func:`validity` (whether
d dimensions can hold the optima) and :func:`ssem_panel` (a ``supcl`` run's SSEM prediction,
:mod:`cl_diag.measurement.ssem`). :func:`theory_panel` says which theorem applies to a run's
loss and what it predicts; the closed forms are pure Python/numpy. The same closed forms,
before any training, are ``cl-diag theory``'s (:mod:`cl_diag.cli.theory`,
:mod:`cl_diag.orchestration.theory`).

Example::

    >>> from cl_diag.measurement.theory import delta, variance_band, sigmoid_optimum
    >>> delta(4)
    -0.3333333333333333
    >>> [round(x, 6) for x in variance_band(4, 2)]  # Fig. 2: [2/9, 8/9]
    [0.222222, 0.888889]
    >>> sigmoid_optimum(1.0, 1.0, 8).regime
    'interior'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from cl_diag.measurement.argcheck import check_count
from cl_diag.measurement.ssem import ssem_optimum, view_split_threshold
from cl_diag.result import (
    Ccem,
    Condition,
    Eq10,
    FullBatch,
    FullBatchSigmoid,
    Layer,
    LayerCheck,
    Predicted,
    SigmoidPanel,
    Ssem,
    SsemPredicted,
    Theory,
    TheoryLoss,
    VarianceBand,
)
from cl_diag.runconfig import RunConfig
from cl_diag.vocabulary import PairType

__all__ = [
    "SigmoidOptimum",
    "additive_cross_only_condition",
    "additive_optimum_x",
    "alignment_ceiling",
    "antipodal_bias_boundary",
    "delta",
    "eq10_bias_boundary",
    "sigmoid_eq10",
    "sigmoid_eq10_lhs",
    "sigmoid_optimum",
    "sigmoid_optimum_loss",
    "ssem_panel",
    "theory_panel",
    "validity",
    "variance_band",
]


def delta(n: int) -> float:
    """-1/(n-1): the pairwise similarity of an n-point simplex ETF, the
    full-batch optimum's negative similarity (Thm 5.1) and VRN's target
    (Def. 5.7). n >= 2."""
    n = check_count(n)
    return -1.0 / (n - 1)


def alignment_ceiling(mean_neg: float, n: int) -> float:
    """Thm 5.2, Eq. 7: the largest achievable mean positive similarity given
    the mean (cross-view) negative similarity over n instances,
    1 + E[s_neg] + 1/(n-1). Below delta(n) this is < 1: perfect alignment
    is impossible once negatives are excessively separated. (Values > 1 mean
    the bound is not binding.) Evaluated left to right, (1 + E[s_neg]) + 1/(n-1):
    the rounding every result.json has recorded in ``geometry.alignment_ceiling``."""
    n = check_count(n)
    return 1.0 + float(mean_neg) + 1.0 / (n - 1)


def variance_band(n: int, m: int) -> tuple[float, float]:
    """Thm 5.5, Eq. 11: with n instances split into fixed mini-batches of
    size m, the optimum's negative-pair similarity variance lies in

        [ (n-m) / ((m-1)(n-1)^2),  n(n-m) / ((m-1)(n-1)^2) ].

    The theorem assumes m divides n (b = n/m batches) and d >= m-1 (d >= b(m-1)
    for the lower end); the formula is returned for any 2 <= m <= n. m = n gives
    (0, 0), the full-batch ETF."""
    n, m = check_count(n), check_count(m, "m")
    if m > n:
        raise ValueError(f"batch size m = {m} exceeds the number of instances n = {n}")
    denom = (m - 1) * (n - 1) ** 2
    return (n - m) / denom, n * (n - m) / denom


def additive_cross_only_condition(dphi_at_1: float, dpsi_at_delta: float, n: int) -> str:
    """Compare phi'(1) with ((n-2)/(2(n-1))) psi'(-1/(n-1)) for a Def. 3.2
    loss with (c1, c2) = (1, 0) (needs d >= n):

    - ``"etf"``: phi'(1) > rhs, Thm 5.1 (iii): the optimum is the simplex ETF;
    - ``"excessive"``: phi'(1) < rhs, Thm 5.3 condition (8): s_pos < 1 and
      s_neg < -1/(n-1) at the optimum;
    - ``"boundary"``: equality (neither theorem applies as stated).

    Pass the derivatives already evaluated, e.g. for the sigmoid loss
    phi'(1) = t / (1 + e^{t-b}), psi'(delta) = (n-1) t / (1 + e^{t/(n-1)+b})."""
    n = check_count(n, least=3)
    rhs = (n - 2) / (2 * (n - 1)) * float(dpsi_at_delta)
    lhs = float(dphi_at_1)
    if lhs > rhs:
        return "etf"
    if lhs < rhs:
        return "excessive"
    return "boundary"


def _softplus(x: float) -> float:
    # log(1 + e^x) without overflow for large |x|.
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _check_tb(t: float, b: float) -> tuple[float, float]:
    t, b = float(t), float(b)
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"t must be a finite number > 0, got {t!r}")
    if not math.isfinite(b):
        raise ValueError(f"b must be finite, got {b!r}")
    return t, b


def sigmoid_eq10_lhs(t: float, b: float, n: int) -> float:
    """The left side of Eq. 10, (1 + e^{t/(n-1) + b}) / (1 + e^{t - b}),
    in the paper's sign convention (t multiplies, b = -b_SigLIP).
    May be inf for extreme t, b; :func:`sigmoid_eq10` works in log space."""
    t, b = _check_tb(t, b)
    n = check_count(n)
    log_lhs = _softplus(t / (n - 1) + b) - _softplus(t - b)
    return math.exp(log_lhs) if log_lhs < 700 else math.inf


def sigmoid_eq10(t: float, b: float, n: int) -> bool:
    """Example 5.4, Eq. 10: True when

        (1 + e^{t/(n-1) + b}) / (1 + e^{t - b}) < (n - 2) / 2,

    i.e. the full-batch cross-view-only sigmoid loss over n instances
    (d >= n) has s_pos < 1 and s_neg < -1/(n-1) at its optimum (excessive
    separation). False for n <= 2 (the right side is <= 0)."""
    t, b = _check_tb(t, b)
    n = check_count(n)
    if n <= 2:
        return False
    return _softplus(t / (n - 1) + b) - _softplus(t - b) < math.log((n - 2) / 2)


def eq10_bias_boundary(t: float, n: int) -> float:
    """b*: Eq. 10 holds at (t, b) over N = n pairs exactly when b < b* (the left side
    softplus(t/(N-1) + b) - softplus(t - b) increases in b; b* is where it meets
    log((N-2)/2)). Needs n >= 3.

    >>> b = eq10_bias_boundary(1.0, 8)
    >>> sigmoid_eq10(1.0, b - 1e-6, 8), sigmoid_eq10(1.0, b + 1e-6, 8)
    (True, False)
    """
    from scipy.optimize import brentq

    if n < 3:
        raise ValueError(f"Eq. 10 needs N >= 3 pairs, got {n}")
    target = math.log((n - 2) / 2)

    def gap(b: float) -> float:
        return _softplus(t / (n - 1) + b) - _softplus(t - b) - target

    lo, hi = -1.0, 1.0
    while gap(lo) > 0:
        lo *= 2
    while gap(hi) < 0:
        hi *= 2
    return float(brentq(gap, lo, hi, xtol=1e-12, rtol=1e-14))


def antipodal_bias_boundary(t: float, n: int) -> float:
    """The b at and below which the CCEM optimum over N = n pairs is antipodal:
    t + b <= log((N-2)/2) (:func:`cl_diag.measurement.theory.sigmoid_optimum`)."""
    return math.log((n - 2) / 2) - t


class SigmoidOptimum(NamedTuple):
    regime: str  # "etf" (x* = 1), "antipodal" (x* = 0) or "interior"
    x: float  # x* in [0, 1]
    s_pos: float  # 2 x* - 1
    s_neg: float  # x* (N-2)/(N-1) - 1, every negative equal


def sigmoid_optimum(t: float, b: float, n: int) -> SigmoidOptimum:
    """The full-batch optimum of the cross-view sigmoid loss (paper Eq. 9,
    paper sign convention) over N = n pairs with d >= N, within the
    constant-embedding model of Lee, Chang, Sohn (2024) (paper-notes 11.1):

        s_pos = 2x - 1,  s_neg = x (N-2)/(N-1) - 1,  x in [0, 1],
        l(x) = softplus(b - t(2x-1)) + (N-1) softplus(t (x(N-2)/(N-1) - 1) - b)  (convex)

    - ETF (x* = 1) iff 2 (1 + e^{b + t/(N-1)}) >= (N-2)(1 + e^{t-b})
      (the complement of Eq. 10);
    - antipodal (x* = 0, s_pos = s_neg = -1) iff t + b <= log((N-2)/2);
    - otherwise x* in (0, 1) solves
      2 sigma(b + t - 2tx) = (N-2) sigma(t x (N-2)/(N-1) - t - b).
    """
    t, b = _check_tb(t, b)
    n = check_count(n, least=3)
    k = (n - 2) / (n - 1)

    def slope(x: float) -> float:
        # l'(x) / t; increasing in x because l is convex.
        return -2.0 * _sigmoid(b + t - 2 * t * x) + (n - 2) * _sigmoid(t * x * k - t - b)

    if not sigmoid_eq10(t, b, n):
        x, regime = 1.0, "etf"
    elif t + b <= math.log((n - 2) / 2):
        x, regime = 0.0, "antipodal"
    else:
        from scipy.optimize import brentq  # scipy costs a second to import: only here

        x, regime = brentq(slope, 0.0, 1.0, xtol=1e-14, rtol=1e-14), "interior"
    return SigmoidOptimum(regime, x, 2 * x - 1, x * k - 1)


def sigmoid_optimum_loss(t: float, b: float, n: int) -> float:
    """The full-batch cross-view sigmoid loss (Eq. 9, ``within_view=False``) at its optimum
    over N = n pairs, d >= N: l(x*) of :func:`sigmoid_optimum`,

        l(x*) = softplus(b - t s_pos) + (N - 1) softplus(t s_neg - b),

    the loss a converged run on the full batch reaches (each anchor's row is the same)."""
    opt = sigmoid_optimum(t, b, n)
    t, b = float(t), float(b)
    return _softplus(b - t * opt.s_pos) + (n - 1) * _softplus(t * opt.s_neg - b)


def additive_optimum_x(
    phi: Callable[[float], float], psi: Callable[[float], float], n: int
) -> float:
    """[inferred in paper-notes 5.1] For a Def. 3.2 loss with (c1, c2) = (1, 0)
    and d >= n, the full-batch optimum's mean positive similarity
    x* = argmin_{x in [-1, 1]} h(x), h(x) = -phi(x) + psi(((n-2)x - n)/(2(n-1)));
    every negative then has similarity ((n-2)x* - n)/(2(n-1))."""
    from scipy.optimize import minimize_scalar

    n = check_count(n, least=3)

    def h(x: float) -> float:
        return -phi(x) + psi(((n - 2) * x - n) / (2 * (n - 1)))

    res = minimize_scalar(h, bounds=(-1.0, 1.0), method="bounded", options={"xatol": 1e-12})
    # The bounded search never evaluates the end points; check them.
    best = min((res.x, -1.0, 1.0), key=h)
    return float(best)


# --------------------------------------------------------------------------- the theory panel


def _derivative(fn: Callable[[Any], Any], x: float) -> float:
    """d fn / dx at x by autograd in float64 (the loss library's phi and psi are torch
    functions)."""
    import torch

    t = torch.tensor(float(x), dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(fn(t), t)
    return float(grad)


def _float_fn(fn: Callable[[Any], Any]) -> Callable[[float], float]:
    import torch

    return lambda x: float(fn(torch.tensor(float(x), dtype=torch.float64)))


def theory_panel(config: RunConfig, n_ref: int, layers: Mapping[str, Any]) -> Theory:
    """Predictions of the paper's theorems for this run (paper-notes 5 and 11), beside the
    measured layers.

    * Which theorem applies follows from the loss's family and (c1, c2), for the paper's
      cases (0, 1), (1, 0), (1, 1) only (others are said to be outside them): Def. 3.1 ->
      Thm 5.1(i); Def. 3.2 with c2 = 1 -> 5.1(ii); Def. 3.2 with (c1, c2) = (1, 0) ->
      5.1(iii) if phi'(1) > ((N-2)/(2(N-1))) psi'(-1/(N-1)), else Thm 5.3 (excessive
      separation). That last test depends on N: the top-level entries take one fixed
      mini-batch, N = m; ``full_batch`` the same at N = n_ref (present when they differ).
    * Thm 5.1 predicts s_pos = 1 and s_neg = -1/(n-1); with fixed mini-batches of size m
      (Thm 5.5, Eq. 11) the negative-similarity variance lies in
      [(n-m)/((m-1)(n-1)^2), n(n-m)/((m-1)(n-1)^2)] and each batch is its own simplex at
      -1/(m-1).
    * Sigmoid loss (Example 5.4): the Eq. 10 test and the double-constant optimum of
      paper-notes 11.1, at N = m (``sigmoid``) and at N = n_ref (``full_batch.sigmoid``).
    * The Eq. 11 band is the prediction without VRN (VRN changes the fixed-batch optimum).
    * Per layer: the Thm 5.2 ceiling 1 + mean_neg + 1/(n-1) against the measured positive
      mean, and the validity caveat when d < n - 1 (the optima need a simplex to fit).
    * ``supcl`` (outside Def. 3.1 / 3.2): the SSEM block of :func:`ssem_panel` (the collapse
      threshold alpha_c and the optimum beta* on the balanced batch) under ``ssem``.

    ``config`` is the run's training config (:func:`cl_diag.runconfig.parse_run_config`);
    ``layers`` maps a layer name to its :class:`cl_diag.result.Layer` (or the layer's JSON
    form). Returns the ``theory`` block of result.json.
    """
    # imported here: the closed forms above (the reports use them) need neither losses nor torch
    from cl_diag.losses import LOSSES

    name, m = config.loss, config.batch_size
    loss = LOSSES.get(name) if name is not None else None
    # The theorems are about the embedding the loss sees; the other layers are context.
    loss_layer = (
        "projector" if "projector" in layers else ("embedding" if "embedding" in layers else None)
    )
    checks = _layer_checks(layers, n_ref, m)
    family = getattr(loss, "family", None) if loss is not None else None
    hp: dict[str, Any] = {}
    if loss is not None:
        hp = config.hyperparameters(loss.hyperparameter_names)
        try:
            hp = loss.resolve(**hp)
        except ValueError:
            hp = loss.defaults
    if family not in ("info", "ind-add") or loss is None:  # (family is None when loss is)
        if loss is None:
            why = (
                f"the run's loss {name!r} is unknown to cl-diag"
                if name
                else "the training config names no loss"
            )
        else:
            why = f"{name} is not cast into the paper's framework (Def. 3.1 / 3.2)"
        text = f"No optimum is predicted: {why}."
        ssem = None
        if name == "supcl":  # the SSEM speaks to it instead (paper-notes 11.3)
            loss_d = _layer_facts(layers[loss_layer])[0] if loss_layer else None
            ssem, sentence = ssem_panel(config, hp, loss_d)
            text = (
                f"Thms 5.1-5.5 do not apply: {why}. {sentence}"
                if ssem is not None
                else f"{text} {sentence}"
            )
        return Theory(
            n_ref=n_ref,
            batch_size=m,
            loss=TheoryLoss(name=name),
            statement=text,
            loss_layer=loss_layer,
            ssem=ssem,
            layers=checks,
        )

    coefficients = loss.coefficients(**hp)
    assert coefficients is not None  # both families of the framework have (c1, c2)
    c1, c2 = coefficients
    theory_loss = TheoryLoss(
        name=name,
        family="info_nce" if family == "info" else "independently_additive",
        c1=float(c1),
        c2=float(c2),
    )
    # Thm 5.3, Eq. 10 and the CCEM optimum depend on the number of pairs N the loss sees: one
    # fixed mini-batch (N = m, the top-level entries) or the full batch (N = n_ref, full_batch).
    N = m if m is not None and m >= 3 else n_ref
    top = _optimum(loss, name, family, hp, (c1, c2), N, n_ref, m)
    statement: list[str] = list(top.statement)
    band = within_batch = None
    if top.theorem and top.theorem.startswith("5.1") and m is not None and 2 <= m < n_ref:
        lo, hi = variance_band(n_ref, m)
        band = VarianceBand(n=n_ref, m=m, lo=lo, hi=hi)
        within_batch = delta(m)
        statement.append(
            f"With fixed mini-batches of m = {m} (Thm 5.5) each batch collapses to its own "
            f"simplex at -1/(m-1) = {delta(m):.6g}, more separated than -1/(n-1), and the "
            f"negative variance lies in [{lo:.4g}, {hi:.4g}] (Eq. 11), without VRN."
        )
    full_batch = None
    if top.depends_on_n and n_ref != N:
        full = _optimum(loss, name, family, hp, (c1, c2), n_ref, n_ref, m)
        full_batch = FullBatch(
            N=n_ref,
            theorem=full.theorem,
            predicted=full.predicted or Predicted(),
            condition=full.condition,
            sigmoid=None
            if full.sigmoid is None
            else FullBatchSigmoid(eq10=full.sigmoid.eq10, ccem=full.sigmoid.ccem),
        )
        statement += full.statement
    if config.vrn.on:
        weight = config.vrn.weight
        statement.append(
            f"VRN ({'lambda not recorded' if weight is None else f'lambda = {weight:g}'}) "
            "penalises the squared distance of cross-view negatives from "
            "-1/(n-1), shrinking their variance (Def. 5.7); it changes the fixed-batch optimum, so "
            "the Eq. 11 band (without VRN) is not its prediction."
        )
    return Theory(
        n_ref=n_ref,
        batch_size=m,
        loss=theory_loss,
        theorem=top.theorem,
        statement=" ".join(statement),
        predicted=top.predicted or Predicted(),
        variance_band=band,
        within_batch_optimum=within_batch,
        sigmoid=top.sigmoid,
        loss_layer=loss_layer,
        condition=top.condition,
        full_batch=full_batch,
        layers=checks,
    )


#: the (c1, c2) of the paper's theorems (Def. 3.1 and 3.2 list only these)
PAPER_CASES = ((0.0, 1.0), (1.0, 0.0), (1.0, 1.0))


def _where(pairs: int, n_ref: int, m: int | None) -> str:
    """How a theorem's N reads in words: one fixed mini-batch, or the full batch."""
    if pairs == n_ref:
        return f"full batch, N = n_ref = {pairs}"
    return f"one fixed mini-batch, N = m = {pairs}"


@dataclass
class _Optimum:
    """What the theorems say with N pairs in the loss: ``theorem``, ``condition`` (Thm 5.1 (iii)
    against Thm 5.3 (8)), ``predicted`` means, ``sigmoid`` (Eq. 10 and the CCEM optimum),
    ``statement`` sentences and ``depends_on_n`` (True for the (1, 0) additive case, whose
    theorem and optimum change with N)."""

    theorem: str | None = None
    condition: Condition | None = None
    predicted: Predicted | None = None
    sigmoid: SigmoidPanel | None = None
    statement: list[str] = field(default_factory=list)
    depends_on_n: bool = False


def _optimum(
    loss: Any,
    name: str | None,
    family: str,
    hp: Mapping[str, Any],
    c: tuple[float, float],
    N: int,
    n_ref: int,
    m: int | None,
) -> _Optimum:
    """Which theorem applies with N pairs in the loss and what it predicts (:class:`_Optimum`)."""
    from cl_diag.losses import IndependentlyAdditive  # (see theory_panel: losses import torch)

    c1, c2 = c
    out = _Optimum()
    statement = out.statement
    in_cases = (float(c1), float(c2)) in PAPER_CASES
    psi_increasing = True
    phi = psi = None
    if family == "ind-add":
        assert isinstance(loss, IndependentlyAdditive)  # the family's one class
        phi, psi = loss.phi_psi(N, **hp)
        # Thms 5.1 (ii)/(iii) and 5.3 assume an increasing psi on [-1, 1]; spectral's psi = x^2
        # is not (its optimum has orthogonal negatives, s_neg = 0, not a simplex).
        psi_increasing = all(_derivative(psi, x) >= 0 for x in (-1.0, -0.5, -1e-3, 0.5, 1.0))
    excessive = False
    if not in_cases:
        statement.append(
            f"No optimum is predicted: (c1, c2) = ({c1:g}, {c2:g}) is outside the paper's cases "
            "(0, 1), (1, 0) and (1, 1), for which Thms 5.1 and 5.3 are stated."
        )
    elif family == "info":
        out.theorem = "5.1(i)"
    elif not psi_increasing:
        statement.append(
            f"No optimum is predicted: psi of {name} is not increasing on [-1, 1], so Thms 5.1 "
            "and 5.3 do not apply."
        )
    elif c2 > 0:
        out.theorem = "5.1(ii)"
    else:
        out.depends_on_n = True
        assert phi is not None and psi is not None
        lhs, rhs_psi = _derivative(phi, 1.0), _derivative(psi, delta(N))
        verdict = additive_cross_only_condition(lhs, rhs_psi, N)
        out.condition = Condition(
            N=N, dphi_at_1=lhs, rhs=(N - 2) / (2 * (N - 1)) * rhs_psi, verdict=verdict
        )
        if verdict == "excessive":
            out.theorem = "5.3"
            excessive = True
        elif verdict == "etf":
            out.theorem = "5.1(iii)"
        else:
            statement.append(
                f"At N = {N}, phi'(1) equals the bound of Thm 5.3 (8): neither theorem applies "
                "as stated."
            )
    delta_n = delta(n_ref)
    if out.theorem and out.theorem.startswith("5.1"):
        out.predicted = Predicted(positive_mean=1.0, negative_mean=delta_n)
        if out.depends_on_n:
            statement.append(
                f"Thm 5.1(iii) ({_where(N, n_ref, m)}): phi'(1) exceeds the Thm 5.3 bound, so the "
                f"optimum is the simplex ETF, s_pos = 1 and s_neg = -1/(n-1) = {delta_n:.6g}."
            )
        else:
            statement.append(
                f"Thm {out.theorem}: at the full-batch optimum positives align (s_pos = 1) and "
                f"every negative sits at -1/(n-1) = {delta_n:.6g} (a simplex ETF)."
            )
    if excessive:
        if name == "sigmoid":
            opt = sigmoid_optimum(hp["temperature"], hp["bias"], N)
            out.predicted = Predicted(positive_mean=opt.s_pos, negative_mean=opt.s_neg)
        else:
            assert phi is not None and psi is not None
            x = additive_optimum_x(_float_fn(phi), _float_fn(psi), N)
            out.predicted = Predicted(
                positive_mean=x, negative_mean=((N - 2) * x - N) / (2 * (N - 1))
            )
        statement.append(
            f"Thm 5.3 ({_where(N, n_ref, m)}): the cross-view-only additive loss over N = {N} "
            "pairs separates negatives excessively at its optimum, s_pos < 1 and s_neg < "
            "-1/(N-1); adding within-view negatives (c2 = 1) removes this."
        )
    if name == "sigmoid" and in_cases and c2 == 0 and N >= 3:
        t, b = hp["temperature"], hp["bias"]
        opt = sigmoid_optimum(t, b, N)
        out.sigmoid = SigmoidPanel(
            t=t,
            b=b,
            eq10=Eq10(
                N=N, lhs=sigmoid_eq10_lhs(t, b, N), rhs=(N - 2) / 2, holds=sigmoid_eq10(t, b, N)
            ),
            ccem=Ccem(N=N, x_star=opt.x, s_pos=opt.s_pos, s_neg=opt.s_neg, regime=opt.regime),
        )
    return out


def ssem_panel(config: RunConfig, hp: Mapping[str, Any], d: object) -> tuple[Ssem | None, str]:
    """The SSEM block of a ``supcl`` run's theory panel and its sentence (paper-notes 11.3).

    N = the balanced batch: m = ``classes_per_batch`` classes x n = batch / m instances, p = 2
    views, variant B (the ``supcl`` loss); ``d`` is the loss layer's dimension. Without
    ``--balanced-batch`` the batches hold no fixed m x n and nothing is predicted (None).
    The block holds alpha, tau, m, n, p, alpha_c, beta*, the regime, the predicted s_w, s_b
    and within-class variance, the caveat ``d_below_mn_minus_1`` (the SSEM needs d >= mn - 1;
    below, the prediction is qualitative) and the SSEM's region: ``alpha_split`` =
    :func:`view_split_threshold` and ``outside_ssem_region`` (alpha < alpha_split: the optimum
    of variant B parts the views of an instance and the SSEM is not its optimum; docs/ssem.md).
    """
    batch, m = config.batch_size, config.classes_per_batch
    if not (
        config.balanced_batch
        and batch is not None
        and m is not None
        and m >= 2
        and batch % m == 0
        and batch // m >= 2
    ):
        return None, (
            "No SSEM prediction: the run did not use --balanced-batch, so its batches hold no "
            "fixed m classes x n instances (paper-notes 11.3)."
        )
    n, p, alpha, tau = batch // m, 2, float(hp["alpha"]), float(hp["temperature"])
    opt = ssem_optimum(alpha, tau, m, n, p)
    d_ok = isinstance(d, int) and not isinstance(d, bool)
    narrow = bool(d_ok and d < m * n - 1)  # type: ignore[operator]
    alpha_split = view_split_threshold(tau, m, n, p)
    outside = alpha < alpha_split
    block = Ssem(
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
        d_below_mn_minus_1=narrow,
        alpha_split=alpha_split,
        outside_ssem_region=outside,
    )
    verdict = (
        f"alpha = {alpha:g} <= alpha_c: class collapse is predicted (beta* = 1, within-class "
        "variance 0)"
        if opt.regime == "collapse"
        else f"alpha = {alpha:g} > alpha_c: beta* = {opt.beta:.4g}, within-class variance "
        f"1 - beta* = {opt.within_class_variance:.4g}, s_w = {opt.s_w:.4g}, s_b = {opt.s_b:.4g}"
    )
    region = (
        f"alpha = {alpha:g} < alpha_s = {alpha_split:.4g}: outside the SSEM's region, the "
        "optimum of this loss parts the views of an instance and the SSEM does not describe it "
        "(docs/ssem.md)"
        if outside
        else f"the SSEM is the optimum for alpha >= alpha_s = {alpha_split:.4g} (docs/ssem.md)"
    )
    other = ssem_optimum(alpha, tau, m, n, p, variant="A")
    sentence = (
        f"SSEM (paper-notes 11.3) for supcl (variant B: self excluded) on the balanced batch of "
        f"m = {m} classes x n = {n} instances x p = {p} views at tau = {tau:g}: the collapse "
        f"threshold is alpha_c = {opt.alpha_c:.4g}; {verdict}; {region}. Under variant A (self "
        f"kept) alpha_c would be {other.alpha_c:.4g} and 1 - beta* "
        f"{other.within_class_variance:.4g}."
    )
    return block, sentence


def validity(d: object, n_ref: object, m: object = None) -> tuple[bool, bool]:
    """Whether a layer of dimension d is too narrow for the theorems' optima: (d < n_ref - 1,
    d < m - 1). The full-batch simplex ETF of n_ref points needs d >= n_ref - 1 (Thm 5.1) and
    each batch's own simplex d >= m - 1 (Thm 5.5); below that the predictions are
    qualitative (paper-notes 11.4). Unknown values (None, not integers) flag nothing."""
    if not isinstance(d, int) or isinstance(d, bool):
        return False, False
    caveat = isinstance(n_ref, int) and d < n_ref - 1
    below_m = isinstance(m, int) and d < m - 1
    return bool(caveat), bool(below_m)


def _layer_facts(layer: Any) -> tuple[Any, Any, Any]:
    """(d, mean positive similarity, Thm 5.2 ceiling) of a measured layer: a
    :class:`cl_diag.result.Layer`, or its JSON form (whose missing parts read as None)."""
    if isinstance(layer, Layer):
        positive = layer.pairs.get(PairType.POSITIVE)
        mean = None if positive is None else positive.mean
        return layer.d, mean, layer.geometry.alignment_ceiling.value
    positive = (layer.get("pairs", {}).get(PairType.POSITIVE) or {}).get("mean")
    ceiling = ((layer.get("geometry") or {}).get("alignment_ceiling") or {}).get("value")
    return layer.get("d"), positive, ceiling


def _layer_checks(layers: Mapping[str, Any], n_ref: int, m: int | None) -> dict[str, LayerCheck]:
    """Thm 5.2 ceiling next to the measured positive mean, and the validity flags, per layer.

    No pass/fail flag: Eq. 7 with n = the measured rows always holds, while the ceiling stored here
    uses n_ref (the training set), so for a sample of n < n_ref rows it is an estimate, not a bound.
    """
    out = {}
    for name, layer in layers.items():
        d, pos, ceiling = _layer_facts(layer)
        caveat, below_m = validity(d, n_ref, m)
        out[name] = LayerCheck(
            d=d,
            alignment_ceiling=ceiling,
            positive_mean=pos,
            caveat=caveat,
            d_below_m_minus_1=below_m,
        )
    return out
