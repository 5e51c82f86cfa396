"""Closed forms from "On the Similarities of Embeddings in Contrastive
Learning" (Lee, Lim, Lee, Sohn, ICML 2025) and the sigmoid-loss optimum of
Lee, Chang, Sohn (2024), for the reports' theory panel. Pure Python/numpy.

n is the number of training instances (full batch), m a mini-batch size.

- :func:`delta`: the simplex-ETF similarity -1/(n-1) (Thm 5.1).
- :func:`alignment_ceiling`: Thm 5.2, E[s_pos] <= 1 + (E[s_neg] + 1/(n-1)).
- :func:`variance_band`: Thm 5.5, the optimum's negative-similarity variance
  with fixed mini-batches of size m.
- :func:`additive_cross_only_condition`: Thm 5.1 (iii) versus Thm 5.3 (8)
  for a Def. 3.2 loss with (c1, c2) = (1, 0).
- :func:`sigmoid_eq10`, :func:`sigmoid_eq10_lhs`: Example 5.4, Eq. 10.
- :func:`sigmoid_optimum`: the constant-embedding-model (CCEM) optimum of the
  full-batch sigmoid loss: regime, x*, s_pos*, s_neg*.

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
import numbers
from typing import Callable, NamedTuple

from scipy.optimize import brentq

__all__ = [
    "delta",
    "alignment_ceiling",
    "variance_band",
    "additive_cross_only_condition",
    "sigmoid_eq10_lhs",
    "sigmoid_eq10",
    "SigmoidOptimum",
    "sigmoid_optimum",
    "additive_optimum_x",
]


def _check_n(n, name: str = "n", least: int = 2) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {n!r}")
    return int(n)


def delta(n: int) -> float:
    """-1/(n-1): the pairwise similarity of an n-point simplex ETF, the
    full-batch optimum's negative similarity (Thm 5.1) and VRN's target
    (Def. 5.7). n >= 2."""
    n = _check_n(n)
    return -1.0 / (n - 1)


def alignment_ceiling(mean_neg: float, n: int) -> float:
    """Thm 5.2, Eq. 7: the largest achievable mean positive similarity given
    the mean (cross-view) negative similarity over n instances,
    1 + (E[s_neg] + 1/(n-1)). Below delta(n) this is < 1: perfect alignment
    is impossible once negatives are excessively separated. (Values > 1 mean
    the bound is not binding.)"""
    n = _check_n(n)
    return 1.0 + (float(mean_neg) + 1.0 / (n - 1))


def variance_band(n: int, m: int) -> tuple[float, float]:
    """Thm 5.5, Eq. 11: with n instances split into fixed mini-batches of
    size m, the optimum's negative-pair similarity variance lies in

        [ (n-m) / ((m-1)(n-1)^2),  n(n-m) / ((m-1)(n-1)^2) ].

    The theorem assumes m divides n (b = n/m batches) and d >= m-1 (d >= b(m-1)
    for the lower end); the formula is returned for any 2 <= m <= n. m = n gives
    (0, 0), the full-batch ETF."""
    n, m = _check_n(n), _check_n(m, "m")
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
    n = _check_n(n, least=3)
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
    n = _check_n(n)
    log_lhs = _softplus(t / (n - 1) + b) - _softplus(t - b)
    return math.exp(log_lhs) if log_lhs < 700 else math.inf


def sigmoid_eq10(t: float, b: float, n: int) -> bool:
    """Example 5.4, Eq. 10: True when

        (1 + e^{t/(n-1) + b}) / (1 + e^{t - b}) < (n - 2) / 2,

    i.e. the full-batch cross-view-only sigmoid loss over n instances
    (d >= n) has s_pos < 1 and s_neg < -1/(n-1) at its optimum (excessive
    separation). False for n <= 2 (the right side is <= 0)."""
    t, b = _check_tb(t, b)
    n = _check_n(n)
    if n <= 2:
        return False
    return _softplus(t / (n - 1) + b) - _softplus(t - b) < math.log((n - 2) / 2)


class SigmoidOptimum(NamedTuple):
    regime: str   # "etf" (x* = 1), "antipodal" (x* = 0) or "interior"
    x: float      # x* in [0, 1]
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
    n = _check_n(n, least=3)
    k = (n - 2) / (n - 1)

    def slope(x: float) -> float:
        # l'(x) / t; increasing in x because l is convex.
        return -2.0 * _sigmoid(b + t - 2 * t * x) + (n - 2) * _sigmoid(t * x * k - t - b)

    if not sigmoid_eq10(t, b, n):
        x, regime = 1.0, "etf"
    elif t + b <= math.log((n - 2) / 2):
        x, regime = 0.0, "antipodal"
    else:
        x, regime = brentq(slope, 0.0, 1.0, xtol=1e-14, rtol=1e-14), "interior"
    return SigmoidOptimum(regime, x, 2 * x - 1, x * k - 1)


def additive_optimum_x(
    phi: Callable[[float], float], psi: Callable[[float], float], n: int
) -> float:
    """[inferred in paper-notes 5.1] For a Def. 3.2 loss with (c1, c2) = (1, 0)
    and d >= n, the full-batch optimum's mean positive similarity
    x* = argmin_{x in [-1, 1]} h(x), h(x) = -phi(x) + psi(((n-2)x - n)/(2(n-1)));
    every negative then has similarity ((n-2)x* - n)/(2(n-1))."""
    from scipy.optimize import minimize_scalar

    n = _check_n(n, least=3)

    def h(x: float) -> float:
        return -phi(x) + psi(((n - 2) * x - n) / (2 * (n - 1)))

    res = minimize_scalar(h, bounds=(-1.0, 1.0), method="bounded",
                          options={"xatol": 1e-12})
    # The bounded search never evaluates the end points; check them.
    best = min((res.x, -1.0, 1.0), key=h)
    return float(best)
